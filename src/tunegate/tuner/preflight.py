"""The first measurement of the service as given, and the must-change fixes the gauge asks for.

Before anything is tuned, the service is measured once as the user runs it. When the gauge
finds an error a must-change parameter repairs (``stream = false`` makes TTFT equal E2EL, so
``benchmark.stream`` must change), the fix is applied before the baseline (production mode
asks first). An error no fix answers ends the run: tuning on a broken gauge is worse than not
tuning.
"""

from __future__ import annotations

from typing import Any

from tunegate.tuner.approval import Answer
from tunegate.tuner.context import BENCH_PREFIX, TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.states import Event

__all__ = ["preflight"]


def preflight(ctx: TunerContext, params: dict[str, Any]) -> Event | None:
    """Measure once, apply the must-change fixes; an event ends BASELINE, ``None`` goes on."""
    rs = ctx.rs
    if rs.preflight is None:
        ctx.measure_once("preflight", params, None)
    assert rs.preflight is not None
    lights = {p.name: [p.light.value, p.required] for p in ctx.space.params}
    outputs, _ = ctx.decide(DecisionKind.BASELINE, "must_change",
                            {"lights": lights, "findings": rs.preflight["errors"]})
    engine = ctx.engine_params(outputs["changes"])
    if engine and ctx.config.run.mode == "production":
        change = {"trial": "must_change", "reason": "must-change fixes before tuning",
                  "diff": {k: [params.get(k), v] for k, v in engine.items()}}
        answer = ctx.confirm(ctx.config.run, change)
        ctx.record(DecisionKind.APPROVAL, "operator", "1", change, {"answer": answer.value})
        if answer is not Answer.YES:
            rs.reason = ("production mode: the must-change fixes "
                         f"{sorted(engine)} were not confirmed; nothing was applied")
            rs.end_reason = EndReason.NOT_CONFIRMED
            return Event.ABORT
    for name, value in outputs["changes"].items():
        if name.startswith(BENCH_PREFIX):
            rs.bench[name[len(BENCH_PREFIX):]] = value
        else:
            rs.baseline[name] = value
    for code, fixes in outputs["answers"].items():
        ctx.note(f"gauge fixed first: {code} -> {', '.join(fixes)} applied (must_change)")
    rs.preflight_done = True
    if outputs["unanswered"]:
        rs.reason = ("the service as given produces invalid data that no must-change fix "
                     "answers: " + ", ".join(outputs["unanswered"]))
        rs.end_reason = EndReason.GAUGE_UNFIXABLE
        return Event.BASELINE_INVALID
    if engine:
        ctx.engine.stop()
        ctx.set_serving(None)
        if not ctx.start(rs.baseline):
            rs.failed_starts += 1
            return Event.START_FAILED
    return None
