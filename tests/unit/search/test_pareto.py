"""Dominance, Pareto fronts, hypervolume and the knee on hand-built points (known answers)."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.search.pareto import (
    dominance_rate,
    dominates,
    hypervolume,
    hypervolume_contributions,
    knee_index,
    pareto_mask,
)

# Maximise both. (4,1), (3,3), (1,4) trade off; (2,2) is dominated by (3,3); (1,1) by all.
Y = np.array([[4.0, 1.0], [3.0, 3.0], [1.0, 4.0], [2.0, 2.0], [1.0, 1.0]])


def test_dominance_needs_no_worse_everywhere_and_better_somewhere() -> None:
    assert dominates([3, 3], [2, 2])
    assert dominates([3, 3], [3, 2])
    assert not dominates([3, 3], [3, 3])  # equal: neither dominates
    assert not dominates([4, 1], [3, 3])


def test_pareto_mask_keeps_exactly_the_trade_offs() -> None:
    assert pareto_mask(Y).tolist() == [True, True, True, False, False]
    assert pareto_mask([[1.0, 1.0], [1.0, 1.0]]).tolist() == [True, True]  # duplicates kept


def test_dominance_rate_is_the_share_of_others_dominated() -> None:
    # (4,1) dominates (1,1); (3,3) dominates (2,2), (1,1); (1,4) dominates (1,1);
    # (2,2) dominates (1,1); (1,1) nothing. Four others each.
    assert dominance_rate(Y).tolist() == [0.25, 0.5, 0.25, 0.25, 0.0]
    assert dominance_rate([[1.0, 2.0]]).tolist() == [0.0]


def test_two_dimensional_hypervolume_by_hand() -> None:
    # Boxes from the origin: 4x1 + 3x3 + 1x4, union = 4*1 + 3*(3-1) + 1*(4-3) = 11.
    assert hypervolume(Y, [0.0, 0.0]) == pytest.approx(11.0)
    # Reference (1, 1): 3x0 + 2x2 + 0x3 -> only (3,3) strictly above: 2*2 = 4.
    assert hypervolume(Y, [1.0, 1.0]) == pytest.approx(4.0)
    assert hypervolume(np.zeros((0, 2)), [0.0, 0.0]) == 0.0


def test_three_dimensional_hypervolume_by_inclusion_exclusion() -> None:
    # Two boxes [0,2]x[0,1]x[0,1] and [0,1]x[0,2]x[0,1] overlap in a unit cube: 2 + 2 - 1.
    P = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0]])
    assert hypervolume(P, [0.0, 0.0, 0.0]) == pytest.approx(3.0)
    # Add a box [0,1]^2 x [0,3]: its part above z=1 adds 2; total 5.
    P3 = np.vstack([P, [1.0, 1.0, 3.0]])
    assert hypervolume(P3, [0.0, 0.0, 0.0]) == pytest.approx(5.0)


def test_contributions_are_exclusive_volumes() -> None:
    front = Y[:3]
    # Removing (4,1) loses 1x1; (3,3) loses 2x2; (1,4) loses 1x1.
    assert hypervolume_contributions(front, [0.0, 0.0]).tolist() == pytest.approx([1, 4, 1])


def test_knee_is_the_bend_of_the_front() -> None:
    assert knee_index(Y[:3]) == 1
    # A front bending at (9, 8): the knee is there, not at an extreme.
    front = np.array([[10.0, 1.0], [9.0, 8.0], [5.0, 9.0], [1.0, 10.0]])
    assert knee_index(front) == 1
    assert knee_index(np.array([[1.0, 2.0]])) == 0
