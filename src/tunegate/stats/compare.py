"""Fixed-sample comparisons of a candidate against the baseline, as relative effects.

Every comparison returns a :class:`Comparison`: the relative effect ``(candidate - baseline) /
baseline`` (raw direction; the gate turns it into an improvement using the metric's direction),
a confidence interval on the same scale, a two-sided p-value for "no difference", and the method.

- :func:`welch`: Welch's unequal-variance t-test on per-repeat values (``scipy.stats.ttest_ind``
  with ``equal_var=False``). The interval is Welch's interval for the difference of means divided
  by the baseline mean (the baseline mean's own uncertainty is ignored: second order at the
  noise levels here).
- :func:`mann_whitney`: the rank test (``scipy.stats.mannwhitneyu``), robust to one wild repeat;
  the effect is the Hodges-Lehmann shift (median of all pairwise differences) over the baseline
  median. No interval.
- :func:`bootstrap_quantile`: for percentiles of per-request samples (p99 TTFT is not normal):
  ``scipy.stats.bootstrap`` with ``method="percentile"`` on the relative difference of the q-th
  quantiles; the p-value is the two-sided bootstrap sign probability
  ``2 min(P*(diff <= 0), P*(diff >= 0))``.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(11)
>>> base = 100 * (1 + 0.02 * rng.standard_normal(8))
>>> cand = 106 * (1 + 0.02 * rng.standard_normal(8))
>>> w = welch(base, cand)
>>> round(w.effect, 4), round(w.p_value, 6) < 0.001
(0.0579, True)
>>> [round(x, 4) for x in w.interval]
[0.038, 0.0778]
>>> round(mann_whitney(base, cand).p_value, 5)
0.00062
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats as sps

from tunegate.errors import ConfigError

__all__ = ["Comparison", "bootstrap_quantile", "mann_whitney", "welch"]

Values = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class Comparison:
    """Candidate versus baseline on one metric.

    Attributes:
        method: ``"welch"``, ``"mann-whitney"`` or ``"bootstrap-percentile"``.
        n_baseline: repeats (or samples) of the baseline.
        n_candidate: repeats (or samples) of the candidate.
        baseline: baseline location (mean, median or quantile), in the metric's unit.
        candidate: candidate location, same kind.
        effect: relative effect ``(candidate - baseline) / baseline``.
        interval: confidence interval of ``effect`` (``None`` when the method gives none).
        confidence: the interval's coverage.
        p_value: two-sided p-value for no difference.
        statistic: the test statistic (t, U, or the bootstrap's observed effect).
        df: Welch degrees of freedom (None for the other methods).
    """

    method: str
    n_baseline: int
    n_candidate: int
    baseline: float
    candidate: float
    effect: float
    interval: tuple[float, float] | None
    confidence: float
    p_value: float
    statistic: float
    df: float | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-serialisable form."""
        out = asdict(self)
        out["interval"] = list(self.interval) if self.interval is not None else None
        return out


def _arrays(baseline: Values, candidate: Values, least: int) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    for name, arr in (("baseline", b), ("candidate", c)):
        if arr.ndim != 1 or arr.size < least:
            raise ConfigError(f"{name} needs at least {least} values to compare, got {arr.size}")
        if not np.all(np.isfinite(arr)):
            raise ConfigError(f"{name} contains NaN or infinity; drop failed runs first")
    return b, c


def _relative(value: float, ref: float) -> float:
    if ref == 0.0:
        raise ConfigError("the baseline is 0, so a relative effect is undefined")
    return value / abs(ref)


def welch(baseline: Values, candidate: Values, confidence: float = 0.95) -> Comparison:
    """Welch's t-test and interval on per-repeat values, as a relative effect.

    Args:
        baseline: one value per baseline repeat (>= 2).
        candidate: one value per candidate repeat (>= 2).
        confidence: coverage of the interval.
    """
    b, c = _arrays(baseline, candidate, 2)
    mb, mc = float(b.mean()), float(c.mean())
    vb, vc = float(b.var(ddof=1)) / b.size, float(c.var(ddof=1)) / c.size
    diff = mc - mb
    se = math.sqrt(vb + vc)
    if se == 0.0:  # both arms constant: the difference is exact
        p = 1.0 if diff == 0.0 else 0.0
        eff = _relative(diff, mb)
        stat = 0.0 if diff == 0.0 else math.copysign(1e300, diff)
        return Comparison("welch", b.size, c.size, mb, mc, eff, (eff, eff), confidence, p, stat,
                          float(b.size + c.size - 2))
    df = (vb + vc) ** 2 / (vb * vb / (b.size - 1) + vc * vc / (c.size - 1))
    res = sps.ttest_ind(c, b, equal_var=False)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    return Comparison("welch", b.size, c.size, mb, mc, _relative(diff, mb),
                      (_relative(diff - half, mb), _relative(diff + half, mb)), confidence,
                      float(res.pvalue), float(res.statistic), df)


def mann_whitney(baseline: Values, candidate: Values) -> Comparison:
    """Mann-Whitney U test; effect = Hodges-Lehmann shift over the baseline median."""
    b, c = _arrays(baseline, candidate, 1)
    res = sps.mannwhitneyu(c, b, alternative="two-sided")
    mb, mc = float(np.median(b)), float(np.median(c))
    shift = float(np.median(np.subtract.outer(c, b)))
    return Comparison("mann-whitney", b.size, c.size, mb, mc, _relative(shift, mb), None, 0.95,
                      float(res.pvalue), float(res.statistic))


def bootstrap_quantile(baseline: Values, candidate: Values, q: float, *,
                       confidence: float = 0.95, n_resamples: int = 2000,
                       seed: int = 0) -> Comparison:
    """Bootstrap percentile interval for the relative change of the q-th quantile.

    Args:
        baseline: per-request samples of the baseline (e.g. every TTFT of its runs).
        candidate: per-request samples of the candidate.
        q: the quantile in (0, 1), e.g. 0.99.
        confidence: coverage of the interval.
        n_resamples: bootstrap resamples.
        seed: seed of the resampling (the record keeps it, so the interval replays exactly).
    """
    if not 0 < q < 1:
        raise ConfigError(f"quantile must lie strictly between 0 and 1, got {q}")
    b, c = _arrays(baseline, candidate, 2)
    qb, qc = float(np.quantile(b, q)), float(np.quantile(c, q))
    if qb == 0.0:
        raise ConfigError("the baseline quantile is 0, so a relative effect is undefined")

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        qx = np.quantile(x, q, axis=axis)
        return np.asarray((np.quantile(y, q, axis=axis) - qx) / np.abs(qx))

    res = sps.bootstrap((b, c), stat, n_resamples=n_resamples, confidence_level=confidence,
                        method="percentile", vectorized=True, paired=False,
                        rng=np.random.default_rng(seed))
    dist = np.asarray(res.bootstrap_distribution)
    p = min(1.0, 2.0 * min(float(np.mean(dist <= 0)), float(np.mean(dist >= 0))))
    eff = (qc - qb) / abs(qb)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Comparison("bootstrap-percentile", b.size, c.size, qb, qc, eff, (lo, hi), confidence,
                      p, eff)
