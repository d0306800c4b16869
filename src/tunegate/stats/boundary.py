"""Where a noisy pass/fail boundary in load lies, with a confidence interval: the statistics of
a capacity search.

Each probe at load ``L`` passed or failed its latency targets. Near the capacity whether a probe
passes is close to a coin toss: a finite run's percentile varies from run to run, and near
saturation it jumps (one run's queue drains, the next one's builds: a p99 TTFT can be 0.9x the
target in one run and 5x in the next at the same load). A line through the margins there is
confidently wrong, so the inference uses what every probe says for sure, its verdict, through
the **probit model**

    P(pass at x) = Phi((x0 - x) / s),   x = log L,

whose ``x0`` is the capacity: the load a probe of this size passes half the time (``s``, the
run-to-run spread of that load, is a nuisance parameter, kept within
[:data:`MIN_SPREAD`, :data:`MAX_SPREAD`]). The estimate maximises the likelihood; the interval
is the **profile-likelihood** set ``{x0 : 2 (max log L - max_s log L(x0, s)) <= chi2_1}``. When
the probes are perfectly separated (every pass below every fail), the likelihood is flat over
the gap, the estimate is its middle, and the interval reaches beyond it as far as some spread
(at least ``MIN_SPREAD``) leaves the verdicts plausible: a little with many probes near the
gap, much farther with a few far apart. How well this covers the true capacity is measured,
not assumed (``benchmarks/capacity_accuracy.py``).

The margins (how far over or under) are not thrown away: the search uses them to place the next
probe inside the bracket (:func:`next_inside`), which narrows it faster than halving.

Example (passes at 4, 8 and 9 req/s, fails at 10 and 12; no randomness):

>>> import math
>>> probes = [(4, -0.5), (8, -0.2), (9, -0.05), (10, 0.1), (12, 0.6)]
>>> b = fit_boundary([MarginPoint(math.log(load), m) for load, m in probes])
>>> b.kind, round(math.exp(b.root), 2), round(math.exp(b.low), 2), round(math.exp(b.high), 2)
('probit', 9.47, 7.8, 11.91)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

__all__ = ["MAX_SPREAD", "MIN_SPREAD", "Boundary", "MarginPoint", "bracket", "fit_boundary",
           "next_inside"]

MIN_SPREAD = 0.05
"""Smallest run-to-run spread of the passing load the model allows (log scale, 5%). With
perfectly separated verdicts the likelihood prefers the smallest spread it may, so this floor
sets how far beyond them the interval reaches, and it must not be smaller than what servers
show: fitted to hundreds of verdicts on the simulator, the spread (a probe one spread below
the capacity passes 84% of the time, one above it 16%) was 3.6% (h100-8b by concurrency), 7.3%
(h100-8b by rate) and 8.6% (h200-70b, attainment) (``benchmarks/capacity_accuracy.py``). A
synthetic check of the search (verdicts from a probit world; 60 searches per cell at spreads of
3%, 4.5% and 6.5%, 80 at 3.5% and 8.6%) covered the true capacity in 88%, 85% and 78% of
searches at a floor of 2% and in 97%, 98% and 95% at 4%; at spreads 3.5% and 8.6%, 97.5% and
90% at 4% (11 and 16.5 probes), 97.5% and 92.5% at 5% (13 and 18 probes). Integrating the
spread out instead of profiling it covered 95-99% but needed 16-20 probes."""
MAX_SPREAD = 0.5
"""Largest spread considered (log scale): beyond it a verdict says nothing about load."""
GRID = 1200
"""Points of the crossing's grid (the interval's resolution is the grid's span / GRID)."""

Kind = Literal["probit", "zero", "at_least", "none"]


@dataclass(frozen=True, slots=True)
class MarginPoint:
    """One probe.

    Attributes:
        x: ``log(load)``.
        margin: Binding margin (<= 0: passed); ``inf`` when it failed for sure without a value.
    """

    x: float
    margin: float

    @property
    def passed(self) -> bool:
        return self.margin <= 0


