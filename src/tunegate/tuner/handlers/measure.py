"""MEASURE: one benchmark repeat of the candidate (journalled before VALIDATE reads it)."""

from __future__ import annotations

from tunegate.errors import TunegateError
from tunegate.tuner.context import TunerContext
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial

EVENTS = frozenset({Event.OK, Event.MEASURE_FAILED})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    if rs.last_measurement is not None and not rs.last_measurement["consumed"]:
        return Event.OK  # measured before a crash; VALIDATE reads it
    assert rs.candidate is not None
    try:
        ctx.measure_once("candidate", rs.candidate.params, rs.candidate.trial)
    except TunegateError as exc:
        ctx.say(f"measurement failed: {exc}")
        finish_trial(ctx, TrialVerdict.MEASURE_FAILED)
        return Event.MEASURE_FAILED
    return Event.OK
