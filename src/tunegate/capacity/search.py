"""Where the next probe goes, and when to stop: a pure function of the probes so far.

1. **Bracket.** From the start (:func:`start_load`), up by :data:`GROW` while every probe passes,
   down by
   :data:`SHRINK` while every probe fails, until a pass and a fail exist (or the range's end:
   ``at_least`` / ``zero``).
2. **Refine.** While every pass lies below every fail and the bracket is wider than half the
   resolution, probe inside it where the bracketing probes' margins interpolate to (kept in its
   middle half): faster than halving, and it cannot stall. Then (or once verdicts overlap, a
   pass above a fail), probe a quarter of the interval of
   :func:`tunegate.stats.boundary.fit_boundary` to either side of its estimate in turn: there a
   verdict tests the interval's ends, and the run-to-run spread, instead of its middle again.
3. **Stop** when the interval is within +-``resolution`` of the estimate (``resolved``), when
   it lies wholly below ``stop_below`` (``below``: a tuning candidate that cannot beat the kept
   config), or the probes or the budget run out.

A probe stops sending once it has failed for sure (its verdict is all the fit uses), so probes
over the capacity cost a fraction of their length.

Loads are never rounded to a coarser grid than the knob has: a rate stays a float (a rate
rounded to 0 crashed vLLM's sweep), a concurrency is a whole number >= 1 (a concurrency search
is resolved at +-1 stream where 5% of it is less).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tunegate.capacity.plan import CapacityPlan
from tunegate.capacity.probe import Probe
from tunegate.stats.boundary import (
    MAX_SPREAD,
    Boundary,
    MarginPoint,
    bracket,
    fit_boundary,
    next_inside,
)

__all__ = ["DEFAULT_START", "GROW", "SHRINK", "Decision", "boundary_of", "decide", "start_load"]

GROW = 2.0
SHRINK = 2.0
DEFAULT_START = {"rate": 1.0, "concurrency": 8.0}
"""First load without an anchor or ``--start``."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The next load, or why the search ends (``load`` is then ``None``)."""

    load: float | None
    reason: str = ""


def boundary_of(probes: Sequence[Probe], confidence: float) -> Boundary:
    """The boundary the valid probes give (log load)."""
    points = [MarginPoint(math.log(p.load), p.margin) for p in probes if p.verdict != "invalid"]
    return fit_boundary(points, confidence=confidence)


def start_load(plan: CapacityPlan, anchor_load: float | None) -> float:
    """The first probe's load: ``plan.start``, else the anchor's (the throughput of a burst by
    rate, the mean number in flight during it by concurrency). Starting high is cheap: a probe
    over the capacity stops once it has failed for sure, while one far under it runs its full
    length at a low load, the longest probes of all."""
    if plan.start is not None:
        return plan.start
    if anchor_load is None or not anchor_load > 0:
        return _clamp(plan, DEFAULT_START[plan.by])
    return _clamp(plan, anchor_load)


def _clamp(plan: CapacityPlan, load: float) -> float:
    load = min(max(load, plan.min_load), plan.max_load)
    if plan.by == "concurrency":
        return float(max(1, round(load)))
    return float(f"{load:.4g}")  # readable loads; 4 digits are finer than any resolution


def _resolved(plan: CapacityPlan, boundary: Boundary) -> bool:
    if boundary.kind != "probit":
        return False
    if plan.by == "concurrency" and math.isfinite(boundary.low) \
            and math.isfinite(boundary.high) \
            and math.floor(math.exp(boundary.high)) - math.floor(math.exp(boundary.low)) <= 2:
        return True  # one stream either side: as fine as whole streams and a noisy server go
    return boundary.relative_width <= 2 * plan.resolution


def _fresh(plan: CapacityPlan, load: float, probes: Sequence[Probe]) -> float:
    """``load`` on the knob's grid; for concurrency, the nearest whole number probed fewer than
    twice (a third replicate at one concurrency says little that a neighbour does not)."""
    load = _clamp(plan, load)
    if plan.by != "concurrency":
        return load
    seen = [p.load for p in probes]
    candidates = range(int(plan.min_load), int(plan.max_load) + 1)
    fresh = [c for c in candidates if seen.count(float(c)) < 2]
    if not fresh:
        return load
    return float(min(fresh, key=lambda c: (abs(c - load), c)))


def decide(plan: CapacityPlan, probes: Sequence[Probe], *, spent_s: float,
           anchor_load: float | None = None) -> Decision:
    """The next probe's load, or the reason to stop (module docstring). An answer the probes
    already give (``at_least``, ``zero``, ``resolved``) is named before a spent limit."""
    valid = [p for p in probes if p.verdict != "invalid"]
    ended = _answered(plan, valid)
    if ended is not None:
        return Decision(None, ended)
    if len(probes) >= plan.max_probes:
        return Decision(None, "max_probes")
    if plan.budget_s is not None and spent_s >= plan.budget_s:
        return Decision(None, "budget_spent")
    if len(probes) >= 2 and probes[-1].verdict == probes[-2].verdict == "invalid":
        return Decision(None, "invalid_probes")  # the same load again would be invalid again
    if not valid:
        return Decision(_clamp(plan, start_load(plan, anchor_load)))
    if all(p.verdict == "pass" for p in valid):
        return Decision(_fresh(plan, max(p.load for p in valid) * GROW, probes))
    if all(p.verdict == "fail" for p in valid):
        return Decision(_fresh(plan, min(p.load for p in valid) / SHRINK, probes))
    boundary = boundary_of(valid, plan.confidence)
    points = [MarginPoint(math.log(p.load), p.margin) for p in valid]
    low, high = bracket(points)
    if boundary.misordered == 0 and high - low > math.log1p(plan.resolution / 2):
        return Decision(_fresh(plan, math.exp(next_inside(points)), probes))
    # Verdicts there are coin tosses: probe a quarter of the interval to either side in turn,
    # which tests the interval's ends (and the spread) rather than its middle again.
    side = 1.0 if len(valid) % 2 else -1.0
    width = min(boundary.high - boundary.low, 4 * MAX_SPREAD)
    return Decision(_fresh(plan, math.exp(boundary.root + side * width / 4), probes))


def _answered(plan: CapacityPlan, valid: Sequence[Probe]) -> str | None:
    """``at_least`` (passed at the top of the range), ``zero`` (failed at its bottom),
    ``resolved``, ``below`` (the interval lies under ``plan.stop_below``), or ``None`` while
    the probes do not answer yet."""
    if not valid:
        return None
    if all(p.verdict == "pass" for p in valid):
        return "at_least" if max(p.load for p in valid) >= plan.max_load else None
    if all(p.verdict == "fail" for p in valid):
        return "zero" if min(p.load for p in valid) <= plan.min_load else None
    boundary = boundary_of(valid, plan.confidence)
    if _resolved(plan, boundary):
        return "resolved"
    if plan.stop_below is not None and boundary.kind == "probit" \
            and math.exp(boundary.high) < plan.stop_below:
        return "below"
    return None
