"""Exact percentiles from chunks equal NumPy's on the whole array, to the last bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunegate.metrics import quantiles
from tunegate.metrics.quantiles import chunked_stats, order_statistics

PERCENTILES = (0.1, 1.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9)


def chunked(values: np.ndarray, size: int):  # type: ignore[no-untyped-def]
    return lambda: (values[i:i + size] for i in range(0, len(values), size))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=400),
       size=st.integers(1, 64))
def test_percentiles_of_any_integers_equal_numpys(values: list[int], size: int) -> None:
    array = np.asarray(values, dtype=np.int64)
    scale = 1e-6
    stats = chunked_stats(chunked(array, size), PERCENTILES, scale=scale)
    assert stats is not None
    as_floats = array.astype(np.float64) * scale
    assert stats.count == len(values)
    assert stats.median == float(np.median(as_floats))
    for p in PERCENTILES:
        assert stats.percentiles[p] == float(np.percentile(as_floats, p)), p
    assert stats.mean == pytest.approx(float(as_floats.mean()), rel=1e-12, abs=1e-12)
    assert stats.std == pytest.approx(float(as_floats.std()), rel=1e-9, abs=1e-9)


def test_crowded_bins_are_narrowed_until_each_rank_is_found(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setattr(quantiles, "BINS", 4)  # few bins and a small gather: several passes
    monkeypatch.setattr(quantiles, "GATHER", 3)
    rng = np.random.default_rng(7)
    array = np.concatenate([rng.integers(0, 10**9, 500), np.full(300, 123_456_789),
                            rng.lognormal(15, 1, 500).astype(np.int64)])
    rng.shuffle(array)
    ranks = [0, 1, 250, 649, 650, 651, len(array) - 1]
    assert order_statistics(chunked(array, 97), ranks) == {r: int(np.sort(array)[r])
                                                           for r in ranks}


def test_no_values_give_no_statistics_and_a_rank_beyond_them_is_refused() -> None:
    assert chunked_stats(chunked(np.zeros(0, np.int64), 8), (50.0,)) is None
    with pytest.raises(ValueError, match="outside 3 values"):
        order_statistics(chunked(np.arange(3), 2), [3])
