"""Leak test: a robust trend test on a watermark series (KV-cache usage, memory) or a count.

A leak shows as a slow monotonic rise that no single window reveals. The test fits the
Theil-Sen slope (the median of all pairwise slopes: one outlier window cannot tilt it) and
judges it with the Mann-Kendall statistic ``S = sum_{i<j} sign(x_j - x_i)``, whose variance under
"no trend" is ``[n(n-1)(2n+5) - sum_ties t(t-1)(2t+5)] / 18``; the one-sided p-value of a rise
is ``1 - Phi((S - 1) / sqrt(var S))``.

Consecutive windows of a watermark are correlated (the same long requests hold KV blocks across
a window boundary), and positive autocorrelation makes Mann-Kendall see trends in noise. The
variance is therefore inflated by the AR(1) effective-sample-size factor ``(1 + rho)/(1 - rho)``
(Yue & Wang 2004 use the full autocorrelation sum; AR(1) keeps its first term). ``rho`` is
estimated from the *first differences*, ``rho = 1 + 2 r1(diff x)`` (for AR(1) noise the lag-1
autocorrelation of the differences is ``-(1 - rho)/2``), so a linear trend does not inflate it
as it would the autocorrelation of the raw series; it is clipped to ``[0, 0.9]``. A noise-free
step (0 then exactly 1) looks like rho near 1 to this estimator and is judged very cautiously.

Long series are averaged into at most ``max_points`` (240) consecutive blocks first: the test
costs O(n^2) and block means are less correlated. Fewer than 10 points are not tested (the
normal approximation of S is poor there): ``p_value = 1``.

A rise is ``rising`` when the one-sided p-value is below ``alpha`` (default 0.01; the verdict
runs it once per series, at the end). With a ``limit`` (1.0 for KV usage, the memory size) and
a positive slope, ``hours_to_limit`` projects the Theil-Sen line from its value at the last
window to the limit (0 when already there).

Example (seeded): KV usage at 40% +- 3 points, growing 2 points an hour, one window a minute:

>>> import numpy as np
>>> rng = np.random.default_rng(5)
>>> t = 60.0 * np.arange(240)
>>> kv = 0.40 + 0.02 * t / 3600 + 0.03 * rng.standard_normal(240)
>>> r = leak_test("kv_cache_usage_peak", t, kv, limit=1.0)
>>> round(r.slope_per_h, 4), r.rising, round(r.hours_to_limit, 1)
(0.0232, True, 22.3)
>>> leak_test("kv_cache_usage_peak", t, 0.40 + 0.03 * rng.standard_normal(240)).rising
False
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

from tunegate.errors import ConfigError

__all__ = ["LeakResult", "leak_test"]

MIN_POINTS = 10
_RHO_MAX = 0.9


@dataclass(frozen=True)
class LeakResult:
    """The trend test of one series (JSON-able via :meth:`to_dict`).

    Attributes:
        metric: the series' name.
        n: windows tested.
        points: points after block averaging (``n`` when no blocks were needed).
        slope_per_h: Theil-Sen slope in the series' unit per hour.
        level: the fitted line's value at the last window.
        p_value: one-sided Mann-Kendall p-value of a rise (autocorrelation-corrected).
        rho: lag-1 autocorrelation the variance was corrected for.
        alpha: significance level of ``rising``.
        rising: ``p_value < alpha``.
        limit: the level that would hurt, if known.
        hours_to_limit: projected hours from the last window to ``limit`` (rising with a
            positive slope and a limit only; 0 when already reached).
    """

    metric: str
    n: int
    points: int
    slope_per_h: float
    level: float
    p_value: float
    rho: float
    alpha: float
    rising: bool
    limit: float | None
    hours_to_limit: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return asdict(self)


def leak_test(metric: str, t_s: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
              *, limit: float | None = None, alpha: float = 0.01,
              max_points: int = 240) -> LeakResult:
    """Test a series for a significant rise and project when it reaches ``limit``.

    Args:
        metric: the series' name (in messages and the result).
        t_s: window times in seconds, strictly increasing.
        values: one value per window.
        limit: the level that would hurt (None: no projection).
        alpha: one-sided significance level.
        max_points: longer series are averaged into this many consecutive blocks.

    Raises:
        ConfigError: lengths differ, a value or time is not finite, times do not increase,
            ``alpha`` is not in (0, 1) or ``max_points`` < 10.
    """
    t = np.asarray(t_s, dtype=float)
    x = np.asarray(values, dtype=float)
    if t.shape != x.shape or t.ndim != 1:
        raise ConfigError(f"leak test {metric!r}: {t.size} times but {x.size} values")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(x))):
        raise ConfigError(f"leak test {metric!r}: a time or value is NaN or infinite")
    if t.size > 1 and np.any(np.diff(t) <= 0):
        raise ConfigError(f"leak test {metric!r}: window times must increase")
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"leak test alpha must lie strictly between 0 and 1, got {alpha}")
    if max_points < MIN_POINTS:
        raise ConfigError(f"leak test max_points must be >= {MIN_POINTS}, got {max_points}")
    n = int(x.size)
    tb, xb = _blocks(t, x, max_points)
    if xb.size < MIN_POINTS:
        last = float(x[-1]) if n else math.nan
        return LeakResult(metric, n, int(xb.size), 0.0, last, 1.0, 0.0, alpha, False, limit, None)
    slope_s, level = _theil_sen(tb, xb)
    rho = _rho_from_differences(xb)
    p = _mann_kendall_rise(xb, rho)
    slope_h = 3600.0 * slope_s
    rising = p < alpha
    to_limit: float | None = None
    if rising and limit is not None and slope_h > 0:
        to_limit = max(0.0, (limit - level) / slope_h)
    return LeakResult(metric, n, int(xb.size), slope_h, level, p, rho, alpha, rising, limit,
                      to_limit)


def _blocks(t: np.ndarray, x: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive block means so that at most ``max_points`` remain (the tail block shorter)."""
    size = max(1, math.ceil(x.size / max_points))
    if size == 1:
        return t, x
    edges = np.arange(0, x.size, size)
    counts = np.diff(np.append(edges, x.size))
    return np.add.reduceat(t, edges) / counts, np.add.reduceat(x, edges) / counts


