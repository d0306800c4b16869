"""Effects as contrasts of log means: exact on noise-free cells, Welch-Satterthwaite intervals
on noisy ones, and the pooled relative noise behind the threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from tunegate.attribution.estimate import CellStats, cell_stats, estimate, pooled_sigma

CONTRAST = {"a": -1.0, "b": 1.0}


def test_noise_free_cells_give_the_exact_effect_with_p_zero() -> None:
    cells = {"a": cell_stats([200.0, 200.0, 200.0]), "b": cell_stats([150.0, 150.0, 150.0])}
    e = estimate(CONTRAST, cells)  # type: ignore[arg-type]
    assert e.effect == pytest.approx(-0.25, abs=1e-12)
    assert e.log_effect == pytest.approx(math.log(0.75), abs=1e-12)
    assert e.ci_low == e.ci_high == e.effect
    assert e.p == 0.0


def test_noise_free_equal_cells_have_no_effect_with_p_one() -> None:
    same = cell_stats([80.0, 80.0])
    assert same is not None
    e = estimate(CONTRAST, {"a": same, "b": same})
    assert (e.effect, e.ci_low, e.ci_high, e.p) == (0.0, 0.0, 0.0, 1.0)


def test_a_longer_contrast_is_the_weighted_sum_of_log_means() -> None:
    cells = {k: CellStats(3, v, 0.0) for k, v in
             {"base": 100.0, "+a": 100.0, "+b": 100.0, "ab": 110.0}.items()}
    e = estimate({"ab": 1.0, "+a": -1.0, "+b": -1.0, "base": 1.0}, cells)
    assert e.effect == pytest.approx(0.10, abs=1e-12)


def test_a_zero_weight_needs_no_cell() -> None:
    cells = {"a": CellStats(4, 100.0, 1.0), "b": CellStats(4, 105.0, 1.0)}
    assert estimate({**CONTRAST, "absent": 0.0}, cells) == estimate(CONTRAST, cells)


def test_welch_satterthwaite_with_unequal_noise_and_repeats_by_hand() -> None:
    a, b = CellStats(4, 100.0, 2.0), CellStats(8, 110.0, 11.0)
    e = estimate(CONTRAST, {"a": a, "b": b})
    var_a, var_b = 4.0 / (4 * 100.0**2), 121.0 / (8 * 110.0**2)  # s^2 / (n mean^2)
    assert (a.var_log, b.var_log) == pytest.approx((var_a, var_b))
    df = (var_a + var_b) ** 2 / (var_a**2 / 3 + var_b**2 / 7)
    assert 7 < df < 9  # not the pooled 10: the noisier cell's 7 weigh the most
    se, log_effect = math.sqrt(var_a + var_b), math.log(1.1)
    half = sps.t.ppf(0.975, df) * se
    assert e.log_effect == pytest.approx(log_effect)
    assert (e.ci_low, e.ci_high) == pytest.approx(
        (math.expm1(log_effect - half), math.expm1(log_effect + half)))
    assert e.p == pytest.approx(2 * sps.t.sf(log_effect / se, df))


def test_the_confidence_sets_the_width() -> None:
    cells = {"a": CellStats(6, 100.0, 3.0), "b": CellStats(6, 104.0, 3.0)}
    wide, narrow = estimate(CONTRAST, cells, 0.99), estimate(CONTRAST, cells, 0.90)
    assert wide.ci_low < narrow.ci_low < narrow.effect < narrow.ci_high < wide.ci_high
    assert wide.p == narrow.p


def test_the_95_percent_interval_covers_the_true_effect_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(2024)
    truth, covered, trials = 0.08, 0, 600
    for _ in range(trials):
        a = cell_stats(list(100.0 * (1 + 0.02 * rng.standard_normal(6))))
        b = cell_stats(list(108.0 * (1 + 0.05 * rng.standard_normal(6))))
        assert a is not None and b is not None
        e = estimate(CONTRAST, {"a": a, "b": b})
        covered += e.ci_low <= truth <= e.ci_high
    # binomial sd at 95% over 600 trials: 0.9 points; 3 sd either side
    assert 0.92 <= covered / trials <= 0.98


def test_cell_stats_are_the_mean_and_sample_sd() -> None:
    stats = cell_stats([98.0, 100.0, 102.0])
    assert stats == CellStats(3, 100.0, 2.0)


@pytest.mark.parametrize("values", [[], [100.0], [0.0, 0.0], [-1.0, 1.0, -3.0]])
def test_cell_stats_refuse_what_a_ratio_cannot_use(values: list[float]) -> None:
    assert cell_stats(values) is None


def test_pooled_sigma_weights_each_cells_relative_noise_by_its_degrees_of_freedom() -> None:
    cells = [CellStats(3, 100.0, 2.0), CellStats(5, 50.0, 2.0)]  # 2% and 4%
    assert pooled_sigma(cells) == pytest.approx(math.sqrt((2 * 0.02**2 + 4 * 0.04**2) / 6))
    assert pooled_sigma([CellStats(6, 100.0, 2.0)] * 3) == pytest.approx(0.02)


def test_pooled_sigma_of_nothing_is_zero() -> None:
    assert pooled_sigma([]) == 0.0
