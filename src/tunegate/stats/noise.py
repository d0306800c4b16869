"""Baseline noise: the relative standard deviation of one run, with its own uncertainty.

The accept threshold, the power analysis and the sequential gate all start from sigma_baseline,
the run-to-run noise of a metric measured *on this machine now* (not a vendor's number). It is
relative (standard deviation / mean) so that a 2% noise on throughput and on p99 TTFT mean the
same thing. With few repeats sigma itself is uncertain, so the estimate carries a chi-square
confidence interval (normal runs assumed): ``s^2 (n-1) / chi2_{1-g/2, n-1} <= sigma^2 <=
s^2 (n-1) / chi2_{g/2, n-1}``. The upper limit is the conservative value the sequential gate
uses as its variance proxy.

Refreshing during a run: ``estimate.updated(new_repeats)`` pools the new baseline repeats with the
old ones (Chan et al.'s parallel update of mean and sum of squares). Pooling across a level shift
inflates sigma, which makes the threshold stricter, never laxer; use the drift detectors to decide
when to start afresh instead.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(7)
>>> runs = 1000.0 * (1 + 0.02 * rng.standard_normal(20))
>>> est = estimate_noise(runs)
>>> round(est.sigma, 4), est.n
(0.0157, 20)
>>> lo, hi = est.sigma_interval()
>>> round(lo, 4), round(hi, 4)
(0.012, 0.023)
>>> round(est.updated(runs[:5]).sigma, 4), est.updated(runs[:5]).n
(0.0145, 25)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from tunegate.errors import ConfigError

__all__ = ["NoiseEstimate", "estimate_noise", "pooled_sigma"]


@dataclass(frozen=True)
class NoiseEstimate:
    """Run-to-run noise of one metric from ``n`` repeated baseline measurements.

    Attributes:
        n: number of repeats behind the estimate.
        mean: mean of the repeats, in the metric's unit.
        m2: sum of squared deviations from the mean (Welford's M2), in unit squared.
    """

    n: int
    mean: float
    m2: float

    @property
    def sd(self) -> float:
        """Sample standard deviation (ddof=1), in the metric's unit."""
        return math.sqrt(self.m2 / (self.n - 1))

    @property
    def sigma(self) -> float:
        """Relative noise: ``sd / |mean|`` (0.02 means 2% of the mean per run)."""
        return self.sd / abs(self.mean)

    def sigma_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Two-sided chi-square confidence interval for the relative sigma.

        Args:
            confidence: coverage of the interval, in (0, 1).

        Returns:
            ``(lower, upper)`` relative sigma.
        """
        _check_level(confidence, "confidence")
        df = self.n - 1
        g = 1.0 - confidence
        lo = self.sigma * math.sqrt(df / float(sps.chi2.ppf(1.0 - g / 2.0, df)))
        hi = self.sigma * math.sqrt(df / float(sps.chi2.ppf(g / 2.0, df)))
        return lo, hi

    def sigma_upper(self, confidence: float = 0.975) -> float:
        """One-sided upper confidence limit of the relative sigma.

        Args:
            confidence: probability that the true sigma lies below the returned value.
        """
        _check_level(confidence, "confidence")
        df = self.n - 1
        return self.sigma * math.sqrt(df / float(sps.chi2.ppf(1.0 - confidence, df)))

    def updated(self, values: Sequence[float] | np.ndarray) -> NoiseEstimate:
        """Pool further baseline repeats into the estimate (refresh during a run).

        Args:
            values: new repeats of the same metric on the same baseline.

        Returns:
            A new estimate over all ``n + len(values)`` repeats.
        """
        other = estimate_noise(values, min_repeats=1)
        n = self.n + other.n
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        m2 = self.m2 + other.m2 + delta * delta * self.n * other.n / n
        return NoiseEstimate(n=n, mean=mean, m2=m2)

    def to_dict(self) -> dict[str, float | int]:
        """JSON-serialisable form (what the decision record stores)."""
        return {"n": self.n, "mean": self.mean, "m2": self.m2, "sigma": self.sigma}


def estimate_noise(values: Sequence[float] | np.ndarray, *, min_repeats: int = 2) -> NoiseEstimate:
    """Estimate the relative run-to-run noise from repeated baseline measurements.

    Args:
        values: one summary value per repeat (e.g. output throughput of each run).
        min_repeats: fewest repeats accepted (2 is the least that has a spread at all).

    Returns:
        The estimate; ``sigma`` is relative to the mean.

    Raises:
        ConfigError: too few repeats, non-finite values, or a zero mean.
    """
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size < min_repeats:
        raise ConfigError(
            f"noise needs at least {min_repeats} repeated measurements, got {arr.size}; "
            "run the baseline more times")
    if not np.all(np.isfinite(arr)):
        raise ConfigError("noise: repeats contain NaN or infinity; drop the failed runs first")
    mean = float(arr.mean())
    if mean == 0.0:
        raise ConfigError("noise: the mean of the repeats is 0, so a relative sigma is undefined")
    m2 = float(((arr - mean) ** 2).sum())
    return NoiseEstimate(n=int(arr.size), mean=mean, m2=m2)


def _check_level(value: float, name: str) -> None:
    if not 0.0 < value < 1.0:
        raise ConfigError(f"{name} must lie strictly between 0 and 1, got {value}")


def pooled_sigma(sigma: float, repeats: int, prior_sigma: float, prior_repeats: int
                 ) -> tuple[float, int]:
    """Two estimates of one config's relative noise in one environment (this run's first
    repeats and an earlier run's), pooled by degrees of freedom: ``(sigma, repeats the pooled
    estimate stands for)``.

    Example:
        >>> sigma, repeats = pooled_sigma(0.02, 3, 0.04, 3)
        >>> round(sigma, 4), repeats
        (0.0316, 5)
    """
    dof = max(repeats - 1, 0) + max(prior_repeats - 1, 0)
    if dof == 0:
        return sigma, repeats
    variance = (max(repeats - 1, 0) * sigma**2 + max(prior_repeats - 1, 0) * prior_sigma**2)
    return math.sqrt(variance / dof), dof + 1
