"""``tunegate attribute RUN_DIR``: which change of a tuning result did what.

Takes the changes from the run's baseline to its kept config (gauge settings such as
``benchmark.stream``, engine parameters, environment variables) and measures them on and off
against the same service: every combination up to four engine changes (own effects, interactions,
Shapley shares), one at a time beyond; interleaved rounds so that drift cancels; every effect
judged by the gate (threshold, Benjamini-Hochberg), so an effect inside the noise is "not
attributable", never a small number. A gauge change's effect is a change of measurement and is
never counted as a gain. The service ends on the kept config.

Writes ``RUN_DIR/attribution.json``, adds an Attribution section to ``report.md`` and
``summary.json``; every repeat and decision joins the run's journal (``tunegate replay RUN_DIR``
re-derives them). Interrupted, it continues where it stopped when run again.

Exit codes: 0 attributed (or already attributed: the recorded result is shown; or nothing to
attribute); 2 usage (not a finished run directory, another run holds the service); 4 the kept
config did not start again afterwards, or the experiment stopped without a verdict because two
configs in a row failed to start (run it again once the service is healthy); 5 production mode
and nobody confirmed the experiment; 130 interrupted (run it again to continue).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydantic
from rich.markup import escape
from rich.table import Table

from tunegate.cli.console import console
from tunegate.errors import UsageError

__all__ = ["attribution_table", "exit_code", "run"]

EXIT_ABNORMAL = 4
EXIT_DECLINED = 5


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tunegate attribute", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="a finished `tunegate tune` run directory")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats per config, rounded up to an even number (default: "
                             "[attribution] repeats, else power analysis)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON on stdout (progress on stderr)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _json_document(result: dict[str, Any]) -> dict[str, Any]:
    keep = ("name", "kind", "layer", "before", "after", "metric", "effect", "ci_low", "ci_high",
            "verdict", "reason", "p_adjusted", "changed_meaning", "invalid_before", "metrics")
    return {"format": "tunegate.attribution/1", "status": result.get("status"),
            "objective": result.get("objective"), "method": result.get("method"),
            "repeats": result.get("repeats"), "decision": result.get("decision"),
            "changes": [{k: c[k] for k in keep if k in c} for c in result["changes"]],
            "interactions": result.get("interactions", []),
            "total": result.get("total"), "reported": result.get("reported"),
            "not_separated": result.get("not_separated"),
            "failed": result.get("failed", {}), "restored": result.get("restored")}


def attribution_table(result: dict[str, Any]) -> Table:
    """One row per change and metric (the objective first), then the interactions; the change
    cell names its kind and values below its name."""
    from tunegate.tuner.attribution_report import effect_cell

    objective = result.get("objective") or "objective"
    rows: list[tuple[str, str, dict[str, Any]]] = [
        (c["name"], f"{c['kind']}: {c['before']} -> {c['after']}", c["metrics"])
        for c in result["changes"]]
    rows += [(i["id"], "interaction", i["metrics"]) for i in result.get("interactions", [])]
    widest = max((len(name) for name, _, _ in rows), default=6)
    table = Table(title=f"attribution (objective: {objective})", title_justify="left")
    table.add_column("change", min_width=min(widest, 16), overflow="fold")
    table.add_column("metric", overflow="fold")
    table.add_column("effect [95% CI]", overflow="fold")
    table.add_column("verdict", overflow="fold")
    for name, kind, metrics in rows:
        ordered = sorted(metrics.items(), key=lambda item: item[0] != objective)
        for index, (metric, entry) in enumerate(ordered):
            label = {0: escape(name), 1: f"[dim]{escape(kind)}[/]"}.get(index, "")
            shown = effect_cell({k: entry.get(k) for k in ("effect", "ci_low", "ci_high")})
            table.add_row(label, metric, shown, entry.get("verdict") or "-",
                          end_section=index == len(ordered) - 1)
    return table


def run(argv: Sequence[str]) -> int:
    from tunegate.cli.report import report_after
    from tunegate.cli.tune import config_from_journal
    from tunegate.tuner.attribute_run import attribute_run
    from tunegate.tuner.config import AttributionSection

    args = _parser().parse_args(list(argv))
    run_dir: Path = args.run_dir
    if not (run_dir / "journal.jsonl").is_file():
        raise UsageError(f"{run_dir}: no journal.jsonl; name a `tunegate tune` run directory")
    config = config_from_journal(run_dir, option="RUN_DIR")
    section = None
    if args.repeats is not None:
        base = config.attribution or AttributionSection()
        try:
            section = AttributionSection.model_validate(
                {**base.model_dump(), "repeats": args.repeats,
                 "max_repeats": max(base.max_repeats, args.repeats)})
        except pydantic.ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise UsageError(f"--repeats {args.repeats}: {why}") from None
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=out)

    result = attribute_run(config, run_dir, say=say, section=section)
    if not result.get("from_journal") and (run_dir / "summary.json").is_file():
        report_after(run_dir)  # the run's page gets its Attribution section
    if args.json:
        json.dump(_json_document(result), sys.stdout, indent=2)
        print()
    elif result.get("status") == "complete":
        console.print(attribution_table(result))
        if not result.get("from_journal"):
            console.print(f"written: {escape(str(run_dir / 'attribution.json'))}, report.md "
                          "and report.html (Attribution section)")
    else:
        console.print(escape(str(result.get("status"))))
    return exit_code(result)


def exit_code(result: dict[str, Any]) -> int:
    """0 attributed (or nothing to attribute); 4 the kept config did not come back, or the
    experiment stopped (two configs in a row failed to start); 5 declined in production mode."""
    status = str(result.get("status"))
    if not result.get("restored", True) or status.startswith("stopped"):
        return EXIT_ABNORMAL
    return EXIT_DECLINED if status.startswith("declined") else 0
