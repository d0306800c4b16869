"""PROPOSE: the next candidate (a known remedy first, then the proposer), or the run's end.

The run ends when the budget of proposals is spent, or when nothing was kept for ``patience``
rounds (converged within budget: "near-optimal within budget", never "optimal"); with
``[attribution]`` the kept config's changes are attributed first (ATTRIBUTE), with ``[soak]``
the recommendation is soaked (SOAK); either then ends the run for the same reason.
Otherwise the next known remedy for a baseline finding is tried first, then the proposer
decides from the search history (the ``proposer`` decider, replayable), after reading the
other runs' results when the study is shared.
"""

from __future__ import annotations

from typing import Any

from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.masking import recorded_config
from tunegate.tuner.outcomes import Candidate, EndReason, ProposalKind
from tunegate.tuner.proposal_history import compact_inputs, expanded_for_call
from tunegate.tuner.states import Event
from tunegate.tuner.trials import learn_shared

EVENTS = frozenset({Event.PROPOSED, Event.BUDGET_SPENT, Event.CONVERGED, Event.SOAK,
                    Event.ATTRIBUTE})


def _after_search(ctx: TunerContext, final: Event) -> Event:
    """The search is over: attribute (``[attribution]``), soak (``[soak]``), or end."""
    if ctx.config.attribution is not None and ctx.rs.kept is not None:
        return Event.ATTRIBUTE
    return Event.SOAK if ctx.config.soak is not None else final


def _shown(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    budget, patience = ctx.config.run.budget, ctx.config.run.patience
    if rs.trials >= budget:
        rs.reason, rs.end_reason = f"budget of {budget} proposals spent", EndReason.BUDGET_SPENT
        return _after_search(ctx, Event.BUDGET_SPENT)
    if patience and rs.rounds_since_keep >= patience:
        rs.reason = f"no improvement kept in {patience} rounds: converged within budget"
        rs.end_reason = EndReason.CONVERGED
        return _after_search(ctx, Event.CONVERGED)
    assert rs.kept is not None
    rs.candidate = _remedy(ctx) if rs.remedies else _search(ctx)
    rs.trials += 1
    rs.candidate_values, rs.verdict, rs.trial_decisions, rs.gate_evidence = {}, None, {}, {}
    params = rs.candidate.params
    diff = {k: [rs.kept.get(k), v] for k, v in params.items() if rs.kept.get(k) != v}
    ctx.say(f"trial {rs.candidate.trial} ({rs.candidate.reason}): "
            + (", ".join(f"{k} {_shown(a)}->{_shown(b)}" for k, (a, b) in diff.items())
               or "no change"))
    return Event.PROPOSED


def _remedy(ctx: TunerContext) -> Candidate:
    rs = ctx.rs
    assert rs.kept is not None
    remedy = rs.remedies.pop(0)
    params = ctx.engine_params({**rs.kept, **remedy["params"]})
    trial = len([e for e in rs.history if e["op"] in ("ask", "register")])
    rs.history.append({"op": "register", "config": ctx.tunable(params),
                       "reason": f"remedy:{remedy['finding']}"})
    return Candidate(trial, params, f"remedy for {remedy['finding']}", ProposalKind.REMEDY)


def _search(ctx: TunerContext) -> Candidate:
    rs = ctx.rs
    assert rs.kept is not None
    learn_shared(ctx)
    # decided on the masked config it records; the history after the previous proposal only
    recorded = compact_inputs(recorded_config(ctx.config), rs.search_budget, rs.history,
                              rs.last_proposal)
    proposal, decision_id = ctx.decide(DecisionKind.PROPOSAL, "proposer", recorded,
                                       call_inputs=expanded_for_call(recorded, rs.history))
    rs.last_proposal = [decision_id, len(rs.history)]
    rs.history.append({"op": "ask"})
    params = ctx.engine_params({**rs.kept, **proposal["config"]})
    return Candidate(int(proposal["trial"]), params, str(proposal["reason"]),
                     ProposalKind.SEARCH, str(proposal["proposer"]))
