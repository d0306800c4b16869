"""GATE: the statistical verdict on the candidate, and the SLO guard on an ACCEPT.

The ``gate`` decider re-derives the verdict from the record (fixed-n or sequential,
:mod:`tunegate.tuner.gating`). A candidate the gate accepts is kept only when it meets every
``[search] slos`` rule the kept config meets (the ``slo_guard`` decider); otherwise its trial
ends ``SLO_MISSED`` and it is rolled back like a rejection.
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.gating import gate_record
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial, means

EVENTS = frozenset({Event.ACCEPT, Event.REJECT, Event.INCONCLUSIVE})

_EVENT = {TrialVerdict.ACCEPT: Event.ACCEPT, TrialVerdict.REJECT: Event.REJECT,
          TrialVerdict.SLO_MISSED: Event.REJECT, TrialVerdict.INCONCLUSIVE: Event.INCONCLUSIVE}


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    assert rs.candidate is not None
    record = gate_record(ctx).to_dict()
    verdict, gate_id = ctx.decide(DecisionKind.GATE_VERDICT, "gate", {"record": record})
    rs.trial_decisions["gate"] = gate_id
    rs.gate_evidence = dict(record["metrics"][0])
    evidence = rs.gate_evidence
    n = len(record["inputs"][ctx.objective.name]["candidate"])
    ctx.say(f"gate: {verdict['decision']} after {n} repeat{'s' * (n != 1)} "
            f"({ctx.objective.name} {evidence['effect']:+.1%}, threshold "
            f"{evidence['threshold']:.1%}, p {evidence['p_adjusted']:.3g}; "
            + "; ".join(record["reasons"][:2]) + ")")
    outcome = TrialVerdict(verdict["decision"])
    if outcome is TrialVerdict.ACCEPT and not _meets_kept_slos(ctx, gate_id):
        outcome = TrialVerdict.SLO_MISSED
    finish_trial(ctx, outcome)
    return _EVENT[outcome]


def _meets_kept_slos(ctx: TunerContext, gate_id: str) -> bool:
    """The ``slo_guard`` decider's word on whether an accepted candidate keeps every
    ``[search] slos`` rule the kept config meets (no SLOs: it does)."""
    rs = ctx.rs
    assert rs.candidate is not None
    if not ctx.config.search.slos:
        return True
    inputs = {"trial": rs.candidate.trial, "slos": list(ctx.config.search.slos),
              "candidate": means(rs.candidate_values), "kept": means(rs.kept_values)}
    outputs, decision_id = ctx.decide(DecisionKind.GATE_VERDICT, "slo_guard", inputs,
                                      produced_by=gate_id)
    if outputs["keep"]:
        return True
    rs.trial_decisions["slo"] = decision_id
    ctx.note(f"trial {rs.candidate.trial} passed the gate but misses SLO "
             + "; ".join(outputs["missed"]) + ", which the kept config meets: rolled back")
    return False
