"""Arrival schedules: closed loop, Poisson, gamma burstiness, constant rate, send-all-at-once."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tunegate.workload.arrivals import ArrivalKind, arrival_offsets, closed_loop, open_loop

N = 50_000


def intervals(kind: ArrivalKind, rate: float, burstiness: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(0)
    offsets = arrival_offsets(N, rate, kind=kind, burstiness=burstiness, rng=rng)
    return np.diff(np.array(offsets))


def test_closed_loop_has_no_offsets_and_a_concurrency() -> None:
    schedule = closed_loop(16)
    assert schedule.offsets_s is None
    assert schedule.max_concurrency == 16
    assert schedule.kind == "closed"
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        closed_loop(0)


@pytest.mark.parametrize("kind", ["poisson", "gamma", "constant"])
def test_offsets_start_at_zero_and_never_decrease(kind: ArrivalKind) -> None:
    offsets = arrival_offsets(100, 5.0, kind=kind, rng=np.random.default_rng(1))
    assert len(offsets) == 100
    assert offsets[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(offsets))


def test_poisson_mean_interval_is_one_over_rate_with_cv_one() -> None:
    gaps = intervals("poisson", rate=4.0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_gamma_keeps_the_rate_and_burstiness_sets_cv_to_one_over_sqrt_shape(shape: float) -> None:
    gaps = intervals("gamma", rate=10.0, burstiness=shape)
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(shape), rel=0.05)


def test_constant_rate_is_evenly_spaced() -> None:
    offsets = arrival_offsets(5, 2.0, kind="constant", rng=np.random.default_rng(0))
    assert offsets == (0.0, 0.5, 1.0, 1.5, 2.0)


@pytest.mark.parametrize("kind", ["poisson", "gamma", "constant"])
def test_infinite_rate_sends_everything_at_once(kind: ArrivalKind) -> None:
    offsets = arrival_offsets(10, math.inf, kind=kind, rng=np.random.default_rng(0))
    assert offsets == (0.0,) * 10


def test_same_seed_same_offsets_different_seed_different() -> None:
    a = arrival_offsets(200, 3.0, kind="gamma", burstiness=0.5, rng=np.random.default_rng(11))
    b = arrival_offsets(200, 3.0, kind="gamma", burstiness=0.5, rng=np.random.default_rng(11))
    c = arrival_offsets(200, 3.0, kind="gamma", burstiness=0.5, rng=np.random.default_rng(12))
    assert a == b != c


def test_open_loop_records_kind_rate_burstiness_and_cap() -> None:
    rng = np.random.default_rng(0)
    gamma = open_loop(8, 2.0, kind="gamma", burstiness=0.5, rng=rng, max_concurrency=4)
    assert (gamma.kind, gamma.request_rate, gamma.burstiness, gamma.max_concurrency) == (
        "gamma",
        2.0,
        0.5,
        4,
    )
    assert gamma.offsets_s is not None and len(gamma.offsets_s) == 8
    assert open_loop(3, 1.0, rng=rng).burstiness == 1.0  # Poisson is gamma with shape 1
    assert open_loop(3, 1.0, kind="constant", rng=rng).max_concurrency is None


@pytest.mark.parametrize(
    ("rate", "burstiness", "message"),
    [(0.0, 1.0, "rate must be > 0"), (math.nan, 1.0, "rate"), (1.0, 0.0, "burstiness")],
)
def test_invalid_parameters_are_rejected(rate: float, burstiness: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        arrival_offsets(3, rate, kind="gamma", burstiness=burstiness, rng=np.random.default_rng(0))
