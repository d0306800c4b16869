"""Welch, Mann-Whitney and bootstrap comparisons; Benjamini-Hochberg on the 1995 example."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from tunegate.errors import ConfigError
from tunegate.stats.compare import bootstrap_quantile, mann_whitney, welch
from tunegate.stats.fdr import benjamini_hochberg

BH_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240,
           0.4262, 0.5719, 0.6528, 0.7590, 1.0]


def test_welch_by_hand() -> None:
    base, cand = [100.0, 102.0, 98.0], [110.0, 112.0, 108.0, 110.0]
    w = welch(base, cand)
    # diff = 10; se^2 = 4/3 + (8/3)/4 = 2; df = 2^2 / ((4/3)^2/2 + (2/3)^2/3) = 108/28
    assert w.effect == pytest.approx(0.10)
    assert w.df == pytest.approx(108 / 28)
    half = sps.t.ppf(0.975, 108 / 28) * np.sqrt(2.0)
    assert w.interval == pytest.approx(((10 - half) / 100, (10 + half) / 100))
    assert w.p_value == pytest.approx(2 * sps.t.sf(10 / np.sqrt(2.0), 108 / 28))


def test_welch_on_constant_arms_is_exact() -> None:
    assert welch([5.0, 5.0], [5.0, 5.0]).p_value == 1.0
    assert welch([5.0, 5.0], [6.0, 6.0]).p_value == 0.0


def test_mann_whitney_hodges_lehmann_shift() -> None:
    mw = mann_whitney([1.0, 2.0, 3.0], [11.0, 12.0, 13.0])
    assert mw.effect == pytest.approx(5.0)  # median pairwise difference 10 / baseline median 2
    assert mw.p_value == pytest.approx(0.1)  # the smallest two-sided exact p for 3 vs 3


def test_bootstrap_interval_for_p99_covers_the_true_change_and_replays() -> None:
    rng = np.random.default_rng(4)
    base, cand = rng.lognormal(0, 0.5, 4000), 1.2 * rng.lognormal(0, 0.5, 4000)
    first = bootstrap_quantile(base, cand, 0.99, seed=1)
    assert first.interval is not None
    assert first.interval[0] <= 0.2 <= first.interval[1]
    assert first.p_value < 0.05
    assert bootstrap_quantile(base, cand, 0.99, seed=1) == first


def test_comparisons_refuse_too_few_values() -> None:
    with pytest.raises(ConfigError, match="at least 2"):
        welch([1.0], [1.0, 2.0])


def test_bh_rejects_the_first_four_of_the_1995_example() -> None:
    result = benjamini_hochberg(BH_1995, q=0.05)
    assert result.rejected == (True,) * 4 + (False,) * 11
    # p_(4) = 0.0095 <= 4 * 0.05 / 15 = 0.01333, p_(5) = 0.0201 > 0.01667: step-up stops at 4.
    assert result.adjusted[3] == pytest.approx(0.0095 * 15 / 4)


def test_bh_keeps_input_order_and_is_monotone_in_sorted_order() -> None:
    shuffled = [BH_1995[i] for i in (14, 0, 7, 3, 1)]
    result = benjamini_hochberg(shuffled, 0.05)
    order = np.argsort(shuffled)
    assert np.all(np.diff(np.asarray(result.adjusted)[order]) >= 0)
    assert result.rejected[1] and not result.rejected[0]


def test_bh_rejects_invalid_p_values() -> None:
    with pytest.raises(ConfigError):
        benjamini_hochberg([0.5, 1.5])
