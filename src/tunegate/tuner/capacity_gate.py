"""The gate under the capacity objective: two configs' capacities compared through their
intervals.

Each capacity search answers with an estimate and an interval at its confidence
(:mod:`tunegate.stats.boundary`, profile likelihood in log load). The interval's width in log
load gives the estimate's standard error, ``se = (log high - log low) / (2 z)`` with
``z`` the normal quantile of the confidence (one side's width over ``z`` when the other side is
open), and the two searches are independent, so the difference ``d = log C - log K`` of the
candidate's and the kept config's capacities has ``se = hypot(se_C, se_K)``:

- **accept** when ``d`` exceeds ``log(1 + t)`` (``t`` = ``[gate] floor``, the smallest gain
  worth a change) at one-sided level ``alpha``: the candidate holds more load, by enough;
- **reject** when ``d < 0`` at one-sided level ``alpha``: it holds less;
- **inconclusive** otherwise, and whenever the comparison cannot be made: a kept capacity that
  is only a lower bound (it met the targets at ``max_load``: raise it) cannot be beaten, a
  candidate's that is only a lower bound cannot be shown worse.

The threshold is the floor alone, not ``max(2 sigma, floor)``: ``sigma`` there is the noise of
one repeat, which here is already inside each interval. Capacity 0 (no load met the targets)
is compared by bounds: a candidate whose interval lies above the kept zero's upper end (the
lowest load probed) is accepted, its effect then the gain over that bound; a zero against a
positive capacity is rejected.

A drift re-check (:func:`drifted`) uses the same statistic two-sided with no threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

__all__ = ["VERSION", "capacity_gate", "compare", "drifted", "interval"]

VERSION = "1"


def interval(values: Mapping[str, list[float]]) -> dict[str, float | None]:
    """A config's capacity answer from its repeat values (the newest search)."""

    def last(name: str) -> float | None:
        series = values.get(name) or []
        return float(series[-1]) if series else None

    return {"capacity": last("capacity"), "ci_low": last("capacity_ci_low"),
            "ci_high": last("capacity_ci_high")}


def _log_se(side: Mapping[str, float | None], z: float) -> float:
    """The standard error of ``log capacity`` from its interval (0: a bound with no width)."""
    capacity, low, high = side["capacity"], side["ci_low"], side["ci_high"]
    assert capacity is not None and capacity > 0
    widths = [math.log(capacity / low) if low is not None and low > 0 else None,
              math.log(high / capacity) if high is not None else None]
    known = [w for w in widths if w is not None]
    return sum(known) / (len(known) * z) if known else 0.0


def _p_above(excess: float, se: float) -> float:
    """One-sided p-value that the true excess is <= 0 when ``excess`` was observed."""
    if se <= 0:
        return 0.0 if excess > 0 else 1.0
    return 1.0 - NormalDist().cdf(excess / se)


def compare(kept: Mapping[str, float | None], candidate: Mapping[str, float | None], *,
            threshold: float, alpha: float, confidence: float) -> dict[str, Any]:
    """The verdict on ``candidate`` against ``kept`` (module docstring).

    Returns: ``decision`` (ACCEPT / REJECT / INCONCLUSIVE), ``effect`` (relative change of the
    estimate), ``threshold``, ``p_adjusted`` (the p-value of the decision taken, or of the
    accept test when none was), and ``reason`` in words.

    >>> kept = {"capacity": 10.0, "ci_low": 9.5, "ci_high": 10.5}
    >>> compare(kept, {"capacity": 12.0, "ci_low": 11.4, "ci_high": 12.6}, threshold=0.03,
    ...         alpha=0.05, confidence=0.95)["decision"]
    'ACCEPT'
    >>> compare(kept, {"capacity": 10.2, "ci_low": 9.7, "ci_high": 10.7}, threshold=0.03,
    ...         alpha=0.05, confidence=0.95)["decision"]
    'INCONCLUSIVE'
    """
    k, c = kept["capacity"], candidate["capacity"]
    out: dict[str, Any] = {"threshold": threshold, "effect": 0.0, "p_adjusted": 1.0}
    if k is None or c is None:
        return out | {"decision": "INCONCLUSIVE", "reason": "a search gave no capacity"}
    if k == 0 or c == 0:
        return out | _zero(kept, candidate)
    out["effect"] = c / k - 1
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    se = math.hypot(_log_se(kept, z), _log_se(candidate, z))
    d = math.log(c / k)
    p_accept = _p_above(d - math.log1p(threshold), se)
    p_reject = _p_above(-d, se)
    if kept["ci_high"] is not None and p_accept < alpha:
        return out | {"decision": "ACCEPT", "p_adjusted": p_accept,
                      "reason": f"capacity {c:g} vs {k:g}: more by {out['effect']:+.1%}, "
                                f"beyond the {threshold:.0%} threshold (p {p_accept:.2g})"}
    if candidate["ci_high"] is not None and p_reject < alpha:
        return out | {"decision": "REJECT", "p_adjusted": p_reject,
                      "reason": f"capacity {c:g} vs {k:g}: less (p {p_reject:.2g})"}
    if kept["ci_high"] is None:
        why = "the kept config met the targets at max_load (raise [capacity] max_load)"
    else:
        why = (f"capacity {c:g} vs {k:g} ({out['effect']:+.1%}): the intervals cannot tell "
               f"a gain of {threshold:.0%} (p {p_accept:.2g})")
    return out | {"decision": "INCONCLUSIVE", "p_adjusted": p_accept, "reason": why}


def _zero(kept: Mapping[str, float | None],
          candidate: Mapping[str, float | None]) -> dict[str, Any]:
    """The verdict when either capacity is 0 (no load met the targets)."""
    k, c = kept["capacity"], candidate["capacity"]
    if k == 0 and c == 0:
        return {"decision": "INCONCLUSIVE",
                "reason": "neither config meets the targets at the lowest load"}
    if c == 0:
        return {"decision": "REJECT", "effect": -1.0, "p_adjusted": 0.0,
                "reason": f"the candidate meets the targets at no load; the kept one at {k:g}"}
    above = kept["ci_high"]
    low = candidate["ci_low"] or 0.0
    if above is not None and c is not None and low > above:
        return {"decision": "ACCEPT", "effect": c / above - 1, "p_adjusted": 0.0,
                "reason": f"capacity {c:g} where the kept config met the targets at no load "
                          f"(none at {above:g})"}
    return {"decision": "INCONCLUSIVE",
            "reason": f"capacity {c:g} against 0, but its interval reaches the loads the kept "
                      "config failed at"}


def drifted(kept: Mapping[str, float | None], again: Mapping[str, float | None], *,
            alpha: float, confidence: float) -> bool:
    """Whether a re-check of the kept config differs from its capacity (two-sided)."""
    verdict = compare(kept, again, threshold=0.0, alpha=alpha / 2, confidence=confidence)
    return bool(verdict["decision"] in ("ACCEPT", "REJECT"))


def capacity_gate(inputs: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The ``capacity_gate`` decider: :func:`compare` on its recorded inputs (replayable)."""
    return compare(inputs["kept"], inputs["candidate"], threshold=inputs["threshold"],
                   alpha=inputs["alpha"], confidence=inputs["confidence"])
