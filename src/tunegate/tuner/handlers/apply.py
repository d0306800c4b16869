"""APPLY: ask the operator (production mode), then restart the server with the candidate.

The kept config is the restart's fallback: when the candidate fails to start or to verify, the
kept config is started again before anything else happens (VERIFY_START reads the outcome).
"""

from __future__ import annotations

from tunegate.tuner.approval import Answer
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.outcomes import EndReason, TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial

EVENTS = frozenset({Event.OK, Event.NOT_CONFIRMED, Event.NO_CONFIRMATION})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    assert rs.candidate is not None and rs.kept is not None
    candidate = rs.candidate
    if ctx.config.run.mode == "production":
        change = {"trial": candidate.trial, "reason": candidate.reason,
                  "diff": {k: [rs.kept.get(k), v] for k, v in candidate.params.items()
                           if rs.kept.get(k) != v}}
        answer = ctx.confirm(ctx.config.run, change)
        ctx.record(DecisionKind.APPROVAL, "operator", "1", change, {"answer": answer.value})
        if answer is Answer.NO:
            finish_trial(ctx, TrialVerdict.NOT_CONFIRMED)
            rs.candidate = None
            return Event.NOT_CONFIRMED
        if answer is Answer.ABSENT:
            rs.reason = "production mode: no confirmation for a change; nothing was applied"
            rs.end_reason = EndReason.NO_CONFIRMATION
            return Event.NO_CONFIRMATION
    rs.last_restart = ctx.restart(candidate.params).to_dict()
    return Event.OK
