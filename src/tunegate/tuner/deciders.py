"""Every decision the tuner makes, as a pure function of recorded inputs.

The live run calls these functions and records ``(inputs, seed) -> outputs`` in
``decisions.jsonl``; ``tunegate replay`` calls the same functions on the recorded inputs and
compares output hashes. Nothing here reads a clock, a file or the network.

Components (the replay registry, name -> version, function):

* ``must_change``: which must-change fixes to apply, given the first measurement's findings.
* ``remedies``: which known fixes to try first, given the baseline's findings.
* ``repeat_plan``: how many repeats the gate needs (power analysis on the baseline's noise).
* ``proposer``: the next config, given the search history and the budget (which chooses the
  strategy, :func:`tunegate.search.selection.select_proposer`).
* ``early_stop``: whether a candidate stops after its first repeat (ASHA's rule).
* ``gate``: ACCEPT / REJECT / INCONCLUSIVE from the repeats (:mod:`tunegate.stats.gate`).
* ``slo_guard``: whether a candidate the gate accepted may be kept under ``[search] slos``.
* ``keep_or_rollback``: what the verdict means for the running config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tunegate.search.fidelity import AsyncHalving
from tunegate.search.objectives import Objective, OutcomeConstraint, parse_outcome_constraint
from tunegate.search.proposer import BaseProposer
from tunegate.search.selection import select_proposer
from tunegate.search.space import Light, SearchSpace
from tunegate.stats import gate as stats_gate
from tunegate.stats.power import gate_sample_size
from tunegate.stats.threshold import ThresholdPolicy
from tunegate.tuner.config import TuneConfig

__all__ = ["PROPOSER_VERSION", "REGISTRY", "REMEDIES", "build_proposer", "config_proposer",
           "early_stop", "search_goals", "slo_guard"]

PROPOSER_VERSION = "select_proposer/2"
"""Version of the ``proposer`` component. ``/2``: the budget chooses the strategy and ``tell``
events carry the metric means; logs of ``sobol_local/1`` (no budget, BO for every run) are told
apart and not re-derived with today's rule. ``[search] slos`` and ``objectives`` did not bump
it: a config without them (every journal written before they existed) builds exactly the
proposer it built before (:func:`search_goals`), so old decisions replay unchanged. Nor did
``learn`` events (``[search] study``): a history without them replays as before."""

REMEDIES: dict[str, dict[str, Any]] = {
    "prefill_slower_than_decode": {"enable_chunked_prefill": True},
}
"""Gauge finding -> the known fix to try first (when those parameters are in the space)."""

GAUGE_FIXES: dict[str, tuple[str, ...]] = {
    "ttft_equals_e2el": ("benchmark.stream",),
}
"""Gauge finding -> the must-change parameters that repair the gauge itself."""


def must_change(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Apply every must-change fix before tuning; say which finding each one answers.

    Inputs: ``lights`` (name -> [light, required]) and ``findings`` (codes of the first
    measurement's error findings).
    """
    changes: dict[str, Any] = {}
    answered: dict[str, list[str]] = {}
    for name, (light, required) in sorted(inputs["lights"].items()):
        if light == Light.MUST_CHANGE.value:
            changes[name] = required
    for code in inputs["findings"]:
        fixes = [n for n in GAUGE_FIXES.get(code, ()) if n in changes]
        if fixes:
            answered[code] = fixes
    unanswered = [c for c in inputs["findings"] if c not in answered]
    return {"changes": changes, "answers": answered, "unanswered": unanswered}


def remedies(inputs: Mapping[str, Any], seed: int | None) -> list[dict[str, Any]]:
    """Known fixes for the baseline's findings, limited to parameters the space may change.

    Inputs: ``findings`` (codes), ``tunable`` (situational parameter names), ``kept`` (params).
    """
    out = []
    for code in inputs["findings"]:
        fix = REMEDIES.get(code)
        if not fix or not set(fix) <= set(inputs["tunable"]):
            continue
        if all(inputs["kept"].get(k) == v for k, v in fix.items()):
            continue  # already applied
        out.append({"finding": code, "params": fix})
    return out


