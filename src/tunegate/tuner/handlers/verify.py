"""VERIFY: after each valid repeat, is there enough evidence for the gate?

After the candidate's first repeat, a search proposal may be stopped early by rank (ASHA: not
in the top ``1/eta`` of the configs measured at one repeat so far; the ``early_stop``
decider). Otherwise the sequential gate looks now and says whether it can decide
(:mod:`tunegate.tuner.gating`); the fixed gate waits for the planned repeats. The baseline and
the known remedies are never stopped by rank: the baseline is the gate's reference arm, and a
remedy is tried because a finding says so, not because the search ranks it.
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.gating import candidate_repeats, gate_record, sequential
from tunegate.tuner.outcomes import ProposalKind, TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial

EVENTS = frozenset({Event.NEED_MORE, Event.ENOUGH, Event.EARLY_STOP})


def handle(ctx: TunerContext) -> Event:
    n = candidate_repeats(ctx)
    if n == 1 and _stops_early(ctx):
        return Event.EARLY_STOP
    if n >= ctx.rs.repeats:
        return Event.ENOUGH
    if sequential(ctx) and n >= 1 and gate_record(ctx).extra.get("stopped"):
        return Event.ENOUGH
    return Event.NEED_MORE


def _stops_early(ctx: TunerContext) -> bool:
    """Add the first repeat to the one-repeat rung; stop the candidate when the
    ``early_stop`` decider says so (proposals only, when more repeats follow)."""
    rs, search = ctx.rs, ctx.config.search
    candidate = rs.candidate
    assert candidate is not None
    trial = str(candidate.trial)
    score = ctx.score({k: v[:1] for k, v in rs.candidate_values.items()})
    # by trial number: the order (part of the decision's input hash) must not depend on
    # whether the snapshot was resumed from the journal
    earlier = [s for t, s in sorted(rs.first_scores.items(), key=lambda ts: int(ts[0]))
               if t != trial]
    if score is not None:
        rs.first_scores[trial] = score
    if (not search.early_stopping or rs.repeats <= 1
            or candidate.kind is ProposalKind.REMEDY):
        return False
    inputs = {"trial": candidate.trial, "score": score, "earlier": earlier,
              "eta": search.eta, "min_seen": search.min_seen,
              "metric": ctx.objective.name, "direction": ctx.objective.direction}
    outputs, decision_id = ctx.decide(DecisionKind.EARLY_STOP, "early_stop", inputs)
    if not outputs["stop"]:
        return False
    rs.trial_decisions["early_stop"] = decision_id
    finish_trial(ctx, TrialVerdict.EARLY_STOPPED)
    ctx.note(f"trial {trial} stopped early: {outputs['reason']}")
    return True
