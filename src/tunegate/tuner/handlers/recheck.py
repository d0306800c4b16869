"""RECHECK: measure the kept config while it serves: complete its arm, test it for drift.

The sequential gate may keep a candidate after a few repeats; the kept config's arm is then
shorter than the planned repeats, and every later gate would compare against a thin
reference. RECHECK measures it (no restart: it serves now) until the arm is complete. Every
``recheck_every`` trials it also measures the kept config once and runs Page-Hinkley over its
arm and the re-checks so far: a drift (the machine changed, not the config) sends the run back
to BASELINE to re-measure the reference before any further gate. Under the capacity objective
the re-check is a fresh capacity search, and a drift is an interval that disagrees with the
kept one.
"""

from __future__ import annotations

from typing import Any

from tunegate.errors import TunegateError
from tunegate.stats.drift import PageHinkley
from tunegate.tuner import capacity_gate
from tunegate.tuner.capacity_eval import pooled_answer
from tunegate.tuner.context import TunerContext
from tunegate.tuner.gating import sequential
from tunegate.tuner.states import Event
from tunegate.tuner.trials import mean

EVENTS = frozenset({Event.NEED_MORE, Event.OK, Event.DRIFT})

REFERENCE, RECHECK = "reference", "recheck"
"""Roles of the measurements taken here (arm completion, drift re-check)."""


def arm_short(ctx: TunerContext) -> bool:
    """The kept arm has fewer repeats than planned, and completing it was not given up."""
    rs = ctx.rs
    done = len(rs.kept_values.get(ctx.objective.name, []))
    return (sequential(ctx) and done < rs.repeats
            and rs.arm_given_up != rs.kept_trial)


def drift_due(ctx: TunerContext) -> bool:
    """Every ``recheck_every`` trials (once per trial count)."""
    rs, every = ctx.rs, ctx.config.run.recheck_every
    return bool(every) and rs.trials > 0 and rs.trials % every == 0 \
        and rs.rechecked_at != rs.trials


def recheck_due(ctx: TunerContext) -> bool:
    return arm_short(ctx) or drift_due(ctx)


def _pending(ctx: TunerContext, role: str) -> dict[str, Any] | None:
    """A measurement of ``role`` taken before a crash and not yet used."""
    pending = ctx.rs.last_measurement
    if pending is None or pending["consumed"] or pending["role"] != role:
        return None
    return pending


def _measure(ctx: TunerContext, role: str) -> dict[str, Any] | None:
    rs = ctx.rs
    assert rs.kept is not None
    if _pending(ctx, role) is None:
        try:
            ctx.measure_once(role, rs.kept, rs.kept_trial)
        except TunegateError as exc:
            ctx.note(f"measuring the kept config failed ({exc}); going on without it")
            return None
    measurement = rs.last_measurement
    assert measurement is not None
    rs.last_measurement = None
    if not measurement["valid"] or measurement["values"].get(ctx.objective.name) is None:
        ctx.note(f"measurement {measurement['name']} of the kept config is invalid: "
                 + ", ".join(measurement["errors"] or ["no objective value"]))
        return None
    return measurement


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    if arm_short(ctx):
        measurement = _measure(ctx, REFERENCE)
        if measurement is None:
            rs.arm_given_up = rs.kept_trial
        else:
            for name, value in measurement["values"].items():
                if value is not None:
                    rs.kept_values.setdefault(name, []).append(float(value))
            if arm_short(ctx):
                return Event.NEED_MORE
            ctx.say(f"the kept config's arm is complete: {rs.repeats} repeats")
    if not drift_due(ctx):
        return Event.OK
    rs.rechecked_at = rs.trials
    measurement = _measure(ctx, RECHECK)
    if measurement is None:
        return Event.OK
    value = float(measurement["values"][ctx.objective.name])
    rs.rechecks.append(value)
    if ctx.capacity:
        return _capacity_drift(ctx, measurement)
    base = rs.kept_values.get(ctx.objective.name, [])
    sigma = max(rs.sigma.get(ctx.objective.name, 0.02), 0.005) * mean(base)
    detector = PageHinkley(mean=mean(base), std=sigma, warmup=3)
    for x in [*base, *rs.rechecks]:
        detector.update(x)
    if not detector.drift_detected:
        return Event.OK
    ctx.note(f"drift: the kept config now measures {value:.1f} vs {mean(base):.1f}; "
             "re-baselining before any further gate")
    rs.rechecks, rs.baseline_values, rs.baseline_invalid = [], {}, 0
    return Event.DRIFT


def _capacity_drift(ctx: TunerContext, measurement: dict[str, Any]) -> Event:
    """Under the capacity objective: a fresh search of the kept config whose interval
    disagrees with the kept one (:func:`tunegate.tuner.capacity_gate.drifted`) is a drift;
    every probe measured before it is forgotten with the reference. One that agrees adds its
    probes to the kept config's (:func:`_pool`)."""
    rs = ctx.rs
    assert ctx.config.capacity is not None
    kept = capacity_gate.interval(rs.kept_values)
    again = capacity_gate.interval({k: [v] for k, v in measurement["values"].items()
                                    if v is not None})
    if not capacity_gate.drifted(kept, again, alpha=ctx.config.gate.alpha,
                                 confidence=ctx.config.capacity.confidence):
        _pool(ctx, kept["capacity"], again["capacity"])
        return Event.OK
    ctx.note(f"drift: the kept config's capacity now measures {again['capacity']:g} "
             f"[{again['ci_low']}, {again['ci_high']}] vs {kept['capacity']:g} "
             f"[{kept['ci_low']}, {kept['ci_high']}]; re-baselining before any further gate")
    rs.rechecks, rs.baseline_values, rs.baseline_invalid = [], {}, 0
    rs.capacity_epoch += 1
    return Event.DRIFT


def _pool(ctx: TunerContext, kept: float | None, again: float | None) -> None:
    """The re-check agrees: the kept config's probes of both searches in one fit become its
    answer (a narrower interval for every later gate), when that answer is bounded."""
    rs = ctx.rs
    assert rs.kept is not None
    pooled = pooled_answer(ctx, rs.kept)
    if pooled is None or pooled.capacity is None or pooled.ci_low is None \
            or pooled.ci_high is None:
        return
    answer = {"capacity": pooled.capacity, "capacity_ci_low": pooled.ci_low,
              "capacity_ci_high": pooled.ci_high}
    for key, value in answer.items():
        rs.kept_values.setdefault(key, []).append(value)
    ctx.note(f"the kept config's re-check agrees ({again} vs {kept}); its "
             f"{len(pooled.probes)} probes in one fit: capacity {pooled.capacity:g} "
             f"[{pooled.ci_low:g}, {pooled.ci_high:g}]")
