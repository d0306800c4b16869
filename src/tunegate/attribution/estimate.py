"""Effects as contrasts of the cells' log means, with intervals and p-values.

Every effect the attribution reports (a change's own effect, an interaction, a Shapley share,
the gauge's change of measurement) is a linear combination ``sum_c w_c log(mean_c)`` of the
cells' log means. On the log scale effects of independent changes add up, and
``exp(effect) - 1`` reads as a relative change, the unit of the gate's threshold. The variance
of a cell's log mean comes from the delta method, ``s^2 / (n mean^2)``; a contrast's degrees of
freedom from Welch-Satterthwaite, so unequal noise between configs is not assumed away.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats as sps

__all__ = ["CellStats", "Estimate", "cell_stats", "estimate", "pooled_sigma"]


@dataclass(frozen=True, slots=True)
class CellStats:
    """One cell's repeats of one metric.

    Attributes:
        n: Repeats.
        mean / sd: Their mean and standard deviation (ddof 1).
    """

    n: int
    mean: float
    sd: float

    @property
    def var_log(self) -> float:
        """Variance of ``log(mean)`` (delta method)."""
        return self.sd**2 / (self.n * self.mean**2)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A contrast's estimate.

    Attributes:
        log_effect: The contrast on the log scale.
        effect: ``exp(log_effect) - 1``: the relative change (-0.61 = -61%).
        ci_low / ci_high: The interval for ``effect``.
        p: Two-sided p-value of "no effect" (Welch's t on the contrast).
    """

    log_effect: float
    effect: float
    ci_low: float
    ci_high: float
    p: float


def cell_stats(values: Sequence[float]) -> CellStats | None:
    """Mean and sd of a cell's repeats; ``None`` with fewer than two or a mean <= 0 (a ratio of
    such means means nothing)."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    if not mean > 0:
        return None
    var = math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return CellStats(len(values), mean, math.sqrt(var))


def estimate(weights: Mapping[str, float], cells: Mapping[str, CellStats],
             confidence: float = 0.95) -> Estimate:
    """The contrast ``sum weights[c] * log(mean_c)`` with its interval and p-value.

    Example:
        >>> a = CellStats(4, 100.0, 2.0)
        >>> b = CellStats(4, 110.0, 2.2)
        >>> e = estimate({"a": -1.0, "b": 1.0}, {"a": a, "b": b})
        >>> round(e.effect, 3), e.ci_low < 0.1 < e.ci_high, e.p < 0.01
        (0.1, True, True)
    """
    # sorted and summed exactly: a replay of recorded (key-sorted) inputs gives the same bits
    terms = [(weights[key], cells[key]) for key in sorted(weights) if weights[key] != 0]
    log_effect = math.fsum(w * math.log(c.mean) for w, c in terms)
    parts = [w * w * c.var_log for w, c in terms]
    variance = math.fsum(parts)
    if variance <= 0:  # noise-free cells (a simulator without noise): the point is exact
        point = math.expm1(log_effect)
        return Estimate(log_effect, point, point, point, 0.0 if abs(log_effect) > 1e-12 else 1.0)
    df = variance**2 / math.fsum(p * p / (c.n - 1)
                                 for p, (_, c) in zip(parts, terms, strict=True) if p > 0)
    se = math.sqrt(variance)
    quantile = float(sps.t.ppf(0.5 + confidence / 2, df))
    p = float(2 * sps.t.sf(abs(log_effect) / se, df))
    return Estimate(log_effect, math.expm1(log_effect), math.expm1(log_effect - quantile * se),
                    math.expm1(log_effect + quantile * se), min(1.0, p))


def pooled_sigma(cells: Sequence[CellStats]) -> float:
    """The relative run-to-run noise pooled over cells (``sd / mean``, weighted by degrees of
    freedom): the sigma of the threshold ``max(2 sigma, floor)``."""
    df = sum(c.n - 1 for c in cells)
    if df == 0:
        return 0.0
    return math.sqrt(math.fsum((c.n - 1) * (c.sd / c.mean) ** 2 for c in cells) / df)
