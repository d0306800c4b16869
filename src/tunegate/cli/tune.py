"""``tunegate tune``: run (or resume) the tuning state machine and write the run directory.

Exit codes: 0 finished within budget or converged; 3 the baseline's data is invalid and no
must-change fix repairs it; 4 environment abnormal (two consecutive failed starts, or rollback
failed; the kept config is what remains; the reason quotes the last failed start); 5 aborted
(another run holds the service or took it over, or no confirmation in production
mode); 2 usage error, before
anything runs, or a metric the config names that a valid baseline repeat does not hold (ITL
with one output token, a server figure the server does not report: the run stops ABORTED
after that repeat, since measuring again cannot produce it); 1 other; 130 interrupted (resume
with ``--resume RUN_DIR``). With ``--quiet``, a run that does not exit 0 still prints its
final state and reason on stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from tunegate.cli.console import console
from tunegate.errors import ConfigError, UsageError
from tunegate.tuner.outcomes import EndReason

if TYPE_CHECKING:
    from tunegate.tuner.config import TuneConfig

__all__ = ["config_from_journal", "run"]

EXIT_BY_REASON: dict[EndReason, int] = {
    EndReason.BUDGET_SPENT: 0, EndReason.CONVERGED: 0,
    EndReason.START_FAILED_TWICE: 4, EndReason.ROLLBACK_FAILED: 4,
    EndReason.LEASE_DENIED: 5, EndReason.LEASE_LOST: 5, EndReason.NO_CONFIRMATION: 5,
    EndReason.NOT_CONFIRMED: 5,
    EndReason.BASELINE_INVALID: 3, EndReason.GAUGE_UNFIXABLE: 3,
    EndReason.METRIC_MISSING: 2, EndReason.INTERRUPTED: 130,
    EndReason.SOAK_DEGRADED: 7,
}
"""Why the run ended -> the exit code (a test checks every reason has one)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunegate tune", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, help="TOML config (default: the simulator's seed "
                   "scenario, replaying the article's story)")
    p.add_argument("--run-dir", type=Path, help="run directory (default runs/tune-TIMESTAMP)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue an interrupted run from its journal")
    p.add_argument("--budget", type=int, help="override [run] budget (proposals)")
    p.add_argument("--quiet", action="store_true")
    return p


def config_from_journal(run_dir: Path, *, option: str = "--resume") -> TuneConfig:
    """The config a run recorded first in its journal (``option`` names the argument in
    messages)."""
    import pydantic

    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.journal import read_journal
    from tunegate.workload import format_validation_error

    path = run_dir / "journal.jsonl"
    if not path.is_file():
        raise UsageError(f"{option} {run_dir}: no journal.jsonl there; is it a run directory?")
    records = read_journal(path).records
    first = next((r for r in records if r.type == "config"), None)
    if first is None:
        raise UsageError(f"{option} {run_dir}: the run was stopped before it recorded its "
                         f"config; start it again with --config FILE --run-dir {run_dir}")
    try:
        return TuneConfig.model_validate(first.data)
    except pydantic.ValidationError as exc:  # an older tunegate's run, or an edited journal
        raise ConfigError(format_validation_error(
            exc, source=f"{option} {run_dir}: the run's config in journal.jsonl")) from None


def _with_budget(config, budget: int):  # type: ignore[no-untyped-def]
    """``config`` with ``[run] budget`` replaced by ``--budget``, validated like the file's."""
    import pydantic

    from tunegate.tuner.config import RunSection

    try:
        run = RunSection.model_validate({**config.run.model_dump(), "budget": budget})
    except pydantic.ValidationError as exc:
        why = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"--budget: {why} (got {budget})") from None
    return config.model_copy(update={"run": run})


