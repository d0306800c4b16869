"""``tunegate tune``: run (or resume) the tuning state machine and write the run directory.

Exit codes: 0 finished within budget or converged; 3 the baseline's data is invalid and no
must-change fix repairs it; 4 environment abnormal (two consecutive failed starts, or rollback
failed; the kept config is what remains); 5 aborted (another run holds the service, or no
confirmation in production mode); 2 usage error; 1 other; 130 interrupted (resume with
``--resume RUN_DIR``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from tunegate.cli.console import console
from tunegate.errors import UsageError

__all__ = ["run"]

EXIT_BY_STATE = {"converged": 0, "budget_exhausted": 0, "environment_abnormal": 4,
                 "aborted": 5}


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


def _config_from_journal(run_dir: Path):  # type: ignore[no-untyped-def]
    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.journal import read_journal

    path = run_dir / "journal.jsonl"
    if not path.is_file():
        raise UsageError(f"--resume {run_dir}: no journal.jsonl there; is it a run directory?")
    records = read_journal(path).records
    first = next((r for r in records if r.type == "config"), None)
    if first is None:
        raise UsageError(f"--resume {run_dir}: the run was stopped before it recorded its "
                         f"config; start it again with --config FILE --run-dir {run_dir}")
    return TuneConfig.model_validate(first.data)


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
    from tunegate.tuner.config import default_config, load_config
    from tunegate.tuner.driver import Tuner
    from tunegate.tuner.runstate import RunState
    from tunegate.tuner.summary import build_summary

    args = _parser().parse_args(list(argv))
    if args.resume is not None:
        if args.config is not None or args.run_dir is not None:
            raise UsageError("--resume RUN_DIR takes the config from the run; drop --config "
                             "and --run-dir")
        run_dir = args.resume
        config = _config_from_journal(run_dir)
    else:
        config = load_config(args.config) if args.config else default_config()
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = args.run_dir or Path("runs") / f"tune-{stamp}"
        if _holds_a_run(run_dir):
            raise UsageError(f"--run-dir {run_dir} already holds a run; use --resume {run_dir} "
                             "or another directory")
    if args.budget is not None:
        config = config.model_copy(update={"run": config.run.model_copy(
            update={"budget": args.budget})})

    def say(line: str) -> None:
        if not args.quiet:
            console.print(line)
        elif line.startswith("another tuning run holds this service"):
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
    if not args.quiet:
        console.print(_trials_table(summary))
        console.print(f"status: [bold]{rs.state.value}[/] ({rs.reason})")
        console.print(f"run directory: {run_dir} (summary.json, report.md, decisions.jsonl, "
                      "journal.jsonl)")
    if rs.reason.startswith("the baseline failed validation") or \
            rs.reason.startswith("the service as given produces invalid data"):
        return 3
    if rs.reason == "interrupted by the operator":
        return 130
    return EXIT_BY_STATE.get(rs.state.value, 1)
