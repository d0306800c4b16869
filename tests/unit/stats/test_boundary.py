"""The pass/fail boundary of a capacity search as a specification: the kinds (``none``,
``at_least``, ``zero``, ``probit``), what perfectly separated probes must give, nested intervals,
misordered pairs, where the next probe goes, and the interval's coverage of the true capacity
over simulated searches whose verdicts follow the probit model itself.

Every assertion is on properties (the bracket inside the interval, coverage >= 90%), not on
numbers measured once, so tuning the model's constants does not break them; tolerances are the
fit's grid step (the crossing is located on a grid of ``GRID`` points).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from tunegate.stats.boundary import (
    GRID,
    MAX_SPREAD,
    MIN_SPREAD,
    Boundary,
    MarginPoint,
    fit_boundary,
    next_inside,
)


def at(loads_passed: list[float], loads_failed: list[float]) -> list[MarginPoint]:
    """Probes passing at ``loads_passed`` and failing at ``loads_failed`` (margins +-0.2)."""
    return ([MarginPoint(math.log(load), -0.2) for load in loads_passed]
            + [MarginPoint(math.log(load), 0.2) for load in loads_failed])


def grid_step(points: list[MarginPoint]) -> float:
    """How finely the fit locates the crossing (log load)."""
    xs = [p.x for p in points]
    return (max(xs) - min(xs) + 6 * MAX_SPREAD) / (GRID - 1)


def test_a_margin_at_zero_passes_and_an_infinite_one_fails() -> None:
    assert MarginPoint(1.0, 0.0).passed
    assert MarginPoint(1.0, -math.inf).passed
    assert not MarginPoint(1.0, 1e-12).passed
    assert not MarginPoint(1.0, math.inf).passed


def test_no_probes_give_no_boundary() -> None:
    boundary = fit_boundary([])
    assert boundary.kind == "none"
    assert math.isnan(boundary.root)
    assert (boundary.low, boundary.high) == (-math.inf, math.inf)
    assert boundary.relative_width == math.inf


def test_passes_only_give_at_least_the_highest_load() -> None:
    boundary = fit_boundary(at([4.0, 16.0, 8.0], []))
    assert boundary.kind == "at_least"
    assert boundary.root == boundary.low == pytest.approx(math.log(16.0))
    assert boundary.high == math.inf
    assert boundary.spread is None


def test_fails_only_give_zero_with_the_lowest_load_as_upper_end() -> None:
    points = at([], [4.0, 2.0, 8.0])
    points.append(MarginPoint(math.log(3.0), math.inf))  # failed for sure, no value
    boundary = fit_boundary(points)
    assert boundary.kind == "zero"
    assert boundary.root == boundary.high == pytest.approx(math.log(2.0))
    assert boundary.low == -math.inf


@pytest.mark.parametrize(("passed", "failed", "pairs"), [
    ([1, 3, 5], [2, 4], 3),           # 3 > 2, 5 > 2, 5 > 4
    ([1, 2], [3, 4], 0),
    ([10, 10], [9], 2),
    ([5], [5], 0),                    # same load: not misordered
    ([1, 2, 3], [], 0),
    ([], [1, 2], 0),
])
def test_misordered_pairs_are_counted(passed: list[float], failed: list[float],
                                      pairs: int) -> None:
    assert fit_boundary(at(passed, failed)).misordered == pairs


def test_separated_probes_give_an_interval_containing_the_bracket_and_an_estimate_inside_it(
) -> None:
    rng = np.random.default_rng(20240611)
    for _ in range(40):
        highest_pass = math.log(rng.uniform(0.5, 2000))
        lowest_fail = highest_pass + rng.uniform(0.01, 1.0)
        passes = [highest_pass, *(highest_pass - rng.uniform(0.02, 2.0,
                                                             rng.integers(0, 5)))]
        fails = [lowest_fail, *(lowest_fail + rng.uniform(0.02, 2.0, rng.integers(0, 5)))]
        points = ([MarginPoint(x, -rng.uniform(0.0, 1.0)) for x in passes]
                  + [MarginPoint(x, rng.uniform(1e-3, 1.0)) for x in fails])
        points = [points[i] for i in rng.permutation(len(points))]
        boundary = fit_boundary(points)
        label = f"passes {np.exp(passes)}, fails {np.exp(fails)}: {boundary}"
        assert boundary.kind == "probit", label
        assert boundary.misordered == 0, label
        assert boundary.low <= highest_pass and boundary.high >= lowest_fail, label
        assert highest_pass <= boundary.root <= lowest_fail, label
        assert boundary.spread is not None and MIN_SPREAD <= boundary.spread <= MAX_SPREAD


@pytest.mark.parametrize(("passed", "failed"), [
    ([10.0, 20.0], [30.0, 45.0]),
    ([50.0, 95.0], [105.0, 199.5]),
    ([1.0], [1.2]),
])
def test_a_symmetric_design_puts_the_estimate_in_the_brackets_geometric_middle(
        passed: list[float], failed: list[float]) -> None:
    points = at(passed, failed)
    boundary = fit_boundary(points)
    middle = (math.log(max(passed)) + math.log(min(failed))) / 2
    assert boundary.root == pytest.approx(middle, abs=grid_step(points))


def test_the_estimate_lies_in_its_interval_also_when_verdicts_are_misordered() -> None:
    points = at([80, 90, 104, 100, 96], [101, 98, 110, 120, 103])
    boundary = fit_boundary(points)
    assert boundary.kind == "probit"
    assert boundary.misordered > 0
    assert boundary.low <= boundary.root <= boundary.high
    assert math.isfinite(boundary.low) and math.isfinite(boundary.high)
    assert math.log(80) < boundary.root < math.log(120)


def test_a_lower_confidence_gives_a_nested_interval() -> None:
    points = at([60, 80, 95, 100, 102], [104, 99, 110, 130])
    wide = fit_boundary(points, confidence=0.99)
    usual = fit_boundary(points, confidence=0.95)
    narrow = fit_boundary(points, confidence=0.6)
    assert wide.low <= usual.low <= narrow.low <= narrow.root
    assert narrow.root <= narrow.high <= usual.high <= wide.high
    assert wide.root == usual.root == narrow.root
    assert narrow.relative_width < wide.relative_width


def test_more_probes_near_the_boundary_narrow_the_interval() -> None:
    few = at([50, 90], [110, 200])
    many = few + at([95, 97, 98, 99, 100], [101, 102, 103, 104, 106])
    assert fit_boundary(many).relative_width < fit_boundary(few).relative_width


def test_relative_width_is_the_interval_in_load_over_the_estimate() -> None:
    boundary = Boundary("probit", math.log(100.0), math.log(95.0), math.log(110.0))
    assert boundary.relative_width == pytest.approx(0.15)
    assert Boundary("probit", 0.0, -math.inf, 1.0).relative_width == math.inf
    assert Boundary("at_least", 0.0, 0.0, math.inf).relative_width == math.inf


def test_next_inside_lands_where_the_bracketing_margins_cross_zero() -> None:
    low, high = math.log(100.0), math.log(120.0)
    points = [MarginPoint(low, -0.2), MarginPoint(high, 0.3), MarginPoint(math.log(50), -1.0),
              MarginPoint(math.log(200), 0.9)]
    assert next_inside(points) == pytest.approx(low + 0.4 * (high - low))


@pytest.mark.parametrize(("m_low", "m_high"), [(-0.01, 5.0), (-5.0, 0.01), (-0.3, math.inf),
                                               (0.0, 0.4)])
def test_next_inside_stays_in_the_brackets_middle_half(m_low: float, m_high: float) -> None:
    low, high = math.log(100.0), math.log(120.0)
    x = next_inside([MarginPoint(low, m_low), MarginPoint(high, m_high)])
    assert low + 0.25 * (high - low) - 1e-12 <= x <= low + 0.75 * (high - low) + 1e-12


def test_next_inside_uses_the_highest_pass_below_the_lowest_fail() -> None:
    # A noisy pass above the lowest fail does not make the bracket.
    points = at([100, 130], [120, 140])
    x = next_inside(points)
    assert math.log(100) < x < math.log(120)


def _simulated_search(rng: np.random.Generator, x0: float, spread: float,
                      steps: int) -> list[MarginPoint]:
    """A bisection in log load driven by verdicts drawn from the probit model: a probe at ``x``
    passes with probability Phi((x0 - x) / spread); the first bracket is 10-50% wide on
    either side of the truth."""

    def probe(x: float) -> MarginPoint:
        passed = rng.random() < norm.cdf((x0 - x) / spread)
        size = abs(rng.normal(0.1, 0.05))
        return MarginPoint(x, -size if passed else size)

    low, high = x0 - rng.uniform(0.1, 0.5), x0 + rng.uniform(0.1, 0.5)
    points = [probe(low), probe(high)]
    for _ in range(steps):
        point = probe((low + high) / 2)
        points.append(point)
        if point.passed:
            low = point.x
        else:
            high = point.x
    return points


@pytest.mark.slow
def test_the_interval_covers_the_capacity_in_at_least_90_percent_of_simulated_searches() -> None:
    rng = np.random.default_rng(7)
    searches, covered, probit = 120, 0, 0
    for _ in range(searches):
        x0 = math.log(rng.uniform(1.0, 1000.0))
        boundary = fit_boundary(_simulated_search(rng, x0, spread=0.03, steps=6))
        probit += boundary.kind == "probit"
        covered += boundary.low <= x0 <= boundary.high
    assert probit >= 0.95 * searches
    assert covered >= 0.90 * searches, f"covered {covered} of {searches}"
