"""What a search delivers: a Pareto set, its knee, one recommendation, hypervolume per round.

"Highest throughput" and "lowest latency" are different configs, so a search delivers a front,
not a point:

* **Pareto set**: the non-dominated evaluated configs over the objectives, at most
  ``max_front`` (5) of them; a larger front keeps the points with the largest normalised
  hypervolume contribution. Each carries its **dominance rate**: the share of the other
  evaluated configs it dominates. One objective has a one-point front.
* **Knee**: :func:`~tunegate.search.pareto.knee_index`, the front point with the largest
  exclusive hypervolume contribution after normalising each objective over the front.
* **Recommendation**: among front points that met every SLO, preferring statistically
  verified ones: the knee when no priority is given, otherwise the largest priority-weighted
  sum of normalised objectives (``{"output_throughput": 2, "p99_ttft_ms": 1}``).
* **Hypervolume per round**: after each evaluated config, the hypervolume of the SLO-meeting
  configs so far above a reference point (the baseline's values when given, else 10% of the
  range below the worst observed), a curve that flattens when the search stops finding.

Wording: the result is "near-optimal within budget", never "optimal".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tunegate.search.objectives import Objective, OutcomeConstraint, check_objectives
from tunegate.search.pareto import (
    dominance_rate,
    hypervolume,
    hypervolume_contributions,
    knee_index,
    pareto_mask,
)

__all__ = ["KNEE_METHOD", "WORDING", "deliver", "hypervolume_per_round", "reference_point"]

WORDING = "near-optimal within budget"
KNEE_METHOD = ("maximum exclusive hypervolume contribution on the front, each objective "
               "normalised to [0, 1] over the front, reference at -0.1")


def _matrix(points: Sequence[Mapping[str, Any]], objectives: Sequence[Objective]
            ) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.asarray([[o.sign * float(p["values"][o.metric]) for o in objectives]
                       for p in points], dtype=float).reshape(len(points), len(objectives))


def _complete(point: Mapping[str, Any], objectives: Sequence[Objective]) -> bool:
    values = point.get("values") or {}
    return all(isinstance(values.get(o.metric), int | float)
               and np.isfinite(values[o.metric]) for o in objectives)


def _meets(point: Mapping[str, Any], slos: Sequence[OutcomeConstraint]) -> bool:
    return all(c.satisfied(point.get("values") or {}) for c in slos)


def reference_point(points: Sequence[Mapping[str, Any]], objectives: Sequence[Objective],
                    reference: Mapping[str, float] | None = None
                    ) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The hypervolume reference (maximisation form): ``reference`` values when given, else
    10% of the observed range below the worst observed value of each objective."""
    if reference is not None and all(o.metric in reference for o in objectives):
        return np.asarray([o.sign * float(reference[o.metric]) for o in objectives], dtype=float)
    Y = _matrix([p for p in points if _complete(p, objectives)], objectives)
    if not len(Y):
        return np.zeros(len(objectives))
    low, high = Y.min(axis=0), Y.max(axis=0)
    out: np.ndarray[Any, np.dtype[np.float64]] = low - 0.1 * np.maximum(high - low, 1e-9)
    return out


def hypervolume_per_round(points: Sequence[Mapping[str, Any]],
                          objectives: Sequence[Objective],
                          slos: Sequence[OutcomeConstraint] = (),
                          reference: Mapping[str, float] | None = None) -> list[float]:
    """Hypervolume of the SLO-meeting configs among the first ``k`` points, for each ``k``."""
    ref = reference_point(points, objectives, reference)
    out, kept = [], []
    for point in points:
        if _complete(point, objectives) and _meets(point, slos):
            kept.append(point)
        out.append(hypervolume(_matrix(kept, objectives), ref) if kept else 0.0)
    return out


