"""BASELINE: start the given (or kept) config, fix the gauge first, measure the reference arm.

The first time, the service as given is measured once and the must-change fixes the gauge asks
for are applied (:mod:`tunegate.tuner.preflight`), then the environment's fingerprint is taken
and the warm start decided (:mod:`tunegate.tuner.warm_start`). Then the config is measured
until the power analysis is satisfied (``repeat_plan``, pooling the first repeats' noise with a
warm start's): its repeats become the kept config's arm, the reference every gate compares
against, and their spread (this run's own) the noise the thresholds use. After a
drift the kept config is measured again the same way. Each repeat is journalled before it
counts, so a crash here resumes with the repeats already taken.
"""

from __future__ import annotations

from typing import Any

from tunegate.stats.noise import estimate_noise
from tunegate.tuner import deciders
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.gating import SEQUENTIAL_FROM, sequential
from tunegate.tuner.measure import Measurement
from tunegate.tuner.metric_names import missing_reason
from tunegate.tuner.outcomes import EndReason, TrialVerdict
from tunegate.tuner.preflight import preflight
from tunegate.tuner.states import Event
from tunegate.tuner.trials import mean, means, tell_proposer
from tunegate.tuner.warm_start import warm_start

EVENTS = frozenset({Event.OK, Event.START_FAILED, Event.SECOND_START_FAILED,
                    Event.BASELINE_INVALID, Event.ABORT})

INVALID_IN_A_ROW = 3
"""Consecutive invalid baseline repeats that end the run: the gauge must be fixed first."""


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    params = rs.kept if rs.kept is not None else rs.baseline
    if ctx.serving != params and not ctx.start(params):
        rs.failed_starts += 1
        if rs.failed_starts < 2:
            return Event.START_FAILED
        rs.reason = ("the baseline config failed to start twice: environment abnormal; last "
                     f"failure: {ctx.start_failure}")
        rs.end_reason = EndReason.START_FAILED_TWICE
        record_abnormal(ctx)
        return Event.SECOND_START_FAILED
    rs.failed_starts = 0
    if not rs.preflight_done:
        event = preflight(ctx, params)
        if event is not None:
            return event
        params = rs.baseline
    if rs.fingerprint is None and rs.kept_trial is None:  # once, before the first baseline
        warm_start(ctx)  # the benchmark settings are final now
    objective = ctx.objective.name
    initial = 1 if ctx.capacity else ctx.config.gate.initial_repeats
    while True:  # resumable: repeats journalled before a crash are in rs.baseline_values
        if rs.baseline_invalid >= INVALID_IN_A_ROW:
            rs.reason = (f"the baseline failed validation {INVALID_IN_A_ROW} times in a row: "
                         + ", ".join(rs.baseline_findings))
            rs.end_reason = EndReason.BASELINE_INVALID
            return Event.BASELINE_INVALID
        done = len(rs.baseline_values.get(objective, []))
        if done >= initial and done >= _plan(ctx, {k: v[:initial]
                                                  for k, v in rs.baseline_values.items()}):
            break
        if _metric_missing(ctx, ctx.measure_once("baseline", params, rs.kept_trial)):
            return Event.ABORT
    values = rs.baseline_values
    rs.kept = dict(params)
    rs.kept_values = {k: list(v) for k, v in values.items()}
    for name, series in values.items():
        if name in ctx.gated and len(series) >= 2:  # an SLO metric may be 0 or sparse; a
            rs.sigma[name] = estimate_noise(series).sigma  # capacity search has its interval
    if rs.kept_trial is None:
        _register(ctx, params, values)
    if not ctx.capacity:  # a capacity search said its answer and interval itself
        ctx.say(f"baseline: {objective} {mean(values[objective]):.1f} over "
                f"{len(values[objective])} repeats, sigma {rs.sigma.get(objective, 0):.2%}")
    rs.baseline_values, rs.baseline_invalid = {}, 0
    return Event.OK


def record_abnormal(ctx: TunerContext) -> None:
    """The decision that the environment is abnormal, with its reason."""
    ctx.record(DecisionKind.ABNORMAL, "tuner", "1",
               {"failed_starts": ctx.rs.failed_starts, "trials": ctx.rs.trials},
               {"reason": ctx.rs.reason})


