"""The normal-mixture confidence sequence against the paper's closed form, and time-uniformity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special

from tunegate.errors import ConfigError
from tunegate.stats.sequential import (
    ConfidenceSequence,
    best_rho,
    log_mixture_martingale,
    normal_mixture_boundary,
)


def _boundary_from_martingale(v: float, alpha: float, rho: float) -> float:
    """Independent route: solve M(s, v) = 1/alpha for s, with M the Gaussian mixture of
    exp(lambda s - lambda^2 v / 2) over lambda ~ N(0, 1/rho), integrated numerically."""
    lam = np.linspace(-60, 60, 400_001) / math.sqrt(rho)
    log_weight = 0.5 * math.log(rho / (2 * math.pi)) - rho * lam**2 / 2
    step = float(lam[1] - lam[0])

    def log_m(s: float) -> float:  # Riemann sum in log space (no overflow)
        return float(special.logsumexp(log_weight + lam * s - lam**2 * v / 2)) + math.log(step)

    return float(optimize.brentq(lambda s: log_m(s) - math.log(1 / alpha), 0.0, 10 * (v + 10)))


# Values computed by hand from Howard et al. (2021)'s two-sided normal mixture,
# u(v) = sqrt((v + rho) log((v + rho) / (rho alpha^2))) with
# rho = v_opt / (2 log(1/alpha) + log(1 + 2 log(1/alpha))):
# v_opt = 100, alpha = 0.05: 2 log 20 = 5.991465, log(1 + 5.991465) = 1.944691,
#   rho = 100 / 7.936156 = 12.600561; u^2 = 112.600561 * (log(112.600561 / 12.600561) + 5.991465)
#   = 112.600561 * (2.190105 + 5.991465) = 921.2494; u = 30.3521.
# v = v_opt = 10: rho = 1.260056, u^2 = 92.1249, u = 9.5982.
# v = 50, alpha = 0.01, v_opt = 10: rho = 0.867021, u^2 = 675.6283, u = 25.9929.
# v = v_opt = 1, alpha = 0.1: rho = 0.158006, u^2 = 7.6394, u = 2.7639.
REFERENCE = [(100.0, 0.05, 100.0, 30.3521), (10.0, 0.05, 10.0, 9.5982),
             (50.0, 0.01, 10.0, 25.9929), (1.0, 0.1, 1.0, 2.7639)]


@pytest.mark.parametrize(("v", "alpha", "v_opt", "expected"), REFERENCE)
def test_boundary_matches_hand_computed_values(v: float, alpha: float, v_opt: float,
                                               expected: float) -> None:
    assert normal_mixture_boundary(v, alpha, best_rho(v_opt, alpha)) == pytest.approx(
        expected, abs=1e-4)


@pytest.mark.parametrize(("v", "alpha", "rho"), [(100.0, 0.05, 12.6), (7.0, 0.05, 2.0),
                                                 (400.0, 0.01, 50.0)])
def test_boundary_is_where_the_mixture_martingale_reaches_one_over_alpha(
        v: float, alpha: float, rho: float) -> None:
    u = normal_mixture_boundary(v, alpha, rho)
    assert log_mixture_martingale(u, v, rho) == pytest.approx(math.log(1 / alpha))
    assert u == pytest.approx(_boundary_from_martingale(v, alpha, rho), rel=1e-6)


def test_best_rho_is_the_papers_formula() -> None:
    la = math.log(20)
    assert best_rho(10.0, 0.05) == pytest.approx(10.0 / (2 * la + math.log(1 + 2 * la)))


def test_coverage_holds_at_all_times_at_once() -> None:
    """P(the true mean ever leaves the sequence in 200 steps) <= alpha (seeded, 1000 streams)."""
    rng = np.random.default_rng(42)
    alpha, steps, streams = 0.1, 200, 1000
    x = rng.standard_normal((streams, steps)) + 0.3
    t = np.arange(1, steps + 1)
    mean = np.cumsum(x, axis=1) / t
    radius = np.array([normal_mixture_boundary(k, alpha, best_rho(20.0, alpha)) / k for k in t])
    ever_out = np.mean((np.abs(mean - 0.3) > radius).any(axis=1))
    assert ever_out <= alpha
    # The class computes the same intervals (known sigma, no variance adaptation).
    cs = ConfidenceSequence(1.0, alpha, n_opt=20, adapt_variance=False)
    for k, v in enumerate(x[0], start=1):
        cs.update(float(v))
        assert cs.radius == pytest.approx(radius[k - 1])


def test_peeking_at_a_fixed_interval_fails_where_the_sequence_holds() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1000, 100))
    t = np.arange(1, 101)
    mean = np.cumsum(x, axis=1) / t
    fixed = np.mean((np.abs(mean) > 1.96 / np.sqrt(t)).any(axis=1))
    assert fixed > 0.25  # the 95% fixed interval, checked 100 times, misses far more than 5%


def test_anytime_p_value_agrees_with_the_interval_and_never_rises() -> None:
    rng = np.random.default_rng(9)
    cs = ConfidenceSequence(1.0, 0.05, n_opt=10)
    last = 1.0
    for v in rng.normal(0.7, 1.0, 60):
        cs.update(float(v))
        assert cs.p_value <= last
        last = cs.p_value
        lo, hi = cs.interval
        assert (cs.p_value <= 0.05) == (not lo <= 0.0 <= hi)


def test_variance_adaptation_only_widens() -> None:
    rng = np.random.default_rng(2)
    data = rng.normal(0, 3.0, 30)  # true sd 3 while the proxy says 1
    fixed, adaptive = (ConfidenceSequence(1.0, adapt_variance=a) for a in (False, True))
    for v in data:
        fixed.update(float(v))
        adaptive.update(float(v))
    assert adaptive.radius > fixed.radius * 2


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ConfigError):
        ConfidenceSequence(0.0)
    with pytest.raises(ConfigError):
        ConfidenceSequence(1.0).update(float("inf"))