def repeat_plan(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Repeats per arm the gate needs to detect ``min_effect`` with ``power``.

    Inputs: ``sigma`` (relative noise of the objective), ``min_effect``, ``power``, ``alpha``,
    ``multiplier``, ``floor``, ``initial``, ``max_repeats``, ``fixed`` (a configured count).
    """
    if inputs["fixed"] is not None:
        return {"n": int(inputs["fixed"]), "reason": "configured", "feasible": True}
    sigma = max(float(inputs["sigma"]), 1e-4)
    policy = ThresholdPolicy(inputs["multiplier"], inputs["floor"])
    try:
        n = gate_sample_size(sigma, inputs["min_effect"], inputs["power"], policy=policy,
                             noise_repeats=inputs["initial"], alpha=inputs["alpha"],
                             max_n=inputs["max_repeats"])
        feasible = True
    except Exception:
        n, feasible = int(inputs["max_repeats"]), False
    n = max(n, int(inputs["initial"]))
    reason = (f"power analysis: sigma {sigma:.2%}, effect {inputs['min_effect']:.0%}, "
              f"power {inputs['power']:.0%}" + ("" if feasible else
              f"; {inputs['max_repeats']} repeats (the cap) cannot reach that power"))
    return {"n": n, "reason": reason, "feasible": feasible}


def build_proposer(space: SearchSpace, seed: int, *, budget: int | None = None,
                   objectives: tuple[Objective, ...] = (Objective("value"),),
                   outcome_constraints: tuple[OutcomeConstraint, ...] = ()) -> BaseProposer:
    """The run's proposer, chosen by :func:`tunegate.search.selection.select_proposer`.

    A budget below the BO threshold gets the layered coarse sweep, otherwise Bayesian
    optimisation; ``proposer.selection`` says which and why. The default objective ``value``
    is the scalar the tuner tells (the objective, sign-adjusted so higher is better); several
    objectives and SLOs are read from ``tell(values=...)``.
    """
    return select_proposer(space, seed, budget=budget, objectives=objectives,
                           outcome_constraints=outcome_constraints)


def search_goals(config: TuneConfig) -> tuple[tuple[Objective, ...],
                                             tuple[OutcomeConstraint, ...]]:
    """The objectives and SLOs a run's proposer optimises (``[objective]`` and ``[search]``).

    One objective (no ``[search] objectives``): ``Objective("value")``, the scalar each ``tell``
    gives (the ``[objective]`` metric's mean, sign-adjusted so higher is better), exactly as
    before these settings existed, so journals without them replay identically. With extra
    objectives: the ``[objective]`` metric by name and direction first, then the extras, all
    read from the tells' ``values``. SLOs are always read from ``values`` (the driver measures
    their metrics); with a budget small enough for the layered sweep they only shape the
    delivery, since the sweep ranks by the first objective alone.
    """
    slos = config.search.outcome_constraints()
    if not config.search.objectives:
        return (Objective("value"),), slos
    return config.objectives(), slos


def config_proposer(config: TuneConfig, seed: int, budget: int | None) -> BaseProposer:
    """:func:`build_proposer` for a run's config: its space, objectives and SLOs."""
    objectives, slos = search_goals(config)
    return build_proposer(config.search_space(), seed, budget=budget, objectives=objectives,
                          outcome_constraints=slos)


def replay_history(proposer: BaseProposer, history: list[Mapping[str, Any]]) -> None:
    """Feed a proposer the recorded ``ask``/``register``/``tell``/``learn`` events, in order.

    ``learn``: another worker's result read from a shared study (``[search] study``) before
    the ask that first saw it; recorded in the history so that every earlier ask replays with
    exactly the data it had.
    """
    for event in history:
        if event["op"] == "ask":
            proposer.ask()
        elif event["op"] == "register":
            proposer.register(dict(event["config"]), event["reason"])
        elif event["op"] == "learn":
            proposer.learn(dict(event["config"]), event["value"], event.get("values"))
        else:
            proposer.tell(int(event["trial"]), event["value"], kept=bool(event.get("kept")),
                          values=event.get("values"))  # absent from journals before /2


def propose(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The proposer's next config after the recorded history (``config`` as config JSON).

    ``budget`` chooses the strategy: the run's budget as pinned when its baseline was registered
    (``RunState.search_budget``; ``None``, unknown, selects BO); without the key, the config's
    ``run.budget``. The objectives and SLOs come from the config (:func:`search_goals`); tells
    without ``values`` (journals from before ``/2``) give SLO metrics nothing to model.
    """
    config = TuneConfig.model_validate(inputs["config"])
    budget = inputs.get("budget", config.run.budget)
    proposer = config_proposer(config, int(seed or 0), budget)
    replay_history(proposer, inputs["history"])
    proposal = proposer.ask()
    return {"trial": proposal.trial, "config": proposal.config, "reason": proposal.reason,
            "proposer": proposer.name}


def early_stop(inputs: Mapping[str, Any], seed: int | None) -> dict[str, bool | str]:
    """Whether a candidate stops after its first repeat (the cheap fidelity), by ASHA's rule.

    Inputs: ``trial``; ``score``, its first-repeat objective, and ``earlier``, the first-repeat
    objectives of the configs measured before it (the baseline included), all sign-adjusted so
    higher is better (``None``: no value, which always stops); ``eta`` and ``min_seen``
    (:class:`~tunegate.search.fidelity.AsyncHalving`); ``metric`` and ``direction`` for the
    reason only.

    Example:
        >>> early_stop({"trial": 4, "score": 9.0, "earlier": [10.0, 11.0, 12.0], "eta": 3,
        ...             "min_seen": 3, "metric": "tps", "direction": "higher"}, 0)["reason"]
        'tps 9 after 1 repeat is below the top 1/3 of 4 configs measured so far (rank 4 of 4)'
    """
    rule = AsyncHalving(eta=int(inputs["eta"]), min_seen=int(inputs["min_seen"]))
    earlier = [float(s) for s in inputs["earlier"]]
    score = inputs["score"]
    stop = rule.should_stop(earlier, score)
    if score is None:
        return {"stop": stop, "reason": f"no {inputs['metric']} value after 1 repeat"}
    n = len(earlier) + 1
    rank = 1 + sum(1 for s in earlier if s > score)
    shown = f"{inputs['metric']} {_plain(score, inputs['direction'])} after 1 repeat"
    if len(earlier) < rule.min_seen:
        reason = (f"{shown}: only {len(earlier)} configs measured at 1 repeat so far, "
                  f"{rule.min_seen} needed to rank against")
    elif stop:
        reason = (f"{shown} is below the top 1/{rule.eta} of {n} configs measured so far "
                  f"(rank {rank} of {n})")
    else:
        reason = f"{shown} is within the top 1/{rule.eta} of {n} configs (rank {rank} of {n})"
    return {"stop": stop, "reason": reason}


def _plain(score: float, direction: str) -> str:
    """A sign-adjusted score back in the metric's own units, for reasons."""
    return f"{(score if direction == 'higher' else -score):.4g}"


def gate(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The gate's verdict, re-derived from the values it saw."""
    record = stats_gate.replay(inputs["record"])
    return {"decision": record.decision.value}


def slo_guard(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Whether a candidate the gate accepted may be kept: it must not miss an SLO the kept
    config meets.

    The gate judges the objective and guardrails against the kept config; ``[search] slos`` are
    absolute limits. A candidate that gains throughput by breaking a latency SLO the service
    meets today is not an improvement anyone would deploy, so it is rolled back (verdict
    ``SLO_MISSED``). An SLO the kept config already misses does not block: a candidate that
    misses it too is no worse there, and the delivery still never recommends either.

    Inputs: ``slos`` (rules such as ``"p99_ttft_ms <= 3000"``), ``candidate`` and ``kept``
    (metric -> mean over the repeats), ``trial``.

    Example:
        >>> slo_guard({"trial": 3, "slos": ["p99_ttft_ms <= 3000"],
        ...            "candidate": {"p99_ttft_ms": 3400.0}, "kept": {"p99_ttft_ms": 2100.0}}, 0)
        {'keep': False, 'missed': ['p99_ttft_ms <= 3000 (measured 3400, kept 2100)']}
        >>> slo_guard({"trial": 4, "slos": ["p99_ttft_ms <= 3000"], "candidate": {},
        ...            "kept": {"p99_ttft_ms": 2100.0}}, 0)["missed"]
        ['p99_ttft_ms <= 3000 (not measured, kept 2100)']
    """
    missed = []
    for rule in inputs["slos"]:
        slo = parse_outcome_constraint(rule)
        if slo.satisfied(inputs["kept"]) and not slo.satisfied(inputs["candidate"]):
            got = inputs["candidate"].get(slo.metric)
            shown = "not measured" if got is None else f"measured {got:.4g}"
            missed.append(f"{slo} ({shown}, kept {inputs['kept'][slo.metric]:.4g})")
    return {"keep": not missed, "missed": missed}


def keep_or_rollback(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """ACCEPT keeps the candidate; anything else rolls back to the last kept config."""
    return {"action": "keep" if inputs["decision"] == "ACCEPT" else "rollback"}


REGISTRY: dict[str, tuple[str, Callable[[Any, int | None], Any]]] = {
    "must_change": ("1", must_change),
    "remedies": ("1", remedies),
    "repeat_plan": ("1", repeat_plan),
    "proposer": (PROPOSER_VERSION, propose),
    "early_stop": ("1", early_stop),
    "gate": (stats_gate.GATE_VERSION, gate),
    "slo_guard": ("1", slo_guard),
    "keep_or_rollback": ("1", keep_or_rollback),
}
"""Component name -> (version, deciding function): what replay re-runs."""
