"""sigma_baseline is relative, carries its uncertainty, pools refreshes; t = max(2 sigma, 3%)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from tunegate.errors import ConfigError
from tunegate.stats.noise import estimate_noise
from tunegate.stats.threshold import ThresholdPolicy


def test_sigma_is_relative_to_the_mean() -> None:
    est = estimate_noise([98.0, 100.0, 102.0])
    assert est.sd == pytest.approx(2.0)
    assert est.sigma == pytest.approx(0.02)
    assert estimate_noise([980.0, 1000.0, 1020.0]).sigma == pytest.approx(0.02)


def test_interval_is_the_chi_square_interval() -> None:
    est = estimate_noise([98.0, 100.0, 102.0, 99.0, 101.0])
    lo, hi = est.sigma_interval(0.95)
    s = est.sigma
    assert lo == pytest.approx(s * np.sqrt(4 / sps.chi2.ppf(0.975, 4)))
    assert hi == pytest.approx(s * np.sqrt(4 / sps.chi2.ppf(0.025, 4)))
    assert est.sigma_upper(0.975) == pytest.approx(hi)


def test_interval_covers_the_true_sigma_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(3)
    hits = sum(lo <= 0.02 <= hi for lo, hi in (
        estimate_noise(1000 * (1 + 0.02 * rng.standard_normal(10))).sigma_interval()
        for _ in range(2000)))
    assert 0.93 <= hits / 2000 <= 0.97


def test_refresh_pools_exactly_like_estimating_from_all_repeats() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(100, 2, 7), rng.normal(100, 2, 5)
    pooled = estimate_noise(a).updated(b)
    direct = estimate_noise(np.concatenate([a, b]))
    assert pooled.n == 12
    assert pooled.mean == pytest.approx(direct.mean)
    assert pooled.sigma == pytest.approx(direct.sigma)


@pytest.mark.parametrize("values", [[1.0], [1.0, float("nan")], [-1.0, 1.0]])
def test_unusable_repeats_are_config_errors(values: list[float]) -> None:
    with pytest.raises(ConfigError):
        estimate_noise(values)


def test_threshold_is_twice_sigma_above_the_floor_and_the_floor_below() -> None:
    policy = ThresholdPolicy()
    assert policy.threshold(0.02).value == pytest.approx(0.04)
    assert policy.threshold(0.02).binding == "noise"
    assert policy.threshold(0.01).value == 0.03
    assert policy.threshold(0.01).binding == "floor"
    assert ThresholdPolicy(multiplier=3, floor=0.01).threshold(0.005).value == 0.015


def test_threshold_rejects_nonsense() -> None:
    with pytest.raises(ConfigError):
        ThresholdPolicy(floor=-0.1)
    with pytest.raises(ConfigError):
        ThresholdPolicy().threshold(float("nan"))
