"""ROLLBACK: the kept config serves again, whatever ended the trial.

After a failed start the restart already brought the kept config back (or could not: the
environment is abnormal); a second failed start in a row ends the run with the kept config
serving. After any other ending the kept config is restarted and verified here. The
``keep_or_rollback`` decider records what the trial's verdict meant.
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext, failed_steps, restart_failure
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.handlers.baseline import record_abnormal
from tunegate.tuner.handlers.recheck import recheck_due
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.states import Event

EVENTS = frozenset({Event.OK, Event.RECHECK, Event.SECOND_START_FAILED, Event.ROLLBACK_FAILED})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    assert rs.kept is not None and rs.candidate is not None and rs.verdict is not None
    restart = rs.last_restart or {}
    if restart.get("status") in ("rolled_back", "rollback_failed"):
        rs.last_restart = None  # the restart already rolled back (or could not)
        if restart["status"] == "rollback_failed":
            rs.reason = ("the kept config did not come back after a failed start: "
                         + failed_steps(restart.get("rollback_report")))
            return _abnormal(ctx, EndReason.ROLLBACK_FAILED, Event.ROLLBACK_FAILED)
        if rs.failed_starts >= 2:
            rs.reason = ("two consecutive starts failed: environment abnormal; the kept config "
                         "is serving; last failure: " + restart_failure(restart))
            return _abnormal(ctx, EndReason.START_FAILED_TWICE, Event.SECOND_START_FAILED)
    elif not ctx.restore_kept():
        rs.reason = f"rolling back to the kept config failed: {ctx.start_failure}"
        return _abnormal(ctx, EndReason.ROLLBACK_FAILED, Event.ROLLBACK_FAILED)
    cause = rs.trial_decisions.get("gate") or rs.trial_decisions.get("early_stop")
    ctx.decide(DecisionKind.ROLLBACK, "keep_or_rollback",
               {"decision": rs.verdict.value, "trial": rs.candidate.trial,
                "gate_decision": rs.trial_decisions.get("gate")}, produced_by=cause)
    rs.candidate = None
    rs.rounds_since_keep += 1
    return Event.RECHECK if recheck_due(ctx) else Event.OK


def _abnormal(ctx: TunerContext, why: EndReason, event: Event) -> Event:
    ctx.rs.end_reason = why
    record_abnormal(ctx)
    return event
