"""``tunegate replay RUN_DIR``: re-derive every recorded decision; non-zero on any mismatch.

Each decision in ``decisions.jsonl`` was made by a pure function of recorded inputs
(:mod:`tunegate.tuner.deciders`). Replay re-runs it and compares output hashes; it also checks
the journal's integrity and that the kept config points to a recorded decision.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from tunegate.cli.console import console
from tunegate.errors import UsageError

__all__ = ["run"]


def run(argv: Sequence[str]) -> int:
    from tunegate.tuner.deciders import REGISTRY
    from tunegate.tuner.decisions import replay_decisions
    from tunegate.tuner.journal import read_journal

    parser = argparse.ArgumentParser(prog="tunegate replay", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(list(argv))
    decisions = args.run_dir / "decisions.jsonl"
    if not decisions.is_file():
        raise UsageError(f"{args.run_dir}: no decisions.jsonl; is it a tunegate run directory?")
    read_journal(args.run_dir / "journal.jsonl")  # raises on mid-file corruption
    records = [r for r in read_journal(decisions).records if r.type == "decision"]
    mismatches = replay_decisions(decisions, REGISTRY)
    ids = {r.data["id"] for r in records}
    problems = [f"{m.decision_id} ({m.component}): {m.reason}" for m in mismatches]
    kept = args.run_dir / "kept.json"
    if kept.is_file():
        decision = json.loads(kept.read_text(encoding="utf-8")).get("decision")
        if decision not in ids:
            problems.append(f"kept.json points to decision {decision!r}, which is not recorded")
    checked = sum(1 for r in records if r.data["component"] in REGISTRY)
    for problem in problems:
        console.print(f"[bold red]mismatch[/] {problem}")
    console.print(f"replay: {checked} of {len(records)} decisions re-derived, "
                  f"{len(problems)} mismatches")
    return 1 if problems else 0
