"""Power analysis: how many repeats to run *before* running them.

Closed form (Cohen 1988), two arms of ``n`` repeats each, relative noise sigma, effect d::

    n = (z_{1-alpha/2} + z_{power})^2 * 2 sigma^2 / d^2          (two-sided; z_{1-alpha} one-sided)

e.g. sigma = 2%, d = 3%: (1.95996 + 0.84162)^2 * 2 * 0.02^2 / 0.03^2 = 6.98 -> 7 repeats per arm.
The t version replaces the normal by the noncentral t with 2n - 2 degrees of freedom (sigma is
estimated from the same repeats) and returns the smallest n whose exact power reaches the target.

When the budget cannot reach n, :func:`plan_repeats` says so and reports the minimum detectable
effect at the budget: "3 runs showed no difference" is no evidence of no difference when 8 were
needed.

The gate does more than a significance test: it also requires the estimated improvement to clear
t = max(2 sigma_hat, 3%), where sigma_hat is itself estimated. :func:`gate_power` is the power of
that rule (normal runs, one objective): it averages, over the chi-square law of sigma_hat,
``P(effect_hat >= max(t(sigma_hat), c * se))`` with
``effect_hat ~ N(d, (1 + (1 + d)^2) sigma^2 / n)`` (the candidate's runs are (1 + d) times
larger, so is their spread) and ``c`` the two-sided t critical value. :func:`gate_sample_size`
inverts it (conservatively, see there); these are the repeats the benchmark gives the gate.

Inputs are checked before any arithmetic, so extreme values are one
:class:`~tunegate.errors.ConfigError` naming the value, never a ``ZeroDivisionError`` or an
``OverflowError``: sigma in (0, :data:`MAX_SIGMA`], a non-zero effect of at most
:data:`MAX_EFFECT` in size, alpha in [:data:`MIN_ALPHA`, 1) (below it the normal quantile is
infinite in double precision), power above alpha and at most ``1 - MIN_ALPHA``, and budgets and
results of at most :data:`MAX_REPEATS` repeats per arm (an effect that needs more is too small
for its noise to be measured by repeating benchmarks).

Example (seeded):

>>> sample_size_z(0.02, 0.03)
7
>>> sample_size_t(0.02, 0.03)
9
>>> round(minimum_detectable_effect(3, 0.02), 4)
0.0457
>>> plan_repeats(0.02, 0.03, budget=3).feasible
False
>>> gate_sample_size(0.02, 0.05, noise_repeats=10)
10
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from scipy import optimize
from scipy import stats as sps

from tunegate.errors import ConfigError
from tunegate.stats.threshold import ThresholdPolicy

__all__ = [
    "MAX_EFFECT",
    "MAX_REPEATS",
    "MAX_SIGMA",
    "MIN_ALPHA",
    "RepeatPlan",
    "gate_power",
    "gate_sample_size",
    "minimum_detectable_effect",
    "plan_repeats",
    "power_t",
    "power_z",
    "sample_size_t",
    "sample_size_z",
]

MAX_REPEATS = 100_000
"""Most repeats per arm a plan may need or a budget may offer."""
MAX_SIGMA = 10.0
"""Largest relative noise accepted (1,000%): beyond it the runs measure nothing."""
MAX_EFFECT = 100.0
"""Largest relative effect accepted (a 100-fold change): beyond it, a unit mistake."""
MIN_ALPHA = 1e-10
"""Smallest alpha (and ``1 - power``): the normal quantile is exact to there."""
_MAX_N = MAX_REPEATS


def _check(sigma: float, effect: float | None, alpha: float, power: float | None) -> None:
    if not math.isfinite(sigma) or not 0 < sigma <= MAX_SIGMA:
        raise ConfigError(f"sigma must be a relative noise in (0, {MAX_SIGMA:g}] (0.02 = 2%), "
                          f"got {sigma}")
    if effect is not None and (not math.isfinite(effect) or effect == 0
                               or abs(effect) > MAX_EFFECT):
        raise ConfigError(f"effect must be a non-zero relative effect of at most "
                          f"{MAX_EFFECT:g} in size (0.03 = 3%), got {effect}")
    if not MIN_ALPHA <= alpha < 1:  # also refuses NaN
        raise ConfigError(f"alpha must lie in [{MIN_ALPHA:g}, 1): below it the normal quantile "
                          f"is infinite in double precision; got {alpha}")
    if power is not None and not alpha < power <= 1 - MIN_ALPHA:
        raise ConfigError(f"power must lie above alpha ({alpha:g}) and at most 1 - "
                          f"{MIN_ALPHA:g}: a test that detects an effect less often than it "
                          f"raises a false alarm measures nothing; got {power}")


def _check_repeats(name: str, n: int, least: int = 2) -> None:
    if not least <= n <= MAX_REPEATS:
        raise ConfigError(f"{name} must be from {least} to {MAX_REPEATS:,} repeats per arm, "
                          f"got {n}")


def _z_alpha(alpha: float, two_sided: bool) -> float:
    return float(sps.norm.ppf(1 - alpha / 2 if two_sided else 1 - alpha))


def sample_size_z(sigma: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                  two_sided: bool = True) -> int:
    """Repeats per arm from the closed form ``(z_a + z_b)^2 * 2 sigma^2 / d^2``, rounded up.

    Args:
        sigma: relative run-to-run noise of one run.
        effect: relative effect to detect (sign ignored).
        alpha: type-I error.
        power: probability of detecting ``effect`` (1 - beta).
        two_sided: use z_{1-alpha/2} (default) or z_{1-alpha}.
    """
    _check(sigma, effect, alpha, power)
    z = _z_alpha(alpha, two_sided) + float(sps.norm.ppf(power))
    ratio = sigma / abs(effect)
    n = z * z * 2 * ratio * ratio  # inf, not an error, when the ratio is extreme
    if not n <= MAX_REPEATS:
        raise ConfigError(
            f"effect {abs(effect):.3g} under sigma {sigma:.3g} needs more than "
            f"{MAX_REPEATS:,} repeats per arm: the effect is too small for its noise")
    return max(2, math.ceil(n - 1e-9))


def power_z(n: int, sigma: float, effect: float, alpha: float = 0.05,
            two_sided: bool = True) -> float:
    """Power of the two-sample z-test with ``n`` repeats per arm (known sigma)."""
    _check(sigma, effect, alpha, None)
    shift = abs(effect) / (sigma * math.sqrt(2.0 / n))
    za = _z_alpha(alpha, two_sided)
    p = float(sps.norm.sf(za - shift))
    return p + float(sps.norm.cdf(-za - shift)) if two_sided else p


def power_t(n: int, sigma: float, effect: float, alpha: float = 0.05,
            two_sided: bool = True) -> float:
    """Exact power of the two-sample t-test (equal n, pooled sigma) via the noncentral t."""
    _check(sigma, effect, alpha, None)
    if n < 2:
        return 0.0
    df = 2 * n - 2
    ncp = abs(effect) / (sigma * math.sqrt(2.0 / n))
    crit = float(sps.t.ppf(1 - alpha / 2 if two_sided else 1 - alpha, df))
    with warnings.catch_warnings():  # a series that did not converge is caught as NaN below
        warnings.simplefilter("ignore", RuntimeWarning)
        upper = float(sps.nct.sf(crit, df, ncp))
        lower = float(sps.nct.cdf(-crit, df, ncp)) if two_sided else 0.0
    if not (math.isfinite(upper) and math.isfinite(lower)):
        upper, lower = _nct_tails(crit, df, ncp)
    return upper + lower if two_sided else upper


def _nct_tails(crit: float, df: int, ncp: float) -> tuple[float, float]:
    """``P(T > crit)`` and ``P(T < -crit)`` for the noncentral t, by quadrature.

    SciPy's series gives NaN for a large noncentrality (about 20 and up, where the power is
    near 1; measured at n = 1000, d / sigma = 1). ``T = (Z + ncp) / sqrt(V / df)`` with
    ``V ~ chi2(df)``, so each tail is the mean of a normal tail over 4096 equal-probability
    quantiles of ``V``.
    """
    q = (np.arange(4096) + 0.5) / 4096
    scale = crit * np.sqrt(sps.chi2.ppf(q, df) / df)
    return (float(np.mean(sps.norm.sf(scale - ncp))),
            float(np.mean(sps.norm.cdf(-scale - ncp))))


def sample_size_t(sigma: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                  two_sided: bool = True) -> int:
    """Smallest repeats per arm whose exact t-test power reaches ``power``."""
    _check(sigma, effect, alpha, power)
    n = max(2, sample_size_z(sigma, effect, alpha, power, two_sided) - 1)
    while power_t(n, sigma, effect, alpha, two_sided) < power:
        n += 1
        if n > _MAX_N:
            raise ConfigError(f"sample size exceeds {MAX_REPEATS:,} repeats per arm; the "
                              "effect is too small for its noise")
    return n


def minimum_detectable_effect(n: int, sigma: float, alpha: float = 0.05, power: float = 0.8,
                              two_sided: bool = True,
                              method: Literal["z", "t"] = "z") -> float:
    """Smallest relative effect detected with probability ``power`` at ``n`` repeats per arm."""
    _check(sigma, None, alpha, power)
    _check_repeats("the minimum detectable effect's n", n)
    z_mde = (_z_alpha(alpha, two_sided) + float(sps.norm.ppf(power))) * sigma * math.sqrt(2.0 / n)
    if method == "z":
        return z_mde
    hi = z_mde
    while power_t(n, sigma, hi, alpha, two_sided) < power:  # grow the bracket (t > z effect)
        hi *= 1.5
    return float(optimize.brentq(
        lambda d: power_t(n, sigma, d, alpha, two_sided) - power, z_mde * 0.5, hi))


@dataclass(frozen=True)
class RepeatPlan:
    """The outcome of a power analysis, with the budget check.

    Attributes:
        n: repeats per arm needed to detect ``effect`` with ``power``.
        method: ``"z"`` (closed form) or ``"t"`` (noncentral t).
        sigma: relative noise assumed.
        effect: relative effect to detect.
        alpha: type-I error.
        power: target power.
        budget: repeats per arm available, if known.
        feasible: whether ``budget`` reaches ``n`` (True when no budget was given).
        power_at_budget: the power the budget buys (None without a budget).
        mde_at_budget: the smallest effect the budget can detect with ``power`` (None without).
        message: one line for the user.
    """

    n: int
    method: str
    sigma: float
    effect: float
    alpha: float
    power: float
    budget: int | None
    feasible: bool
    power_at_budget: float | None
    mde_at_budget: float | None
    message: str

    def to_dict(self) -> dict[str, object]:
        """JSON-serialisable form."""
        return asdict(self)


def plan_repeats(sigma: float, effect: float, *, budget: int | None = None, alpha: float = 0.05,
                 power: float = 0.8, method: Literal["z", "t"] = "z") -> RepeatPlan:
    """Choose the repeats before measuring; if the budget is short, say what it can detect.

    Args:
        sigma: relative run-to-run noise (from :mod:`tunegate.stats.noise`).
        effect: relative effect worth detecting.
        budget: repeats per arm that can be afforded (None: no limit).
        alpha: type-I error (two-sided).
        power: target power.
        method: ``"z"`` closed form or ``"t"`` exact noncentral t.
    """
    if budget is not None:
        _check_repeats("budget", budget)
    if method not in ("z", "t"):
        raise ConfigError(f"method must be 'z' or 't', got {method!r}")
    size = sample_size_z if method == "z" else sample_size_t
    n = size(sigma, effect, alpha, power)
    d = abs(effect)
    if budget is None:
        return RepeatPlan(n, method, sigma, d, alpha, power, None, True, None, None,
                          f"{n} repeats per arm detect a {d:.2%} effect at sigma {sigma:.2%} "
                          f"with power {power:.0%} (alpha {alpha:g}, two-sided)")
    pw = (power_z if method == "z" else power_t)(budget, sigma, d, alpha)
    mde = minimum_detectable_effect(budget, sigma, alpha, power, method=method)
    feasible = budget >= n
    if feasible:
        message = f"budget {budget} >= {n} repeats needed; power at budget {pw:.0%}"
    else:
        message = (f"budget {budget} < {n} repeats needed for a {d:.2%} effect: power would be "
                   f"only {pw:.0%}; the minimum detectable effect at {budget} repeats is "
                   f"{mde:.2%}, so 'no difference seen' would not mean 'no difference'")
    return RepeatPlan(n, method, sigma, d, alpha, power, budget, feasible, pw, mde, message)


def gate_power(n: int, sigma: float, effect: float, *, policy: ThresholdPolicy | None = None,
               noise_repeats: int | None = None, alpha: float = 0.05,
               pooled: bool = True) -> float:
    """Probability that the fixed-n gate ACCEPTs a true relative improvement ``effect``.

    Models the gate's rule for one objective: Welch significance at ``alpha`` and an estimated
    improvement of at least ``max(multiplier * sigma_hat, floor)``, with sigma_hat pooled from
    ``noise_repeats`` earlier baseline repeats and the ``n`` baseline repeats of the comparison.

    Args:
        n: repeats per arm.
        sigma: true relative noise of one run.
        effect: true relative improvement (> 0).
        policy: the threshold policy (default max(2 sigma, 3%)).
        noise_repeats: baseline repeats measured before the comparison (None: none).
        alpha: the test's two-sided type-I error.
        pooled: model sigma_hat as the gate computes it (noise repeats pooled with the
            comparison's baseline runs); False counts the noise repeats only, a noisier threshold
            and so a lower, conservative power.
    """
    _check(sigma, effect, alpha, None)
    if n < 2:
        return 0.0
    policy = policy or ThresholdPolicy()
    prior = noise_repeats - 1 if noise_repeats and noise_repeats > 1 else 0
    df = (n - 1 if pooled or prior == 0 else 0) + prior
    # Relative noise scales with the level: the candidate's runs sit at (1 + d) x baseline.
    se = sigma * math.sqrt((1.0 + (1.0 + effect) ** 2) / n)
    crit = float(sps.t.ppf(1 - alpha / 2, 2 * n - 2)) * se
    # Average over sigma_hat^2 ~ sigma^2 chi2_df / df on 512 equal-probability nodes.
    q = (np.arange(512) + 0.5) / 512
    sigma_hat = sigma * np.sqrt(sps.chi2.ppf(q, df) / df)
    bar = np.maximum(np.maximum(policy.multiplier * sigma_hat, policy.floor), crit)
    return float(np.mean(sps.norm.sf((bar - effect) / se)))


def gate_sample_size(sigma: float, effect: float, power: float = 0.8, *,
                     policy: ThresholdPolicy | None = None, noise_repeats: int | None = None,
                     alpha: float = 0.05, max_n: int = 1000, conservative: bool = True) -> int:
    """Smallest repeats per arm for which :func:`gate_power` reaches ``power``.

    The plan is conservative by default (``pooled=False``: sigma_hat from the noise repeats
    only). Near the threshold the gate's power curve is flat, because the threshold's own noise
    caps it (sigma 2%, d 5%: 0.79, 0.80, 0.81 at 7, 8, 9 repeats), so a plan that lands exactly
    on the target delivers the target only on average; the conservative plan keeps a margin
    (10 repeats there; measured 0.82 in ``benchmarks/gate_calibration.py``).

    Raises:
        ConfigError: ``max_n`` repeats do not suffice (e.g. the effect is below the floor).
    """
    _check(sigma, effect, alpha, power)
    if noise_repeats is not None:
        _check_repeats("noise_repeats", noise_repeats)
    for n in range(2, max_n + 1):
        if gate_power(n, sigma, effect, policy=policy, noise_repeats=noise_repeats,
                      alpha=alpha, pooled=not conservative) >= power:
            return n
    raise ConfigError(
        f"the gate cannot reach power {power:.0%} for a {effect:.2%} effect within {max_n} "
        "repeats: the effect is at or below the accept threshold max(2 sigma, floor)")
