"""ATTRIBUTE: which change of the kept config did what, measured before the run ends.

"It got better" is not "the change caused it": a tuning result usually mixes a repaired gauge
(``benchmark.stream``), engine parameters and environment variables, and only an on/off
experiment on the same service separates them (:mod:`tunegate.tuner.attribute`: the full
factorial up to ``[attribution] max_factorial`` changes, interleaved rounds, every effect through
the gate's threshold and BH). The verdicts are the recorded decision ``attribution``;
``attribution.json`` and the report's Attribution section hold them.

A config of the experiment that fails to start is reported and the others still measured; the
kept config serves again afterwards (if it does not come back, the run ends
ENVIRONMENT_ABNORMAL, as a failed rollback does). A crash during the experiment resumes it
without measuring a finished repeat again. The run then soaks (``[soak]``) or ends in the final
state PROPOSE chose.
"""

from __future__ import annotations

from tunegate.tuner.attribute import attribute
from tunegate.tuner.context import TunerContext
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.states import Event

EVENTS = frozenset({Event.SOAK, Event.BUDGET_SPENT, Event.CONVERGED, Event.ROLLBACK_FAILED})


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    outcome = attribute(ctx)
    if not outcome["restored"]:
        rs.reason = (f"after the attribution the kept config did not start again: "
                     f"{ctx.start_failure}")
        rs.end_reason = EndReason.ROLLBACK_FAILED
        return Event.ROLLBACK_FAILED
    if ctx.config.soak is not None:
        return Event.SOAK
    return Event.CONVERGED if rs.end_reason is EndReason.CONVERGED else Event.BUDGET_SPENT
