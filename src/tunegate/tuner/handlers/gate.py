"""GATE: the statistical verdict on the candidate, and the SLO guard on an ACCEPT.

The ``gate`` decider re-derives the verdict from the record (fixed-n or sequential,
:mod:`tunegate.tuner.gating`). A candidate the gate accepts is kept only when it meets every
``[search] slos`` rule the kept config meets (the ``slo_guard`` decider); otherwise its trial
ends ``SLO_MISSED`` and it is rolled back like a rejection. Under the capacity objective the
``capacity_gate`` decider compares the two capacity searches' intervals instead
(:mod:`tunegate.tuner.capacity_gate`); the targets are inside each search.
"""

from __future__ import annotations

from tunegate.tuner import capacity_gate
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
    if ctx.capacity:
        return _capacity(ctx)
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


def _capacity(ctx: TunerContext) -> Event:
    """The capacity objective's gate: the two searches' intervals compared
    (:mod:`tunegate.tuner.capacity_gate`, the ``capacity_gate`` decider)."""
    rs, gate = ctx.rs, ctx.config.gate
    assert rs.candidate is not None and ctx.config.capacity is not None
    inputs = {"trial": rs.candidate.trial, "kept": capacity_gate.interval(rs.kept_values),
              "candidate": capacity_gate.interval(rs.candidate_values),
              "threshold": gate.floor, "alpha": gate.alpha,
              "confidence": ctx.config.capacity.confidence}
    verdict, gate_id = ctx.decide(DecisionKind.GATE_VERDICT, "capacity_gate", inputs)
    rs.trial_decisions["gate"] = gate_id
    rs.gate_evidence = {k: verdict[k] for k in ("effect", "threshold", "p_adjusted")}
    ctx.say(f"gate: {verdict['decision']} ({verdict['reason']})")
    outcome = TrialVerdict(verdict["decision"])
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