@dataclass(frozen=True, slots=True)
class Boundary:
    """The crossing, in log load.

    Attributes:
        kind: ``probit`` (passes and fails: the model's estimate and interval), ``zero`` (every
            probe failed), ``at_least`` (every probe passed), ``none`` (no probe).
        root: The estimate; for ``zero`` the lowest probe, for ``at_least`` the highest.
        low, high: The interval (``-inf`` / ``inf`` where unbounded).
        spread: The fitted run-to-run spread ``s`` (``None`` without a fit).
        misordered: Pairs of a pass at a higher load than a fail (noise, or a curve that is not
            monotone).
    """

    kind: Kind
    root: float
    low: float
    high: float
    spread: float | None = None
    misordered: int = 0

    @property
    def relative_width(self) -> float:
        """``(high - low) / root`` in load units (``inf`` when unbounded)."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return math.inf
        return (math.exp(self.high) - math.exp(self.low)) / math.exp(self.root)


def _misordered(points: Sequence[MarginPoint]) -> int:
    passes = [p.x for p in points if p.passed]
    fails = [p.x for p in points if not p.passed]
    return sum(1 for xp in passes for xf in fails if xp > xf)


def bracket(points: Sequence[MarginPoint]) -> tuple[float, float]:
    """The highest pass below the lowest fail, and that fail (noise may misorder others)."""
    lowest_fail = min(p.x for p in points if not p.passed)
    below = [p.x for p in points if p.passed and p.x < lowest_fail]
    return (max(below) if below else -math.inf), lowest_fail


def _interpolated(points: Sequence[MarginPoint], low: float, high: float) -> float:
    """Where the line through the bracketing probes' margins crosses 0 (the midpoint when a
    margin is infinite)."""
    at_low = [p.margin for p in points if p.x == low]
    at_high = [p.margin for p in points if p.x == high and math.isfinite(p.margin)]
    if not at_low or not at_high:
        return (low + high) / 2
    m_low, m_high = float(np.mean(at_low)), float(np.mean(at_high))
    if m_high <= m_low:
        return (low + high) / 2
    share = (-m_low) / (m_high - m_low)
    # A curved margin makes a secant land next to one end again and again (regula falsi's
    # stall): keep the next point within the bracket's middle half.
    return low + (high - low) * min(max(share, 0.25), 0.75)


def _profile(points: Sequence[MarginPoint], confidence: float
             ) -> tuple[float, float, float, float]:
    """Profile likelihood of the probit crossing: (estimate, low, high, spread) in log load."""
    x = np.array([p.x for p in points])
    passed = np.array([p.passed for p in points])
    pad = 3 * MAX_SPREAD
    grid = np.linspace(x.min() - pad, x.max() + pad, GRID)
    spreads = np.geomspace(MIN_SPREAD, MAX_SPREAD, 40)
    z = (grid[:, None, None] - x[None, None, :]) / spreads[None, :, None]
    loglik = np.where(passed, sps.norm.logcdf(z), sps.norm.logcdf(-z)).sum(axis=2)
    best_s = loglik.argmax(axis=1)
    profile = loglik[np.arange(GRID), best_s]
    top = float(profile.max())
    cut = top - float(sps.chi2.ppf(confidence, 1)) / 2
    inside = np.flatnonzero(profile >= cut)
    at_top = np.flatnonzero(profile >= top - 1e-9)
    estimate = float((grid[at_top[0]] + grid[at_top[-1]]) / 2)
    low = float(grid[inside[0]]) if inside[0] > 0 else -math.inf
    high = float(grid[inside[-1]]) if inside[-1] < GRID - 1 else math.inf
    spread = float(spreads[best_s[at_top[len(at_top) // 2]]])
    return estimate, low, high, spread


def fit_boundary(points: Sequence[MarginPoint], *, confidence: float = 0.95) -> Boundary:
    """The crossing of ``points`` (module docstring).

    Passes only: ``at_least`` the highest load. Fails only: ``zero``, the lowest load its
    upper end. Otherwise the probit model's estimate and profile-likelihood interval.
    """
    if not points:
        return Boundary("none", math.nan, -math.inf, math.inf)
    misordered = _misordered(points)
    if all(p.passed for p in points):
        top = max(p.x for p in points)
        return Boundary("at_least", top, top, math.inf, misordered=misordered)
    if not any(p.passed for p in points):
        bottom = min(p.x for p in points)
        return Boundary("zero", bottom, -math.inf, bottom, misordered=misordered)
    estimate, low, high, spread = _profile(points, confidence)
    return Boundary("probit", estimate, low, high, spread=spread, misordered=misordered)


def next_inside(points: Sequence[MarginPoint]) -> float:
    """Where to probe inside the bracket (highest pass below the lowest fail): where the
    bracketing probes' margins interpolate to, kept in the bracket's middle half."""
    low, high = bracket(points)
    return _interpolated(points, low, high) if math.isfinite(low) else high
