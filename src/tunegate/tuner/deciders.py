"""Every decision the tuner makes, as a pure function of recorded inputs.

The live run calls these functions and records ``(inputs, seed) -> outputs`` in
``decisions.jsonl``; ``tunegate replay`` calls the same functions on the recorded inputs and
compares output hashes. Nothing here reads a clock, a file or the network.

Components (the replay registry, name -> version, function):

* ``must_change``: which must-change fixes to apply, given the first measurement's findings.
* ``remedies``: which known fixes to try first, given the baseline's findings.
* ``repeat_plan``: how many repeats the gate needs (power analysis on the baseline's noise).
* ``proposer``: the next config, given the search history and the budget (which chooses the
  strategy, :func:`tunegate.search.selection.select_proposer`). Its decisions record the
  history by reference to the previous proposal (:mod:`tunegate.tuner.proposal_history`);
  the function is called with it expanded.
* ``early_stop``: whether a candidate stops after its first repeat (ASHA's rule).
* ``gate``: ACCEPT / REJECT / INCONCLUSIVE from the repeats (:mod:`tunegate.stats.gate`).
* ``slo_guard``: whether a candidate the gate accepted may be kept under ``[search] slos``.
* ``keep_or_rollback``: what the verdict means for the running config.
* ``soak_verdict``: stable / drifting / degraded, from the soak's window rows
  (:func:`tunegate.soak.judge.judge_soak`).
* ``attribution_repeats``: repeats per config of the attribution's control experiment.
* ``attribution``: which change did what, from every cell's repeats
  (:func:`tunegate.attribution.analyse`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from tunegate.attribution import analyse, plan_repeats
from tunegate.knowledge.warm import plan_warm_start
from tunegate.search.fidelity import AsyncHalving
from tunegate.search.objectives import Objective, OutcomeConstraint, parse_outcome_constraint
from tunegate.search.proposer import BaseProposer
from tunegate.search.selection import select_proposer, selection
from tunegate.search.space import Light, SearchSpace
from tunegate.soak.judge import judge_soak, series_from_dicts
from tunegate.stats import gate as stats_gate
from tunegate.stats.noise import pooled_sigma
from tunegate.stats.power import gate_sample_size
from tunegate.stats.threshold import ThresholdPolicy
from tunegate.tuner import capacity_gate
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.decisions import Decider
from tunegate.tuner.proposal_history import ProposerSession, replay_history

__all__ = [
    "PROPOSER_VERSION",
    "REGISTRY",
    "REMEDIES",
    "Proposer",
    "attribution_repeats",
    "build_proposer",
    "config_proposer",
    "config_selection",
    "early_stop",
    "propose",
    "replay_history",
    "search_goals",
    "slo_guard",
    "soak_verdict",
    "warm_start",
]

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
    ``multiplier``, ``floor``, ``initial``, ``max_repeats``, ``fixed`` (a configured count), and
    ``at_least`` (absent in logs written before the sequential gate): the sequential gate's
    smallest cap. With it the gate looks after every repeat, so a larger cap costs only the
    candidates near the threshold, which it gives more evidence.
    """
    if inputs["fixed"] is not None:
        return {"n": int(inputs["fixed"]), "reason": "configured", "feasible": True}
    sigma, noise_repeats = float(inputs["sigma"]), int(inputs["initial"])
    prior = inputs.get("prior")  # a warm start's baseline noise (absent in older logs)
    if prior is not None:
        sigma, noise_repeats = pooled_sigma(sigma, noise_repeats, float(prior["sigma"]),
                                            int(prior["repeats"]))
    sigma = max(sigma, 1e-4)
    policy = ThresholdPolicy(inputs["multiplier"], inputs["floor"])
    try:
        n = gate_sample_size(sigma, inputs["min_effect"], inputs["power"], policy=policy,
                             noise_repeats=noise_repeats, alpha=inputs["alpha"],
                             max_n=inputs["max_repeats"])
        feasible = True
    except Exception:
        n, feasible = int(inputs["max_repeats"]), False
    n = max(n, int(inputs["initial"]))
    reason = (f"power analysis: sigma {sigma:.2%}"
              + (f" (pooled with the warm start's {prior['sigma']:.2%})" if prior else "")
              + f", effect {inputs['min_effect']:.0%}, "
              f"power {inputs['power']:.0%}" + ("" if feasible else
              f"; {inputs['max_repeats']} repeats (the cap) cannot reach that power"))
    at_least = min(int(inputs.get("at_least") or 0), int(inputs["max_repeats"]))
    if n < at_least:
        n = at_least
        reason += (f"; {at_least} for the sequential gate, whose cap it is (a clear answer "
                   "stops sooner)")
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


def config_selection(config: TuneConfig, budget: int | None) -> dict[str, Any]:
    """Which proposer a run's budget chooses and why, without building it
    (:func:`tunegate.search.selection.selection`)."""
    objectives, slos = search_goals(config)
    return selection(config.search_space(), budget=budget, objectives=objectives,
                     outcome_constraints=slos)


