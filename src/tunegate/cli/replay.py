"""``tunegate replay RUN_DIR``: check a run directory as a whole and re-derive every decision.

First the run directory's integrity (:func:`tunegate.tuner.integrity.verify_run`): the hash
chains of ``journal.jsonl`` and ``decisions.jsonl`` and their head files, the heads kept in
``summary.json``, and every file the journal vouches for by its SHA-256 (each measurement's
records, ``kept.json``). Then each decision in ``decisions.jsonl``, made by a pure function of
recorded inputs (:mod:`tunegate.tuner.deciders`), is re-run and its output hash compared; and
``kept.json`` must name a recorded decision. Every problem is one line naming the file and the
line or record. Exit 0 when everything agrees, 1 on any mismatch. A run directory written
before chaining says so ("no chain") and only its decisions are replayed.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from tunegate.cli.console import console
from tunegate.errors import UsageError

__all__ = ["run"]


def _kept_decision(run_dir: Path, ids: set[str]) -> list[str]:
    """``kept.json`` must point to a recorded decision."""
    kept = run_dir / "kept.json"
    if not kept.is_file():
        return []
    try:
        decision = json.loads(kept.read_text(encoding="utf-8")).get("decision")
    except (OSError, ValueError, AttributeError) as exc:
        return [f"kept.json: unreadable ({exc})"]
    if decision not in ids:
        return [f"kept.json points to decision {decision!r}, which is not recorded"]
    return []


def run(argv: Sequence[str]) -> int:
    from tunegate.tuner.deciders import REGISTRY
    from tunegate.tuner.decisions import RECORD_TYPE, replay_records
    from tunegate.tuner.integrity import verify_run

    parser = argparse.ArgumentParser(prog="tunegate replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(list(argv))
    run_dir: Path = args.run_dir
    if not any((run_dir / name).is_file() for name in ("decisions.jsonl", "journal.jsonl")):
        raise UsageError(f"{run_dir}: no decisions.jsonl or journal.jsonl; is it a tunegate run "
                         "directory?")
    check = verify_run(run_dir)
    records = [r for r in check.decisions.records if r.type == RECORD_TYPE]
    mismatches = replay_records(records, REGISTRY)
    ids = {str(r.data.get("id")) for r in records}
    problems = list(check.problems)
    problems += [f"{m.decision_id} ({m.component}): {m.reason}" for m in mismatches]
    problems += _kept_decision(run_dir, ids)
    for note in check.notes:
        console.print(f"note: {escape(note)}")
    for problem in problems:
        console.print(f"[bold red]mismatch[/] {escape(problem)}")
    if check.chained:
        console.print(f"chain: {len(check.journal.records)} journal and "
                      f"{len(check.decisions.records)} decision records, {check.files} files "
                      "checked against their digests")
    checked = sum(1 for r in records if r.data.get("component") in REGISTRY)
    console.print(f"replay: {checked} of {len(records)} decisions re-derived, "
                  f"{len(problems)} mismatches")
    return 1 if problems else 0
