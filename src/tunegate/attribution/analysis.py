"""The attribution's verdicts: a pure function of the cells' measured values (replayable).

For each metric (the objective, the guardrails, the reported latencies) every effect is a
contrast of the cells' log means (:mod:`.estimate`):

* a change's **own effect**: the change alone on the baseline (``+a`` against ``baseline``);
* each **interaction** (factorial): the part of a group's joint effect that none of its
  subsets explains (the Möbius term: for two changes ``ab - a - b + baseline``). Own effects
  and interactions add up exactly to the total, and nothing is credited twice;
* each change's **Shapley share**: its own effect plus an equal share of every interaction it is
  part of (a fair split of the total, shown beside the own effect, never instead of it);
* with more changes than the factorial allows, **leave-one-out** from the kept config beside the
  own effect; where they differ the change interacts with the others and the design cannot
  separate it (said, not credited); the total minus the own effects is "not separated";
* the **gauge's** effect: the baseline's engine measured with the fixed gauge against the gauge
  as first configured. It is a change of *measurement* and never part of the total gain.

Every judged effect goes through the gate's rule: Benjamini-Hochberg over all effects and metrics
of the experiment, and the threshold ``max(multiplier x sigma, floor)`` with sigma pooled over the
engine cells. An effect inside the noise or smaller than the threshold is "not attributable",
never a small number presented as a finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from tunegate.attribution.changes import Change
from tunegate.attribution.design import BASELINE, GAUGE_BEFORE, KEPT
from tunegate.attribution.estimate import CellStats, Estimate, cell_stats, estimate, pooled_sigma
from tunegate.stats.fdr import benjamini_hochberg
from tunegate.stats.threshold import ThresholdPolicy

__all__ = ["IMPROVES", "INTERACTION", "INTERACTION_ONLY", "MEASUREMENT", "NOT_ATTRIBUTABLE",
           "NOT_MEASURED", "WORSENS", "analyse"]

IMPROVES = "improves"
WORSENS = "worsens"
MEASUREMENT = "changes the measurement"
INTERACTION = "interaction"
INTERACTION_ONLY = "interaction only"
"""A change with no effect of its own that is part of an attributable interaction."""
NOT_ATTRIBUTABLE = "not attributable"
NOT_MEASURED = "not measured"

Weights = dict[str, float]


@dataclass
class _Test:
    """One effect of one metric: what it contrasts, and (once judged) its verdict."""

    group: str  # change, interaction, gauge, total, reported
    subject: str
    metric: str
    weights: Weights
    judged: bool = True
    estimate: Estimate | None = None
    p_adjusted: float | None = None
    verdict: str = NOT_MEASURED
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {"effect": e.effect if e else None, "ci_low": e.ci_low if e else None,
                "ci_high": e.ci_high if e else None, "p": e.p if e else None,
                "p_adjusted": self.p_adjusted, "verdict": self.verdict, "reason": self.reason}


def _add(into: Weights, key: str, w: float) -> None:
    into[key] = into.get(key, 0.0) + w


def _diff(plus: str, minus: str) -> Weights:
    return {plus: 1.0, minus: -1.0}


def _moebius(members: frozenset[str], key_of: Mapping[frozenset[str], str]) -> Weights:
    """The interaction term of ``members``: sum over subsets U of (-1)^(|T|-|U|) log m_U."""
    weights: Weights = {}
    for size in range(len(members) + 1):
        for subset in combinations(sorted(members), size):
            _add(weights, key_of[frozenset(subset)], (-1.0) ** (len(members) - size))
    return weights


class _Analysis:
    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self.changes = [Change.from_dict(c) for c in inputs["changes"]]
        self.method: str = inputs["design"]["method"]
        self.key_of = {frozenset(c["on"]): c["key"] for c in inputs["design"]["cells"]
                       if not c["key"].startswith(GAUGE_BEFORE)}
        self.cells: Mapping[str, Mapping[str, Any]] = inputs["cells"]
        self.metrics: list[Mapping[str, Any]] = list(inputs["metrics"])
        self.fdr = float(inputs["fdr"])
        self.confidence = 1.0 - float(inputs["alpha"])
        self.policy = ThresholdPolicy(float(inputs["multiplier"]), float(inputs["floor"]))
        self.engine = [c.name for c in self.changes if c.kind != "gauge"]
        self.gauge = [c.name for c in self.changes if c.kind == "gauge"]
        self.tests: list[_Test] = []

    # ---- which contrasts ---------------------------------------------------------------------
    def plan(self, metric: str) -> None:
        every = frozenset(self.engine)
        keys = self.key_of
        for name in self.engine:
            self.tests.append(_Test("change", name, metric, _diff(keys[frozenset({name})],
                                                                  BASELINE)))
        if self.method == "factorial":
            for size in range(2, len(self.engine) + 1):
                for members in combinations(sorted(self.engine), size):
                    self.tests.append(_Test("interaction", " x ".join(members), metric,
                                            _moebius(frozenset(members), keys)))
            for name in self.engine:
                shapley: Weights = {}
                for size in range(1, len(self.engine) + 1):
                    for members in combinations(sorted(self.engine), size):
                        if name in members:
                            for key, w in _moebius(frozenset(members), keys).items():
                                _add(shapley, key, w / size)
                self.tests.append(_Test("shapley", name, metric, shapley, judged=False))
        elif self.method == "one_at_a_time":
            for name in self.engine:
                loo = _diff(KEPT, keys[every - {name}])
                self.tests.append(_Test("leave_one_out", name, metric, loo, judged=False))
                apart = dict(loo)
                for key, w in _diff(keys[frozenset({name})], BASELINE).items():
                    _add(apart, key, -w)
                self.tests.append(_Test("interaction", f"{name} x the others", metric, apart))
            remainder = _diff(KEPT, BASELINE)
            for name in self.engine:
                for key, w in _diff(keys[frozenset({name})], BASELINE).items():
                    _add(remainder, key, -w)
            self.tests.append(_Test("not_separated", "the changes together", metric, remainder))
        if self.engine:  # with one change the total is its own effect: judged once
            self.tests.append(_Test("total", "engine and environment", metric,
                                    _diff(KEPT, BASELINE), judged=len(self.engine) > 1))
        if self.gauge:
            for name in self.gauge:
                plus = BASELINE if len(self.gauge) == 1 else f"{GAUGE_BEFORE}+{name}"
                self.tests.append(_Test("gauge", name, metric, _diff(plus, GAUGE_BEFORE)))
            self.tests.append(_Test("reported", "before and after", metric,
                                    _diff(KEPT if self.engine else BASELINE, GAUGE_BEFORE),
                                    judged=False))

    # ---- estimates and verdicts --------------------------------------------------------------
    def stats(self, metric: str) -> tuple[dict[str, CellStats], dict[str, str]]:
        found: dict[str, CellStats] = {}
        why: dict[str, str] = {}
        for key, cell in sorted(self.cells.items()):  # replay reads the inputs key-sorted
            values = [float(v) for v in (cell.get("values") or {}).get(metric) or []]
            stats = cell_stats(values)  # a config that failed later keeps what it measured
            if stats is not None:
                found[key] = stats
            elif cell.get("failed"):
                why[key] = f"{key} failed ({_first_line(str(cell['failed']))})"
            else:
                why[key] = (f"{key} has {len(values)} usable repeat(s) of {metric}"
                            + ("" if len(values) < 2 else " with a mean <= 0"))
        return found, why

    def run(self) -> dict[str, Any]:
        thresholds: dict[str, dict[str, Any]] = {}
        for spec in self.metrics:
            metric = spec["name"]
            self.plan(metric)
            found, why = self.stats(metric)
            engine_cells = [s for k, s in found.items() if not k.startswith(GAUGE_BEFORE)]
            thresholds[metric] = self.policy.threshold(pooled_sigma(engine_cells)).to_dict()
            for test in self.tests:
                if test.metric != metric:
                    continue
                absent = [why.get(k, f"{k} was not measured") for k in test.weights
                          if k not in found and test.weights[k] != 0]
                if absent:
                    test.reason = "; ".join(absent)
                else:
                    test.estimate = estimate(test.weights, found, self.confidence)
        judged = [t for t in self.tests if t.judged and t.estimate is not None]
        bh = benjamini_hochberg([t.estimate.p for t in judged if t.estimate], self.fdr)
        direction = {m["name"]: m["direction"] for m in self.metrics}
        for test, adjusted, rejected in zip(judged, bh.adjusted, bh.rejected, strict=True):
            test.p_adjusted = adjusted
            self.judge(test, rejected, float(thresholds[test.metric]["value"]),
                       direction[test.metric])
        own = {t.metric: t for t in self.tests if t.group == "change"}
        for test in self.tests:
            if test.group == "total" and not test.judged and test.metric in own:
                same = own[test.metric]
                test.p_adjusted, test.verdict, test.reason = (same.p_adjusted, same.verdict,
                                                              same.reason)
            elif test.estimate is not None and not test.judged:
                test.verdict, test.reason = "", ""
        return self.document(thresholds)

    def judge(self, test: _Test, significant: bool, threshold: float, direction: str) -> None:
        assert test.estimate is not None and test.p_adjusted is not None
        effect = test.estimate.effect
        if not significant:
            test.verdict = NOT_ATTRIBUTABLE
            test.reason = f"inside the noise (BH p {test.p_adjusted:.2g})"
            return
        if abs(effect) < threshold:
            test.verdict = NOT_ATTRIBUTABLE
            test.reason = (f"{effect:+.1%} is real (BH p {test.p_adjusted:.2g}) but below the "
                           f"threshold {threshold:.1%}")
            return
        test.reason = f"{effect:+.1%} >= threshold {threshold:.1%} (BH p {test.p_adjusted:.2g})"
        if test.group == "gauge":
            test.verdict = MEASUREMENT
        elif test.group in ("interaction", "not_separated"):
            test.verdict = INTERACTION
        else:
            test.verdict = IMPROVES if (effect > 0) == (direction == "higher") else WORSENS

    # ---- the document ------------------------------------------------------------------------
    def by(self, group: str, subject: str) -> dict[str, _Test]:
        return {t.metric: t for t in self.tests if t.group == group and t.subject == subject}

    def document(self, thresholds: dict[str, dict[str, Any]]) -> dict[str, Any]:
        objective = self.metrics[0]["name"]
        interactions = []
        for subject in dict.fromkeys(t.subject for t in self.tests if t.group == "interaction"):
            tests = self.by("interaction", subject)
            members = (subject.split(" x ") if self.method == "factorial"
                       else [subject.removesuffix(" x the others"), "the others"])
            interactions.append({"id": subject, "changes": members,
                                 **tests[objective].to_dict(),
                                 "metrics": {m: t.to_dict() for m, t in tests.items()}})
        changes = [self.change(c, objective, interactions) for c in self.changes]
        out: dict[str, Any] = {
            "method": self.method, "objective": objective, "thresholds": thresholds,
            "changes": changes, "interactions": interactions}
        for group, subject in (("total", "engine and environment"),
                               ("reported", "before and after"),
                               ("not_separated", "the changes together")):
            tests = self.by(group, subject)
            out[group] = ({**tests[objective].to_dict(),
                           "metrics": {m: t.to_dict() for m, t in tests.items()}}
                          if tests else None)
        return out

    def change(self, change: Change, objective: str,
               interactions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        group = "gauge" if change.kind == "gauge" else "change"
        tests = self.by(group, change.name)
        shapley = self.by("shapley", change.name)
        loo = self.by("leave_one_out", change.name)
        metrics: dict[str, Any] = {}
        for metric, test in tests.items():
            entry = test.to_dict()
            if metric in shapley:
                entry["shapley"] = _interval(shapley[metric])
            if metric in loo:
                entry["leave_one_out"] = _interval(loo[metric])
            part_of = [i["id"] for i in interactions if change.name in i["changes"]
                       and i["metrics"].get(metric, {}).get("verdict") == INTERACTION]
            if entry["verdict"] == NOT_ATTRIBUTABLE and part_of:
                entry["verdict"] = INTERACTION_ONLY
                entry["reason"] = (f"no effect of its own ({entry['reason']}); part of "
                                   + ", ".join(part_of))
            entry["interactions"] = part_of
            metrics[metric] = entry
        extra: dict[str, Any] = {}
        if change.kind == "gauge":
            before = self.invalid_before(change.name)
            for metric in before:  # its old figure measured something else, whatever the size
                entry = metrics[metric]
                if entry["verdict"] != MEASUREMENT:
                    entry["verdict"] = MEASUREMENT
                    entry["reason"] = ("the gauge called this figure invalid before the fix: "
                                       "it measured something else (" + entry["reason"] + ")")
            changed = [m for m, e in metrics.items() if e["verdict"] == MEASUREMENT]
            extra = {"changed_meaning": changed, "invalid_before": before}
        # the headline is the objective's, except for a gauge change that changed the meaning
        # of other figures: then the first of those (its verdict would contradict the numbers)
        changed_meaning = extra.get("changed_meaning") or [objective]
        shown = objective if objective in changed_meaning else changed_meaning[0]
        top = {"metric": shown, **(metrics.get(shown) or {}), **extra}
        return {**change.to_dict(), **top, "metrics": metrics}

    def invalid_before(self, name: str) -> list[str]:
        """The metrics the gauge itself called invalid as first configured and valid once
        ``name`` was fixed: their figures changed meaning whatever their size."""
        fixed = BASELINE if len(self.gauge) == 1 else f"{GAUGE_BEFORE}+{name}"
        before = set((self.cells.get(GAUGE_BEFORE) or {}).get("invalid_metrics") or [])
        after = set((self.cells.get(fixed) or {}).get("invalid_metrics") or [])
        return [m["name"] for m in self.metrics if m["name"] in before - after]


def _first_line(text: str) -> str:
    """A start failure's first line (its full text, the server's log tail, is in the journal)."""
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else "no reason recorded"


def _interval(test: _Test) -> dict[str, Any] | None:
    e = test.estimate
    if e is None:
        return None
    return {"effect": e.effect, "ci_low": e.ci_low, "ci_high": e.ci_high}


def analyse(inputs: Mapping[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The attribution from the recorded inputs (the registered decider ``attribution``).

    Inputs: ``changes`` (:meth:`Change.to_dict` each), ``design`` (:meth:`Design.to_dict`),
    ``cells`` (key -> ``values`` {metric: [one value per valid repeat]} and ``failed``, the
    start failure or ``None``), ``metrics`` ([{name, direction}], the objective first),
    ``alpha`` (1 - the intervals' confidence), ``fdr``, ``multiplier``, ``floor``; a gauge
    cell may list ``invalid_metrics`` (the figures the gauge itself rejected there).

    Output: ``changes`` (each change's fields, then ``metric``, the objective, with its
    ``effect``, ``ci_low``, ``ci_high``, ``verdict``, ``reason``; ``metrics`` holds the same for
    every metric, with ``shapley`` or ``leave_one_out`` and the ``interactions`` it is part of.
    A gauge change's ``verdict`` is "changes the measurement" when any figure changed meaning,
    listed in ``changed_meaning``), ``interactions``, ``total`` (the engine and environment
    changes together), ``reported`` (kept against the gauge as first configured: what a
    before/after comparison says), ``not_separated``, ``thresholds``, ``method``,
    ``objective``.

    Example:
        >>> inputs = {"changes": [{"name": "a", "kind": "engine", "layer": "features",
        ...                        "before": False, "after": True}],
        ...           "design": {"method": "factorial", "cells": [
        ...               {"key": "baseline", "on": [], "gauge_on": []},
        ...               {"key": "kept", "on": ["a"], "gauge_on": []}]},
        ...           "cells": {"baseline": {"values": {"x": [100, 101, 99, 100]}},
        ...                     "kept": {"values": {"x": [120, 121, 119, 120]}}},
        ...           "metrics": [{"name": "x", "direction": "higher"}],
        ...           "alpha": 0.05, "fdr": 0.05, "multiplier": 2.0, "floor": 0.03}
        >>> out = analyse(inputs)
        >>> out["changes"][0]["verdict"], round(out["changes"][0]["effect"], 2)
        ('improves', 0.2)
    """
    return _Analysis(inputs).run()