def _check_run_dir(run_dir: Path) -> None:
    """A run directory that can hold a run: a directory, or a place one can be made and written.

    Checked before anything runs, so a typo costs nothing measured.

    Raises:
        UsageError: A file is in the way, or the directory cannot be created or written.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir}: is a file, not a directory; name a directory "
                         "(it is created if missing)")
    existing = next((p for p in (run_dir, *run_dir.parents) if p.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--run-dir {run_dir}: cannot be created or written ({existing} is "
                         f"{'not a directory' if not existing.is_dir() else 'not writable'})")


def _holds_a_run(run_dir: Path) -> bool:
    """A journal with a config record: an empty one is a run killed before it began."""
    from tunegate.tuner.journal import read_journal

    path = run_dir / "journal.jsonl"
    return path.is_file() and any(r.type == "config" for r in read_journal(path).records)


def _trials_table(summary: dict) -> Table:  # type: ignore[type-arg]
    objective = summary["objective"]["metric"]
    table = Table(title="trials", title_justify="left")
    for column in ("trial", "reason", "verdict", objective):
        table.add_column(column)
    for t in summary["history"]:
        value = t["values"].get(objective)
        table.add_row(str(t["trial"]), t["reason"], t["verdict"],
                      f"{value:.2f}" if isinstance(value, int | float) else "-")
    return table


def run(argv: Sequence[str]) -> int:
    from tunegate.cli.report import report_after
    from tunegate.tuner.config import load_config
    from tunegate.tuner.driver import Tuner
    from tunegate.tuner.runstate import RunState
    from tunegate.tuner.seed_story import default_config
    from tunegate.tuner.summary import build_summary

    args = _parser().parse_args(list(argv))
    if args.resume is not None:
        if args.config is not None or args.run_dir is not None:
            raise UsageError("--resume RUN_DIR takes the config from the run; drop --config "
                             "and --run-dir")
        run_dir = args.resume
        config = config_from_journal(run_dir)
    else:
        config = load_config(args.config) if args.config else default_config()
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = args.run_dir or Path("runs") / f"tune-{stamp}"
        _check_run_dir(run_dir)
        if _holds_a_run(run_dir):
            raise UsageError(f"--run-dir {run_dir} already holds a run; use --resume {run_dir} "
                             "or another directory")
    if args.budget is not None:
        config = _with_budget(config, args.budget)

    def say(line: str) -> None:
        if not args.quiet:
            console.print(line, markup=False)  # "[objective]", an engine's "[rank0]:" ...
        elif line.startswith("another tuning run holds this service"):  # said before the end
            print(f"tunegate tune: {line}", file=sys.stderr)  # --quiet still says why

    status = console.status("starting", spinner="dots") if not args.quiet else None

    def progress(rs: RunState) -> None:
        if status is not None:
            status.update(f"{rs.state.value}: trial {rs.trials}/{config.run.budget}, "
                          f"{rs.measurements} measurements")

    if status is not None:
        status.start()
    try:
        rs = Tuner(config, run_dir, say=say, on_transition=progress).run(
            resume=args.resume is not None)
    finally:
        if status is not None:
            status.stop()
    summary = build_summary(config, rs)
    page = report_after(run_dir) if (run_dir / "summary.json").is_file() else None
    if not args.quiet:
        console.print(_trials_table(summary))
        console.print(f"status: [bold]{rs.state.value}[/] ({escape(rs.reason)})")
        console.print(f"run directory: {escape(str(run_dir))} (summary.json, report.md, "
                      "decisions.jsonl, journal.jsonl)")
        if page is not None:
            console.print(f"report: {escape(str(page))}")
    code = _exit_code(rs.end_reason)
    if args.quiet and code != 0:
        print(f"tunegate tune: {rs.state.value}: {rs.reason}", file=sys.stderr)
    return code


def _exit_code(end_reason: EndReason | None) -> int:
    """The exit code of a run that ended for ``end_reason`` (1: none, a tuner bug)."""
    return EXIT_BY_REASON[end_reason] if end_reason is not None else 1