def _theil_sen(t: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Median pairwise slope (per second) and the line's value at the last time."""
    i, j = np.triu_indices(x.size, k=1)
    slope = float(np.median((x[j] - x[i]) / (t[j] - t[i])))
    intercept = float(np.median(x - slope * t))
    return slope, intercept + slope * float(t[-1])


def _rho_from_differences(x: np.ndarray) -> float:
    """AR(1) coefficient from the lag-1 autocorrelation of the first differences, clipped."""
    d = np.diff(x)
    d = d - d.mean()
    denom = float(np.dot(d, d))
    if denom <= 0.0 or d.size < 3:
        return 0.0
    r1 = float(np.dot(d[1:], d[:-1])) / denom
    return min(max(1.0 + 2.0 * r1, 0.0), _RHO_MAX)


def _mann_kendall_rise(x: np.ndarray, rho: float) -> float:
    """One-sided p-value of a rise: Mann-Kendall with ties, variance inflated for AR(1)."""
    n = x.size
    i, j = np.triu_indices(n, k=1)
    s = float(np.sign(x[j] - x[i]).sum())
    _, ties = np.unique(x, return_counts=True)
    ties = ties[ties > 1].astype(float)
    var = (n * (n - 1) * (2 * n + 5) - float(np.sum(ties * (ties - 1) * (2 * ties + 5)))) / 18.0
    var *= (1.0 + rho) / (1.0 - rho)
    if var <= 0.0 or s <= 0.0:
        return 1.0
    return float(special.ndtr(-(s - 1.0) / math.sqrt(var)))
