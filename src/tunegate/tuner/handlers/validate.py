"""VALIDATE: the gauge's verdict on the repeat; invalid data is discarded with its findings.

A repeat that passed the gauge but lacks a metric the gate judges is discarded too: the gate
cannot judge without it, and VERIFY would wait for it for ever.
"""

from __future__ import annotations

from tunegate.tuner.context import TunerContext
from tunegate.tuner.metric_names import missing_reason
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.states import Event
from tunegate.tuner.trials import finish_trial

EVENTS = frozenset({Event.OK, Event.INVALID})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    measurement = rs.last_measurement
    assert measurement is not None and rs.candidate is not None
    measurement["consumed"] = True
    if not measurement["valid"]:
        ctx.say(f"measurement {measurement['name']} discarded by VALIDATE: "
                + ", ".join(measurement["errors"]))
        finish_trial(ctx, TrialVerdict.INVALID)
        return Event.INVALID
    gaps = [s.name for s in ctx.specs if measurement["values"].get(s.name) is None]
    if gaps:
        ctx.note(f"trial {rs.candidate.trial}: measurement {measurement['name']} has no "
                 f"{gaps[0]} ({missing_reason(gaps[0])}): discarded, the candidate is rolled "
                 "back")
        finish_trial(ctx, TrialVerdict.INVALID)
        return Event.INVALID
    for name, value in measurement["values"].items():
        if value is not None:
            rs.candidate_values.setdefault(name, []).append(float(value))
    return Event.OK