def deliver(points: Sequence[Mapping[str, Any]], objectives: Sequence[Objective], *,
            slos: Sequence[OutcomeConstraint] = (), priority: Mapping[str, float] | None = None,
            reference: Mapping[str, float] | None = None, max_front: int = 5) -> dict[str, Any]:
    """The delivery document (see the module docstring).

    Args:
        points: Evaluated configs in evaluation order: ``trial``, ``params``, ``values``
            (metric -> value; ``None`` or missing metrics for failures), optional
            ``verified`` (the statistical gate accepted it, or it is the baseline).
        objectives: One to five objectives.
        slos: Outcome constraints a recommendation must meet.
        priority: Objective weights for the recommendation (``None``: the knee).
        reference: Hypervolume reference values by metric (e.g. the baseline's).
        max_front: Most front points delivered.
    """
    objectives = check_objectives(objectives)
    complete = [p for p in points if _complete(p, objectives)]
    doc: dict[str, Any] = {
        "wording": WORDING, "objectives": [[o.metric, o.direction] for o in objectives],
        "slos": [str(c) for c in slos], "evaluated": len(points), "complete": len(complete),
        "knee_method": KNEE_METHOD, "pareto": [], "knee": None, "recommendation": None,
        "hypervolume_per_round": hypervolume_per_round(points, objectives, slos, reference),
        "note": ""}
    if not complete:
        doc["note"] = "no evaluated config produced every objective: nothing to deliver"
        return doc
    Y = _matrix(complete, objectives)
    rates = dominance_rate(Y)
    front = [int(i) for i in np.flatnonzero(pareto_mask(Y))]
    if len(front) > max_front:
        low, high = Y[front].min(axis=0), Y[front].max(axis=0)
        normalised = (Y[front] - low) / np.where(high > low, high - low, 1.0)
        contributions = hypervolume_contributions(normalised, np.full(len(objectives), -0.1))
        order = np.argsort(-np.round(contributions, 12), kind="stable")[:max_front]
        front = [front[j] for j in sorted(order)]
    front.sort(key=lambda i: (-Y[i, 0], int(complete[i]["trial"])))
    knee = front[knee_index(Y[front])]
    doc["pareto"] = [{"trial": complete[i]["trial"], "params": complete[i].get("params"),
                      "values": {o.metric: complete[i]["values"][o.metric] for o in objectives},
                      "dominance_rate": round(float(rates[i]), 4),
                      "verified": bool(complete[i].get("verified", False)),
                      "meets_slos": _meets(complete[i], slos), "knee": i == knee}
                     for i in front]
    doc["knee"] = {"trial": complete[knee]["trial"], "method": KNEE_METHOD}
    if len(front) < 3 and len(objectives) > 1:
        doc["note"] = (f"the front has {len(front)} point(s): the measured configs do not trade "
                       "these objectives against each other much")
    eligible = [i for i in front if _meets(complete[i], slos)]
    verified = [i for i in eligible if complete[i].get("verified", False)]
    pool = verified or eligible
    if not pool:
        doc["note"] = (doc["note"] + "; " if doc["note"] else "") + (
            "no front config met every SLO: no recommendation")
        return doc
    if priority:
        weights = np.asarray([float(priority.get(o.metric, 0.0)) for o in objectives])
        low, high = Y[front].min(axis=0), Y[front].max(axis=0)
        utility = ((Y[pool] - low) / np.where(high > low, high - low, 1.0)) @ weights
        chosen = pool[int(np.argmax(np.round(utility, 12)))]
        rule = f"largest priority-weighted utility ({dict(priority)}) among "
    else:
        chosen = knee if knee in pool else pool[0]
        rule = "the knee" if chosen == knee else "the best first objective"
        rule += " among "
    rule += ("statistically verified " if verified else "") + "front configs meeting every SLO"
    doc["recommendation"] = {"trial": complete[chosen]["trial"],
                             "params": complete[chosen].get("params"),
                             "values": dict(complete[chosen]["values"]),
                             "verified": bool(complete[chosen].get("verified", False)),
                             "rule": rule, "wording": WORDING}
    return doc
