"""Initial designs: seeded Sobol / LHS, snapped, with the default config first."""

from __future__ import annotations

import pytest

from tunegate.search.design import initial_design, snap
from tunegate.search.space import Layer, Param, SearchSpace

SPACE = SearchSpace.of([
    Param("seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8, high=512, default=256),
    Param("util", "float", Layer.MEMORY_CONCURRENCY, low=0.5, high=0.95, default=0.9),
    Param("eager", "bool", Layer.FEATURES, default=False),
])


@pytest.mark.parametrize("method", ["sobol", "lhs"])
def test_design_is_seeded_snapped_and_starts_at_the_default(method: str) -> None:
    points = initial_design(SPACE, 8, seed=3, method=method)  # type: ignore[arg-type]
    assert points == initial_design(SPACE, 8, seed=3, method=method)  # type: ignore[arg-type]
    assert points != initial_design(SPACE, 8, seed=4, method=method)  # type: ignore[arg-type]
    assert len(points) == len(set(points)) == 8
    assert SPACE.from_unit(points[0]) == SPACE.default()
    assert all(snap(SPACE, p) == p for p in points)


def test_design_fills_each_boolean_value() -> None:
    points = initial_design(SPACE, 9, seed=0, include_default=False)
    assert {SPACE.from_unit(p)["eager"] for p in points} == {False, True}


def test_snap_moves_to_the_bin_centre() -> None:
    snapped = snap(SPACE, [0.0, 1.0, 0.9])
    assert SPACE.from_unit(snapped) == {"seqs": 8, "util": 0.95, "eager": True}
    assert snapped[2] == 0.75
