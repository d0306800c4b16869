"""Always-valid inference: a confidence sequence for a mean (Howard et al. 2021, normal mixture).

Tuning peeks: it looks after every repeat and stops when the result looks good. A fixed-n test
checked after every repeat rejects far more often than alpha. A confidence sequence (CS) is a
sequence of intervals that contains the true mean at *all* times simultaneously with probability
>= 1 - alpha, so stopping whenever one likes keeps the error rate (Howard, Ramdas, McAuliffe &
Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist.).

Boundary used here: the **two-sided normal mixture**. For observations whose centred sum
``S_t = sum(x_i - mu)`` is sub-Gaussian with variance process ``V_t`` (here ``V_t = t sigma^2``),
mixing ``exp(lambda S - lambda^2 V / 2)`` over ``lambda ~ N(0, 1/rho)`` gives the nonnegative
supermartingale ``M_t = sqrt(rho / (V_t + rho)) exp(S_t^2 / (2 (V_t + rho)))``. Ville's
inequality, ``P(exists t: M_t >= 1/alpha) <= alpha``, then gives the boundary::

    u(v) = sqrt( (v + rho) * log( (v + rho) / (rho * alpha^2) ) )

and the CS ``mean_t +- u(t sigma^2) / t``. ``rho`` tunes where the boundary is tightest; the
paper's choice for intrinsic time ``v_opt`` is ``rho = v_opt / (2 log(1/alpha) + log(1 + 2
log(1/alpha)))`` (also what the authors' ``confseq`` package uses). The anytime p-value for a
null mean is ``min(1, min_{s <= t} 1 / M_s)``: valid at any stopping time, so it may enter BH.

Variance: sigma must be a valid sub-Gaussian proxy (known). tunegate passes an *upper*
confidence limit of the measured baseline noise, and, when ``adapt_variance`` is on, uses
``V_t = t * max(sigma^2, s_t^2)`` with the running sample variance: M is decreasing in V for a
fixed S, so a larger V can only shrink M and the guarantee carries over (it gets wider, never
narrower). Observations are assumed independent; heavy tails beyond sub-Gaussian void it.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(5)
>>> cs = ConfidenceSequence(sigma=1.0, alpha=0.05, n_opt=20)
>>> for x in 0.8 + rng.standard_normal(40):
...     cs.update(float(x))
>>> lo, hi = cs.interval
>>> round(lo, 3), round(hi, 3), cs.p_value < 0.05
(0.071, 0.962, True)
>>> round(normal_mixture_boundary(100.0, 0.05, best_rho(100.0, 0.05)), 3)
30.352
"""

from __future__ import annotations

import math

from tunegate.errors import ConfigError

__all__ = ["ConfidenceSequence", "best_rho", "log_mixture_martingale", "normal_mixture_boundary"]


def best_rho(v_opt: float, alpha: float) -> float:
    """Howard et al.'s mixture precision that makes the boundary tight near ``v = v_opt``.

    ``rho = v_opt / (2 log(1/alpha) + log(1 + 2 log(1/alpha)))``.
    """
    if v_opt <= 0 or not 0 < alpha < 1:
        raise ConfigError(f"best_rho needs v_opt > 0 and 0 < alpha < 1, got {v_opt}, {alpha}")
    la = math.log(1.0 / alpha)
    return v_opt / (2.0 * la + math.log(1.0 + 2.0 * la))


def normal_mixture_boundary(v: float, alpha: float, rho: float) -> float:
    """Two-sided normal-mixture boundary ``sqrt((v + rho) log((v + rho) / (rho alpha^2)))``.

    Args:
        v: intrinsic time (the variance process V_t, e.g. ``t * sigma^2``).
        alpha: crossing probability of ``|S_t| >= u(V_t)`` over all t.
        rho: mixture precision (see :func:`best_rho`).
    """
    if v < 0 or rho <= 0 or not 0 < alpha < 1:
        raise ConfigError(f"boundary needs v >= 0, rho > 0, 0 < alpha < 1; got {v}, {rho}, {alpha}")
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha * alpha)))


def log_mixture_martingale(s: float, v: float, rho: float) -> float:
    """``log M = 0.5 log(rho / (v + rho)) + s^2 / (2 (v + rho))``, the two-sided mixture."""
    return 0.5 * math.log(rho / (v + rho)) + s * s / (2.0 * (v + rho))


class ConfidenceSequence:
    """Time-uniform confidence sequence for the mean of a stream of observations.

    Args:
        sigma: sub-Gaussian scale of one observation (a known or upper-bound standard deviation).
        alpha: the probability that the true mean ever leaves the sequence.
        n_opt: the sample size at which the intervals should be tightest.
        null: the mean tested by :attr:`p_value` (0: "no effect").
        adapt_variance: widen with the running sample variance when it exceeds ``sigma^2``.
    """

    def __init__(self, sigma: float, alpha: float = 0.05, *, n_opt: int = 10, null: float = 0.0,
                 adapt_variance: bool = True) -> None:
        if not math.isfinite(sigma) or sigma <= 0:
            raise ConfigError(f"confidence sequence needs sigma > 0, got {sigma}")
        if not 0 < alpha < 1:
            raise ConfigError(f"alpha must lie strictly between 0 and 1, got {alpha}")
        if n_opt < 1:
            raise ConfigError(f"n_opt must be at least 1, got {n_opt}")
        self.sigma = sigma
        self.alpha = alpha
        self.null = null
        self.adapt_variance = adapt_variance
        self.rho = best_rho(n_opt * sigma * sigma, alpha)
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._min_p = 1.0
        self._lo = -math.inf
        self._hi = math.inf

    @property
    def n(self) -> int:
        """Observations so far."""
        return self._n

    @property
    def mean(self) -> float:
        """Running mean (NaN before the first observation)."""
        return self._mean if self._n else math.nan

    @property
    def variance_process(self) -> float:
        """``V_t = t * max(sigma^2, s_t^2)`` (or ``t sigma^2`` without adaptation)."""
        var = self.sigma * self.sigma
        if self.adapt_variance and self._n > 1:
            var = max(var, self._m2 / (self._n - 1))
        return self._n * var

    @property
    def radius(self) -> float:
        """Half-width ``u(V_t) / t`` of the current interval (infinite before any data)."""
        if self._n == 0:
            return math.inf
        return normal_mixture_boundary(self.variance_process, self.alpha, self.rho) / self._n

    @property
    def interval(self) -> tuple[float, float]:
        """The running intersection of all intervals so far.

        Each interval covers the mean at every t at once w.p. >= 1 - alpha, so their running
        intersection does too (and agrees with :attr:`p_value`: it excludes ``null`` exactly
        when some earlier interval did).
        """
        return (self._lo, self._hi)

    @property
    def p_value(self) -> float:
        """Anytime-valid p-value for ``mean == null``: ``min(1, min_s 1 / M_s)``."""
        return self._min_p

    def update(self, x: float) -> None:
        """Add one observation (Welford's update) and refresh the anytime p-value."""
        if not math.isfinite(x):
            raise ConfigError(f"confidence sequence got a non-finite observation {x}")
        self._n += 1
        delta = x - self._mean
        self._mean += delta / self._n
        self._m2 += delta * (x - self._mean)
        s = self._n * (self._mean - self.null)
        log_m = log_mixture_martingale(s, self.variance_process, self.rho)
        self._min_p = min(self._min_p, math.exp(-log_m) if log_m > -700 else 1.0)
        r = self.radius
        self._lo = max(self._lo, self._mean - r)
        self._hi = min(self._hi, self._mean + r)
