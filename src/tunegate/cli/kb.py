"""``tunegate kb ...``: the knowledge base of finished tuning runs.

Every finished ``tunegate tune`` run is recorded there (its configs, measured repeats, gate
verdicts, kept config, Pareto set and environment fingerprint) so later runs can start warm.

  tunegate kb list              every run, newest first
  tunegate kb show ID           one run: fingerprint, objective, configs, trials, Pareto set
  tunegate kb diff A B          two runs' fingerprints side by side, and whether they match
  tunegate kb forget ID         remove a run

ID is a run id or any unique start of one (``kb list`` shows the shortest). ``--kb`` names the
knowledge base (a file path or a SQLAlchemy URL such as ``postgresql://user@host/db``, without
a password: the driver reads it from PGPASSWORD or ~/.pgpass); default: TUNEGATE_KB, else
``$XDG_DATA_HOME/tunegate/knowledge.sqlite`` (``~/.local/share/...``). These commands never
create one.

Exit codes: 0 ok; 2 usage (unknown or ambiguous id, a file that is not a knowledge base, a
refused URL).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from rich.table import Table
from rich.text import Text

from tunegate.cli import one_line
from tunegate.cli.console import console
from tunegate.fingerprint import Fingerprint
from tunegate.knowledge import KnowledgeBase, RunRecord, RunRow
from tunegate.knowledge.diff import RunDiff, diff_runs

__all__ = ["run", "short_ids"]

SHORT = 8
"""Shortest id shown; longer where needed to stay unique."""
_MARKS = {"same": "", "differs": "differs", "invalidates": "[bold red]invalidates[/]",
          "unconfirmed": "[yellow]unconfirmed[/]"}


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kb", metavar="PATH_OR_URL",
                        help="the knowledge base (default: TUNEGATE_KB, else "
                             "$XDG_DATA_HOME/tunegate/knowledge.sqlite)")
    parser = argparse.ArgumentParser(prog="tunegate kb", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", parents=[common], help="every run, newest first")
    listing.add_argument("--kind", help="only runs of this kind (tune)")
    show = sub.add_parser("show", parents=[common], help="one run in full")
    show.add_argument("id", metavar="ID", help="a run id or a unique start of one")
    diff = sub.add_parser("diff", parents=[common], help="two runs' fingerprints compared")
    diff.add_argument("a", metavar="A", help="the first run")
    diff.add_argument("b", metavar="B", help="the second run")
    for action in (listing, show, diff):
        action.add_argument("--json", action="store_true", help="print JSON on stdout")
    forget = sub.add_parser("forget", parents=[common], help="remove a run")
    forget.add_argument("id", metavar="ID", help="a run id or a unique start of one")
    return parser


def short_ids(ids: Iterable[str], minimum: int = SHORT) -> dict[str, str]:
    """Each id's shortest start, at least ``minimum`` long, that no other id shares.

    Example:
        >>> short_ids(["abcdef0123", "abcdef0199", "ffff"], minimum=4)
        {'abcdef0123': 'abcdef012', 'abcdef0199': 'abcdef019', 'ffff': 'ffff'}
    """
    ordered = sorted(set(ids))
    out = {}
    for index, name in enumerate(ordered):
        shared = 0
        for other in (ordered[index - 1] if index else "",
                      ordered[index + 1] if index + 1 < len(ordered) else ""):
            common = next((i for i, (x, y) in enumerate(zip(name, other, strict=False))
                           if x != y), min(len(name), len(other)))
            shared = max(shared, common)
        out[name] = name[:max(minimum, shared + 1)]
    return out


def _fmt(value: Any) -> str:
    """``value`` as one line: ``-`` for none, 6 significant digits for a float."""
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else one_line(str(value))


def _cell(value: Any) -> Text:
    """A table cell or line from data (never markup; control characters escaped)."""
    return Text(_fmt(value), style="dim" if value is None else "")


def _when(recorded_at: str) -> str:
    return recorded_at[:16].replace("T", " ")


def _print_json(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2)
    print()


def _list(args: argparse.Namespace) -> int:
    with KnowledgeBase.open(args.kb, create=False) as kb:
        rows = kb.list(kind=args.kind)
        shown, exists = kb.location.shown, kb.exists
    short = short_ids(row.id for row in rows)
    if args.json:
        _print_json({"format": "tunegate.kb-list/1", "knowledge_base": shown,
                     "exists": exists,
                     "runs": [{**asdict(row), "short_id": short[row.id]} for row in rows]})
        return 0
    if not rows:
        what = "does not exist yet" if not exists else "is empty"
        kind = f" of kind {args.kind!r}" if args.kind else ""
        console.print(_cell(f"knowledge base {shown} {what}: no run{kind} recorded "
                            "(every finished `tunegate tune` run is recorded there)"))
        return 0
    table = Table(title=_cell(f"knowledge base {shown}: {len(rows)} run(s), newest first"),
                  title_justify="left")
    for name in ("id", "recorded (UTC)", "status", "engine", "model", "accelerator",
                 "workload", "trials", "objective", "kept"):
        table.add_column(name, overflow="fold",
                         justify="right" if name in ("trials", "kept") else "left")
    for row in rows:
        digest = row.workload_digest[:12] if row.workload_digest else None
        table.add_row(*map(_cell, (short[row.id], _when(row.recorded_at), row.status,
                                   row.engine, row.model, row.accelerator, digest, row.trials,
                                   row.objective, row.kept_value)))
    console.print(table)
    return 0


def _fields_table(record: RunRecord) -> Table:
    table = Table(title="fingerprint", title_justify="left")
    for name in ("field", "value", "source", "how"):
        table.add_column(name, overflow="fold")
    for name, field in Fingerprint.from_json(record.fingerprint).fields.items():
        table.add_row(_cell(name), _cell(field.value), _cell(field.source), _cell(field.how))
    return table


def _changes(config: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    changed = [f"{k}={v}" for k, v in config.items() if baseline.get(k, object()) != v]
    return ", ".join(changed) if changed else "(baseline)"


def _show_text(record: RunRecord, shown: str) -> None:
    metric = record.objective["metric"]
    console.print(_cell(f"run {record.id} ({record.kind}) in knowledge base {shown}"))
    console.print(_cell(f"recorded {record.recorded_at}, status {record.status}, "
                        f"run directory {record.run_dir}"))
    console.print(_fields_table(record))
    console.print(_cell(f"objective: {metric} ({record.objective['direction']} is better); "
                        f"kept value: {_fmt(record.kept_value)}"))
    if record.noise:
        console.print(_cell("noise (relative sigma): " + ", ".join(
            f"{k} {v:.2%}" for k, v in record.noise.items())))
    configs = Table(title="configs", title_justify="left")
    for name in ("parameter", "baseline", "kept"):
        configs.add_column(name, overflow="fold")
    kept = record.kept or {}
    for name in dict.fromkeys([*record.baseline, *kept]):
        configs.add_row(_cell(name), _cell(record.baseline.get(name)),
                        _cell(kept.get(name) if record.kept is not None else None))
    console.print(configs)
    trials = Table(title=f"trials ({len(record.trials)})", title_justify="left")
    for name in ("trial", "verdict", "kept", "repeats", metric, "config (vs baseline)"):
        trials.add_column(name, overflow="fold", justify="right" if name == metric else "left")
    for trial in record.trials:
        trials.add_row(_cell(trial.trial), _cell(trial.verdict), _cell("kept" if trial.kept
                                                                          else ""),
                       _cell(len(trial.repeats)), _cell(trial.values.get(metric)),
                       _cell(_changes(trial.config, record.baseline)))
    console.print(trials)
    pareto = Table(title=f"Pareto set ({len(record.pareto)})", title_justify="left")
    for name in ("trial", "values", "config (vs baseline)"):
        pareto.add_column(name, overflow="fold")
    for point in record.pareto:
        values = point.get("values") or {}
        pareto.add_row(_cell(point.get("trial")), _cell(", ".join(
            f"{k}={_fmt(v)}" for k, v in values.items())),
            _cell(_changes(point.get("params") or point.get("config") or {},
                           record.baseline)))
    console.print(pareto)


def _show(args: argparse.Namespace) -> int:
    with KnowledgeBase.open(args.kb, create=False) as kb:
        record, shown = kb.get(args.id), kb.location.shown
    if args.json:
        _print_json(record.to_json())
    else:
        _show_text(record, shown)
    return 0


def _diff_text(diff: RunDiff, a: RunRecord, b: RunRecord) -> None:
    for label, record in (("A", a), ("B", b)):
        console.print(_cell(f"{label}: run {record.id}, recorded {record.recorded_at}, "
                            f"status {record.status}, {len(record.trials)} trials"))
    table = Table(title="fingerprints", title_justify="left")
    for name in ("field", "A value", "A source", "B value", "B source", ""):
        table.add_column(name, overflow="fold")
    for row in diff.fields:
        table.add_row(_cell(row.name), _cell(row.a["value"]), _cell(row.a["source"]),
                      _cell(row.b["value"]), _cell(row.b["source"]), _MARKS[row.mark])
    console.print(table)
    marked = {mark: [row.name for row in diff.fields if row.mark == mark]
              for mark in ("invalidates", "differs", "unconfirmed")}
    detail = "; ".join(f"{mark}: {', '.join(names)}" for mark, names in marked.items() if names)
    verdict = {"exact": "[green]exact[/]", "partial": "[yellow]partial[/]",
               "invalid": "[bold red]invalid[/]"}[diff.verdict]
    console.print(f"match: {verdict}" + (f" ({one_line(detail)})" if detail else ""),
                  markup=True)


def _diff(args: argparse.Namespace) -> int:
    with KnowledgeBase.open(args.kb, create=False) as kb:
        a, b = kb.get(args.a), kb.get(args.b)
    diff = diff_runs(a, b)
    if args.json:
        _print_json(diff.to_json())
    else:
        _diff_text(diff, a, b)
    return 0


def _forget(args: argparse.Namespace) -> int:
    with KnowledgeBase.open(args.kb, create=False) as kb:
        row: RunRow = kb.forget(args.id)
        shown = kb.location.shown
    console.print(_cell(f"forgot run {row.id} ({row.kind}, recorded {_when(row.recorded_at)} "
                        f"UTC, status {row.status}, model {row.model or '-'}, {row.trials} "
                        f"trials) from knowledge base {shown}"))
    return 0


_ACTIONS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": _list, "show": _show, "diff": _diff, "forget": _forget}


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    return _ACTIONS[args.action](args)
