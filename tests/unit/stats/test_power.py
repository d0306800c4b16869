"""Power analysis matches the closed form, and the t and gate versions behave as specified."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tunegate.errors import ConfigError
from tunegate.stats.power import (
    gate_power,
    gate_sample_size,
    minimum_detectable_effect,
    plan_repeats,
    power_t,
    power_z,
    sample_size_t,
    sample_size_z,
)


def test_article_example_needs_seven_repeats_per_arm() -> None:
    # (z_0.975 + z_0.8)^2 * 2 sigma^2 / d^2 = (1.959964 + 0.841621)^2 * 2 * 0.0004 / 0.0009
    exact = (1.959964 + 0.841621) ** 2 * 2 * 0.02**2 / 0.03**2
    assert exact == pytest.approx(6.977, abs=1e-3)
    assert sample_size_z(0.02, 0.03) == 7


@pytest.mark.parametrize(("sigma", "effect", "alpha", "power", "two_sided"), [
    (0.02, 0.03, 0.05, 0.8, True), (0.02, 0.05, 0.05, 0.8, True), (0.05, 0.03, 0.01, 0.9, True),
    (0.01, 0.02, 0.05, 0.8, False), (0.03, -0.04, 0.1, 0.95, True)])
def test_z_sample_size_is_the_rounded_up_closed_form(sigma: float, effect: float, alpha: float,
                                                     power: float, two_sided: bool) -> None:
    za = sps.norm.ppf(1 - alpha / 2) if two_sided else sps.norm.ppf(1 - alpha)
    closed = (za + sps.norm.ppf(power)) ** 2 * 2 * sigma**2 / effect**2
    assert sample_size_z(sigma, effect, alpha, power, two_sided) == max(2, math.ceil(closed))


def test_z_power_at_the_closed_form_n_reaches_the_target() -> None:
    n = sample_size_z(0.02, 0.03)
    assert power_z(n, 0.02, 0.03) >= 0.8 > power_z(n - 1, 0.02, 0.03)


def test_t_version_needs_more_repeats_and_is_the_smallest_that_suffices() -> None:
    n = sample_size_t(0.02, 0.03)
    assert n == 9 > sample_size_z(0.02, 0.03)
    assert power_t(n, 0.02, 0.03) >= 0.8 > power_t(n - 1, 0.02, 0.03)


def test_t_power_matches_a_seeded_simulation_of_the_t_test() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(1.0, 0.02, (20000, 7))
    b = rng.normal(1.03, 0.02, (20000, 7))
    simulated = np.mean(sps.ttest_ind(b, a, axis=1).pvalue <= 0.05)
    assert simulated == pytest.approx(power_t(7, 0.02, 0.03), abs=0.01)


def test_minimum_detectable_effect_inverts_the_sample_size() -> None:
    assert minimum_detectable_effect(7, 0.02) == pytest.approx(
        (1.959964 + 0.841621) * 0.02 * math.sqrt(2 / 7), rel=1e-5)
    d = minimum_detectable_effect(9, 0.02, method="t")
    assert power_t(9, 0.02, d) == pytest.approx(0.8, abs=1e-6)


def test_short_budget_is_reported_with_the_minimum_detectable_effect() -> None:
    plan = plan_repeats(0.02, 0.03, budget=3)
    assert (plan.n, plan.feasible) == (7, False)
    assert plan.mde_at_budget == pytest.approx(0.0457, abs=1e-4)
    assert plan.power_at_budget is not None and plan.power_at_budget < 0.5
    assert "minimum detectable effect" in plan.message
    assert plan_repeats(0.02, 0.03, budget=10).feasible


def test_gate_power_accounts_for_the_threshold() -> None:
    # An effect below the floor can never be accepted often: the bar is >= 3%.
    assert gate_power(200, 0.005, 0.025) < 0.05
    # The gate needs more repeats than significance alone (it must also clear t = 4%), and the
    # plan keeps a margin: the exact model already reaches 80% at 8, the conservative one at 10.
    assert gate_sample_size(0.02, 0.05, noise_repeats=10) == 10 > sample_size_z(0.02, 0.05)
    assert gate_sample_size(0.02, 0.05, noise_repeats=10, conservative=False) == 8
    assert gate_power(10, 0.02, 0.05, noise_repeats=10, pooled=False) >= 0.8
    assert gate_power(10, 0.02, 0.05, noise_repeats=10) > 0.82


def test_gate_power_model_matches_a_seeded_simulation_of_the_gate() -> None:
    from tunegate.stats.decision import MetricSpec
    from tunegate.stats.gate import evaluate
    from tunegate.stats.noise import estimate_noise

    rng = np.random.default_rng(12)
    spec, accepted, reps = [MetricSpec("x")], 0, 600
    for _ in range(reps):
        noise = {"x": estimate_noise(1000 * (1 + 0.02 * rng.standard_normal(10)))}
        rec = evaluate({"x": 1000 * (1 + 0.02 * rng.standard_normal(6))},
                       {"x": 1050 * (1 + 0.02 * rng.standard_normal(6))}, spec, noise=noise)
        accepted += rec.decision.value == "ACCEPT"
    # model 0.776; 600 reps give a standard error of 0.017
    assert accepted / reps == pytest.approx(gate_power(6, 0.02, 0.05, noise_repeats=10), abs=0.05)
    with pytest.raises(ConfigError, match="threshold"):
        gate_sample_size(0.02, 0.03)


@pytest.mark.parametrize("kwargs", [{"sigma": 0, "effect": 0.03}, {"sigma": 0.02, "effect": 0},
                                    {"sigma": 0.02, "effect": 0.03, "alpha": 1.5},
                                    {"sigma": 0.02, "effect": 0.03, "power": 0}])
def test_bad_inputs_are_config_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        sample_size_z(**kwargs)
