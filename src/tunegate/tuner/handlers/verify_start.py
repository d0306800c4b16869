"""VERIFY_START: did the candidate start and pass post-start verification?

The restart verified health, readiness, the model name, a real completion, the metrics prefix
and what the engine reports of its own arguments. A step the engine cannot answer is said, not
hidden ("not verified"). A failed start ends the trial; the restart already brought the kept
config back, and ROLLBACK decides whether two failures in a row mean the environment is
abnormal.
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext, restart_failure
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial

EVENTS = frozenset({Event.OK, Event.START_FAILED})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    assert rs.candidate is not None
    restart = rs.last_restart or {}
    status = restart.get("status")
    if status == "started":
        rs.failed_starts = 0
        unverified = (restart.get("report") or {}).get("unverified") or []
        if unverified:  # the engine ran, but did not say it runs these as recorded
            ctx.note(f"trial {rs.candidate.trial} started; not verified (the engine does not "
                     f"report them): {', '.join(map(str, unverified))}")
        return Event.OK
    rs.failed_starts += 1
    finish_trial(ctx, TrialVerdict.START_FAILED)
    ctx.start_failure = restart_failure(restart)
    ctx.note(f"trial {rs.candidate.trial} failed to start ({status}: {ctx.start_failure}); "
             "the kept config was restored")
    return Event.START_FAILED