def _metric_missing(ctx: TunerContext, result: Measurement) -> bool:
    """Whether a valid baseline repeat lacks a metric the config names; then the run stops with
    the reason. Measuring again cannot help (one output token has no ITL, a server that does
    not report its KV cache will not start to)."""
    gaps = [name for name in ctx.recorded if result.metric(name) is None]
    if not result.valid or not gaps:
        return False
    name = gaps[0]
    ctx.rs.reason = (f"metric missing: the baseline's repeat {result.records_file} has no "
                     f"{name} ({ctx.metric_field.get(name, 'the config')}): "
                     f"{missing_reason(name)}; every repeat must hold the metrics the config "
                     "names, so the run stops instead of measuring again")
    ctx.rs.end_reason = EndReason.METRIC_MISSING
    return True


def _plan(ctx: TunerContext, values: dict[str, list[float]]) -> int:
    """Repeats per arm the power analysis asks for, from the first repeats' noise (one
    capacity search per config: its interval carries its noise, and the gate compares
    intervals)."""
    rs, gate = ctx.rs, ctx.config.gate
    if ctx.capacity:
        if rs.repeats != 1:
            rs.repeats = 1
            ctx.say("repeats per config: 1 capacity search (the gate compares the searches' "
                    "intervals)")
        return 1
    for name, series in values.items():
        if name in ctx.gated:
            rs.sigma[name] = estimate_noise(series).sigma
    inputs: dict[str, Any] = {"sigma": rs.sigma[ctx.objective.name], "min_effect": gate.min_effect,
              "power": gate.power, "alpha": gate.alpha, "multiplier": gate.multiplier,
              "floor": gate.floor, "initial": gate.initial_repeats,
              "max_repeats": gate.max_repeats,
              "fixed": gate.repeats if isinstance(gate.repeats, int) else None}
    if gate.sequential:
        inputs["at_least"] = SEQUENTIAL_FROM
    noise = (rs.warm_start or {}).get("noise")
    if noise is not None and rs.kept_trial is None:  # the first baseline: same environment
        inputs["prior"] = {"sigma": noise["sigma"], "repeats": noise["repeats"]}
    plan, _ = ctx.decide(DecisionKind.BASELINE, "repeat_plan", inputs)
    if rs.repeats != int(plan["n"]):
        rs.repeats = int(plan["n"])
        ctx.say(f"repeats per config: {rs.repeats} ({plan['reason']})"
                + ("; the sequential gate may decide sooner" if sequential(ctx) else ""))
    return rs.repeats


def _register(ctx: TunerContext, params: dict[str, Any],
              values: dict[str, list[float]]) -> None:
    """The baseline becomes trial 0: the proposer's first data point, the delivery's
    reference, and the source of the known remedies to try first."""
    rs = ctx.rs
    rs.history.append({"op": "register", "config": ctx.tunable(params), "reason": "baseline"})
    rs.search_budget = ctx.config.run.budget
    rs.kept_trial = 0
    rs.trials_log.append({"trial": 0, "reason": "baseline", "params": params,
                          "verdict": TrialVerdict.BASELINE.value,
                          "values": {k: mean(v) for k, v in values.items()}})
    tell_proposer(ctx, 0, ctx.score(values), kept=True, values=means(values), params=params,
                  reason="baseline")
    first = ctx.score({k: v[:1] for k, v in values.items()})
    if first is not None:
        rs.first_scores["0"] = first
    tunable = [p.name for p in ctx.space.tunable]
    found, _ = ctx.decide(DecisionKind.BASELINE, "remedies",
                          {"findings": rs.baseline_findings, "tunable": tunable,
                           "kept": params})
    rs.remedies = list(found)
    for remedy in rs.remedies:
        ctx.note(f"VALIDATE found {remedy['finding']} on the baseline: trying "
                 f"{remedy['params']} first")
    ctx.note(search_line(ctx))


def search_line(ctx: TunerContext) -> str:
    """Which proposer the budget chose and why, the gate in force, and early stopping."""
    search = ctx.config.search
    selection = deciders.config_selection(ctx.config, ctx.rs.search_budget)
    line = f"search: {selection['reason']}"
    if search.objectives:
        line += f"; objectives {', '.join(selection['objectives'])}"
    if search.slos:
        line += f"; SLOs {', '.join(selection['outcome_constraints'])}"
    if search.early_stopping and ctx.rs.repeats > 1:
        line += (f"; early stopping: after its first repeat a proposal continues only in the "
                 f"top 1/{search.eta} of the configs measured so far (ASHA)")
    return line
