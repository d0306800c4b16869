"""``tunegate restart`` / ``tunegate rollback``: the on-site scripts, usable outside a run.

``restart`` starts a config (a tuning config's baseline with ``--set NAME=VALUE`` changes),
polls health and readiness, runs a real forward pass; if any of it fails or times out it rolls
back automatically to the last *kept* config of ``--run-dir`` (or the baseline) and verifies
that too. ``rollback RUN_DIR`` starts the run's kept config: the last config the gate accepted,
never a rejected one (``kept.json`` is written only by KEEP). The server is left running.

Exit codes: 0 the requested config is serving; 4 it failed and the rollback target is serving;
1 nothing usable is serving; 2 a usage error, among them a ``kept.json`` the run's journal does
not vouch for (edited, replaced, deleted records: :func:`tunegate.tuner.integrity.vouched_kept`),
refused before anything starts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunegate.cli.console import console
from tunegate.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.context import TunerContext

__all__ = ["run", "run_rollback"]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _sets(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = _value(value.strip())
    return out


def _kept(run_dir: Path) -> dict[str, Any]:
    """The run's kept config, refused (exit 2) unless the journal's chain vouches for it."""
    from tunegate.tuner.integrity import NO_CHAIN, vouched_kept

    kept, vouched = vouched_kept(run_dir)
    if not vouched:
        console.print(f"note: {run_dir}: {NO_CHAIN}: kept.json is not verified")
    return kept


def _report(outcome: Any) -> int:
    data = outcome.to_dict()
    console.print(f"restart: {data['status']}")
    for key in ("report", "rollback_report"):
        report = data.get(key)
        if report:
            for step in report.get("steps", []):
                console.print(f"  {step['name']}: {step['status']} {step.get('detail', '')}")
    status = data["status"]
    return {"started": 0, "rolled_back": 4}.get(status, 1)


def _context(config: TuneConfig, run_dir: Path) -> TunerContext:
    """The engine ``[server]`` names and the tuner's view of configs (model, host, port,
    environment with secrets real), exactly as a tuning run would start them."""
    from tunegate.tuner.driver import Tuner

    return Tuner(config, run_dir).ctx


def run(argv: Sequence[str]) -> int:
    from tunegate.tuner.config import load_config
    from tunegate.tuner.seed_story import default_config

    parser = argparse.ArgumentParser(prog="tunegate restart", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, help="the tuning config naming the server")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--run-dir", type=Path, help="roll back to this run's kept config")
    parser.add_argument("--log-dir", type=Path, default=Path("logs"))
    args = parser.parse_args(list(argv))
    ctx = _context(load_config(args.config) if args.config else default_config(), Path("."))
    baseline = ctx.engine_params(ctx.space.default() | dict(ctx.config.baseline))
    fallback = _kept(args.run_dir)["params"] if args.run_dir else baseline
    target = {**baseline, **_sets(args.set)}
    from tunegate.files.atomic import private_directory

    try:
        private_directory(args.log_dir)  # server logs may quote tokens: nobody else's business
    except OSError as exc:
        raise UsageError(f"--log-dir {args.log_dir}: cannot be used as a directory "
                         f"({exc.strerror}); name a directory (it is created if missing)"
                         ) from None
    outcome = ctx.engine.restart(ctx.server_config(target), ctx.server_config(fallback),
                                 args.log_dir, budget=ctx.config.server.startup_budget_s)
    return _report(outcome)


def run_rollback(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="tunegate rollback", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="show the target only")
    args = parser.parse_args(list(argv))
    from tunegate.cli.tune import config_from_journal

    kept = _kept(args.run_dir)
    console.print(f"rollback target: trial {kept['trial']}, kept by decision {kept['decision']}")
    for name, value in sorted(kept["params"].items()):
        console.print(f"  {name} = {value!r}")
    if args.dry_run:
        return 0
    ctx = _context(config_from_journal(args.run_dir), args.run_dir)
    started = ctx.engine.start(ctx.server_config(kept["params"]), args.run_dir / "logs",
                               budget=ctx.config.server.startup_budget_s)
    for step in started.report.steps:
        console.print(f"  {step.name}: {step.status.value} {step.detail}")
    return 0 if started.ok else 1