def config_proposer(config: TuneConfig, seed: int, budget: int | None) -> BaseProposer:
    """:func:`build_proposer` for a run's config: its space, objectives and SLOs."""
    objectives, slos = search_goals(config)
    return build_proposer(config.search_space(), seed, budget=budget, objectives=objectives,
                          outcome_constraints=slos)


def _built(setup: Mapping[str, Any], seed: int) -> BaseProposer:
    """A fresh proposer for a proposal's inputs without ``history`` (see :func:`propose`)."""
    config = TuneConfig.model_validate(setup["config"])
    return config_proposer(config, seed, setup.get("budget", config.run.budget))


def _proposal(session: ProposerSession, inputs: Mapping[str, Any],
              seed: int | None) -> dict[str, Any]:
    history = inputs["history"]
    if not isinstance(history, list):
        raise ValueError("the proposer was given a history reference; expand it first "
                         "(tunegate.tuner.proposal_history.expand)")
    setup = {key: value for key, value in inputs.items() if key != "history"}
    proposer, proposal = session.ask(setup, int(seed or 0), history)
    return {"trial": proposal.trial, "config": proposal.config, "reason": proposal.reason,
            "proposer": proposer.name}


def propose(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The proposer's next config after the recorded history (``config`` as config JSON).

    ``inputs``: ``config``, ``budget`` and ``history``, the whole history as a list (a
    recorded decision's reference expanded: :mod:`tunegate.tuner.proposal_history`).
    ``budget`` chooses the strategy: the run's budget as pinned when its baseline was registered
    (``RunState.search_budget``; ``None``, unknown, selects BO); without the key, the config's
    ``run.budget``. The objectives and SLOs come from the config (:func:`search_goals`); tells
    without ``values`` (journals from before ``/2``) give SLO metrics nothing to model.

    This builds the proposer from scratch, replaying every earlier ``ask`` (BO refits once per
    earlier model round); a run or a replayed log continues one instead
    (:meth:`Proposer.for_log`), with the same answers.
    """
    return _proposal(ProposerSession(_built), inputs, seed)


class Proposer:
    """The registered ``proposer`` component: :func:`propose` when called, and
    :meth:`for_log` for the decisions of one run or one replayed log."""

    def __call__(self, inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
        return propose(inputs, seed)

    def for_log(self) -> Decider:
        """:func:`propose` over one :class:`~tunegate.tuner.proposal_history.ProposerSession`:
        each proposal continues the proposer of the one before (one model fit per round)."""
        return functools.partial(_proposal, ProposerSession(_built))


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


def soak_verdict(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The soak's verdict. Inputs: ``series`` (name, kind, direction, limit), ``rows`` (each
    window's ``window``, ``t_s``, ``values``, ``valid``, ``findings``, ``restarted``),
    ``tolerance``, ``alpha``, ``died`` (why the server was found dead, or ``None``)."""
    verdict = judge_soak(inputs["rows"], series_from_dicts(inputs["series"]),
                         tolerance=float(inputs["tolerance"]), alpha=float(inputs["alpha"]),
                         died=inputs.get("died"))
    return verdict.to_dict()


def attribution_repeats(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Repeats per config of the attribution (:func:`tunegate.attribution.plan_repeats`)."""
    return plan_repeats(inputs)


def attribution(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Which change did what (:func:`tunegate.attribution.analyse`)."""
    return analyse(inputs)


def warm_start(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """Which earlier runs warm-start the search, with what weight, and which are refused
    (:func:`tunegate.knowledge.warm.plan_warm_start`). Inputs: ``fingerprint`` and ``setup``
    (this run's), ``objective``, ``candidates`` (the knowledge base's runs, newest first,
    scored under this run's objective)."""
    return plan_warm_start(inputs["fingerprint"], inputs["candidates"], inputs["objective"],
                           inputs.get("setup"))


REGISTRY: dict[str, tuple[str, Decider]] = {
    "must_change": ("1", must_change),
    "remedies": ("1", remedies),
    "repeat_plan": ("1", repeat_plan),
    "proposer": (PROPOSER_VERSION, Proposer()),
    "early_stop": ("1", early_stop),
    "gate": (stats_gate.GATE_VERSION, gate),
    "capacity_gate": (capacity_gate.VERSION, capacity_gate.capacity_gate),
    "slo_guard": ("1", slo_guard),
    "keep_or_rollback": ("1", keep_or_rollback),
    "soak_verdict": ("1", soak_verdict),
    "attribution_repeats": ("1", attribution_repeats),
    "attribution": ("1", attribution),
    "warm_start": ("1", warm_start),
}
"""Component name -> (version, deciding function): what replay re-runs. A run or a replay uses
it through :func:`tunegate.tuner.decisions.for_log`, which gives the ``proposer`` a session of
its own."""
