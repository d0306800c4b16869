"""KEEP: the accepted candidate becomes the kept config, the new rollback target.

Its repeats become the reference arm of every later gate; ``kept.json`` is written with its
digest journalled (``tunegate rollback`` restores only a vouched config).
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.handlers.recheck import recheck_due
from tunegate.tuner.integrity import write_vouched_json
from tunegate.tuner.states import Event

EVENTS = frozenset({Event.OK, Event.RECHECK})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    candidate, verdict = rs.candidate, rs.verdict
    assert candidate is not None and verdict is not None
    gate_id = rs.trial_decisions.get("gate")
    outputs, keep_id = ctx.decide(DecisionKind.KEEP, "keep_or_rollback",
                                  {"decision": verdict.value, "trial": candidate.trial,
                                   "gate_decision": gate_id}, produced_by=gate_id)
    assert outputs["action"] == "keep", outputs
    rs.kept = dict(candidate.params)
    rs.kept_trial = candidate.trial
    rs.kept_decision = keep_id
    rs.kept_values = {k: list(v) for k, v in rs.candidate_values.items()}
    rs.rounds_since_keep = 0
    assert ctx.journal is not None
    write_vouched_json(ctx.journal, ctx.run_dir, "kept.json", {  # its digest journalled
        "trial": rs.kept_trial, "params": rs.kept, "bench": rs.bench,
        "decision": keep_id, "gate_decision": gate_id})
    evidence = rs.gate_evidence
    ctx.note(f"kept trial {rs.kept_trial} ({candidate.reason}): {ctx.objective.name} "
             f"{evidence.get('effect', 0):+.1%} against a threshold of "
             f"{evidence.get('threshold', 0):.1%} (BH p {evidence.get('p_adjusted', 1):.2g}), "
             f"decision {keep_id}")
    rs.candidate = None
    return Event.RECHECK if recheck_due(ctx) else Event.OK
