"""Where a capacity search probes next and when it stops, as a specification: ``decide`` is a
pure function of the probes so far, so each test hands it hand-built :class:`Probe` objects (a
pass has margin -0.2, a fail +0.2, unless the test says otherwise) and reads the decision.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import norm

from tunegate.capacity import CapacityPlan, Probe
from tunegate.capacity.search import (
    DEFAULT_START,
    GROW,
    SHRINK,
    boundary_of,
    decide,
    start_load,
)
from tunegate.metrics.slo_spec import parse_slo_specs

SLOS = parse_slo_specs(["ttft_p99:500"])
MARGIN = {"pass": -0.2, "fail": 0.2, "invalid": math.nan}


def probe(index: int, load: float, verdict: str, margin: float | None = None,
          benchmark_s: float = 10.0) -> Probe:
    value = MARGIN[verdict] if margin is None else margin
    return Probe(index=index, load=load, seed=index, verdict=verdict,  # type: ignore[arg-type]
                 stop="complete", margins={"ttft_p99": value}, margin_se={"ttft_p99": 0.05},
                 binding="ttft_p99", requests=1000, benchmark_s=benchmark_s)


def probes(*pairs: tuple[float, str]) -> list[Probe]:
    return [probe(i, load, verdict) for i, (load, verdict) in enumerate(pairs)]


def plan(by: str = "rate", **kwargs: object) -> CapacityPlan:
    return CapacityPlan(by=by, slos=SLOS, **kwargs)  # type: ignore[arg-type]


def run_search(p: CapacityPlan, verdict_at, *, anchor: float | None = None,
               budget_per_probe: float = 10.0) -> tuple[str, list[Probe]]:
    """Decide, probe, repeat: ``verdict_at(load, index)`` gives each probe's (verdict, margin)."""
    done: list[Probe] = []
    while True:
        decision = decide(p, done, spent_s=budget_per_probe * len(done), anchor_load=anchor)
        if decision.load is None:
            return decision.reason, done
        verdict, margin = verdict_at(decision.load, len(done))
        done.append(probe(len(done), decision.load, verdict, margin, budget_per_probe))


# --- the first probe --------------------------------------------------------------------------


def test_the_first_probe_is_the_start_given() -> None:
    assert decide(plan(start=12.5), [], spent_s=0).load == 12.5
    assert decide(plan("concurrency", start=3), [], spent_s=0).load == 3


def test_without_a_start_or_an_anchor_a_search_starts_at_its_default_within_the_range(
) -> None:
    assert decide(plan("concurrency"), [], spent_s=0).load == DEFAULT_START["concurrency"] == 8
    assert decide(plan(), [], spent_s=0).load == DEFAULT_START["rate"] == 1.0
    assert decide(plan("concurrency", max_load=4), [], spent_s=0).load == 4
    assert decide(plan("concurrency", min_load=20, max_load=64), [], spent_s=0).load == 20
    assert start_load(plan(), 0.0) == 1.0


def test_a_search_starts_at_the_anchors_load_on_the_knobs_grid_within_the_range() -> None:
    assert decide(plan(), [], spent_s=0, anchor_load=61.37).load == 61.37
    assert start_load(plan(), 61.37) == 61.37
    assert start_load(plan(), 12.34567) == 12.35
    assert start_load(plan(), 5000.0) == 1000.0
    assert start_load(plan(min_load=2.0), 1.0) == 2.0
    assert start_load(plan("concurrency"), 12.6) == 13
    assert start_load(plan("concurrency"), 0.3) == 1
    assert start_load(plan(start=3.5), 61.0) == 3.5


# --- bracketing -------------------------------------------------------------------------------


@pytest.mark.parametrize(("by", "start", "top"), [("concurrency", 8, 1024), ("rate", 30, 1000)])
def test_expands_by_grow_while_everything_passes_then_stops_at_least_at_max_load(
        by: str, start: float, top: float) -> None:
    reason, done = run_search(plan(by, start=start, max_probes=40),
                              lambda load, i: ("pass", -0.5))
    loads = [p.load for p in done]
    assert reason == "at_least"
    assert loads[0] == start
    assert loads[-1] == top
    for before, after in itertools.pairwise(loads):
        assert after == min(before * GROW, top)


@pytest.mark.parametrize(("by", "start", "bottom"), [("concurrency", 8, 1), ("rate", 30, 0.05)])
def test_shrinks_while_everything_fails_then_stops_zero_at_min_load(
        by: str, start: float, bottom: float) -> None:
    reason, done = run_search(plan(by, start=start, max_probes=40),
                              lambda load, i: ("fail", 0.5))
    loads = [p.load for p in done]
    assert reason == "zero"
    assert loads[-1] == bottom
    for before, after in itertools.pairwise(loads):
        assert after == pytest.approx(max(before / SHRINK, bottom), rel=1e-3)


def test_at_least_only_once_the_top_of_the_range_passed() -> None:
    p = plan(max_load=100.0)
    assert decide(p, probes((60.0, "pass")), spent_s=0).load == 100.0
    assert decide(p, probes((60.0, "pass"), (100.0, "pass")), spent_s=0).reason == "at_least"


def test_zero_only_once_the_bottom_of_the_range_failed() -> None:
    p = plan("concurrency", min_load=2)
    assert decide(p, probes((3, "fail")), spent_s=0).load == 2
    assert decide(p, probes((3, "fail"), (2, "fail")), spent_s=0).reason == "zero"


# --- the grid of loads ------------------------------------------------------------------------


def _noisy_world(capacity: float, spread: float, seed: int):
    rng = np.random.default_rng(seed)

    def verdict_at(load: float, index: int) -> tuple[str, float]:
        margin = math.log(load / capacity) + rng.normal(0.0, spread)
        return ("pass" if margin <= 0 else "fail"), margin

    return verdict_at


@pytest.mark.parametrize(("capacity", "seed"), [(1.4, 0), (2.6, 1), (37.3, 2), (150.0, 3)])
def test_concurrency_loads_are_whole_numbers_of_at_least_one_stream(capacity: float,
                                                                     seed: int) -> None:
    p = plan("concurrency", max_probes=14)
    reason, done = run_search(p, _noisy_world(capacity, 0.03, seed))
    assert reason in ("resolved", "max_probes")
    for load in (q.load for q in done):
        assert load == int(load) and 1 <= load <= p.max_load, load


def test_a_concurrency_probed_twice_is_not_probed_a_third_time() -> None:
    # The bracket 10..14 puts the next probe at 12; the two probes there were invalid.
    done = probes((10, "pass"), (12, "invalid"), (14, "fail"), (12, "invalid"))
    p = plan("concurrency")
    assert decide(p, done[:3], spent_s=0).load == 12  # a second one is fine
    assert decide(p, done, spent_s=0).load in (11, 13)


def test_a_concurrency_search_never_probes_one_load_a_third_time() -> None:
    loads = [256, 512] + [298, 299, 300, 301, 302] * 2
    done = [probe(i, load, "pass" if load <= 300 else "fail") for i, load in enumerate(loads)]
    decision = decide(plan("concurrency", max_probes=40, resolution=0.005), done, spent_s=0)
    counts = Counter(loads)
    assert decision.load is None or counts[decision.load] < 2, decision


@pytest.mark.parametrize(("capacity", "seed"), [(0.13, 0), (2.6, 1), (37.3, 2)])
def test_rate_loads_are_never_zero_nor_rounded_to_whole_numbers(capacity: float,
                                                                seed: int) -> None:
    p = plan(start=30.0, max_probes=14)
    _, done = run_search(p, _noisy_world(capacity, 0.03, seed))
    loads = [q.load for q in done]
    assert all(p.min_load <= load <= p.max_load for load in loads), loads
    assert any(load != int(load) for load in loads[3:]), loads


def test_a_rate_search_shrinks_below_one_request_per_second_without_reaching_zero() -> None:
    p = plan(start=1.0, min_load=0.001, max_probes=40)
    reason, done = run_search(p, lambda load, i: ("fail", 0.5))
    loads = [q.load for q in done]
    assert reason == "zero"
    assert loads[-1] == 0.001
    assert all(load > 0 for load in loads)
    assert loads[1:4] == [0.5, 0.25, 0.125]


def test_a_rate_bracket_between_whole_numbers_is_probed_between_them() -> None:
    load = decide(plan(), probes((3.0, "pass"), (4.0, "fail")), spent_s=0).load
    assert load is not None and 3.0 < load < 4.0


# --- refining ---------------------------------------------------------------------------------


def test_while_separated_the_next_rate_probe_lies_strictly_inside_a_wide_bracket() -> None:
    rng = np.random.default_rng(5)
    p = plan()
    for _ in range(25):
        high_pass = float(f"{rng.uniform(1.0, 500.0):.4g}")
        low_fail = float(f"{high_pass * rng.uniform(1.05, 2.0):.4g}")
        done = [probe(0, high_pass, "pass", -rng.uniform(0.01, 1.0)),
                probe(1, low_fail, "fail", rng.uniform(0.01, 1.0)),
                probe(2, high_pass / 2, "pass", -1.0)]
        decision = decide(p, done, spent_s=0)
        assert decision.load is not None, decision
        assert high_pass < decision.load < low_fail, (high_pass, low_fail, decision)


def test_the_next_probe_goes_where_the_bracketing_margins_cross_zero() -> None:
    done = [probe(0, 100.0, "pass", -0.2), probe(1, 120.0, "fail", 0.3)]
    expected = math.exp(math.log(100.0) + 0.4 * math.log(1.2))
    assert decide(plan(), done, spent_s=0).load == pytest.approx(expected, rel=1e-3)


def test_misordered_verdicts_send_the_next_probe_into_the_fitted_interval() -> None:
    done = probes((50.0, "pass"), (100.0, "fail"), (70.0, "pass"), (85.0, "fail"),
                  (78.0, "pass"), (80.0, "fail"), (82.0, "pass"), (76.0, "fail"))
    boundary = boundary_of(done, 0.95)
    assert boundary.misordered > 0
    load = decide(plan(), done, spent_s=0).load
    assert load is not None
    assert math.exp(boundary.low) * 0.999 <= load <= math.exp(boundary.high) * 1.001


def test_invalid_probes_are_left_out_of_the_boundary() -> None:
    done = probes((10.0, "pass"), (40.0, "invalid"), (20.0, "fail"), (15.0, "invalid"))
    assert boundary_of(done, 0.95) == boundary_of(probes((10.0, "pass"), (20.0, "fail")), 0.95)


# --- stopping ---------------------------------------------------------------------------------


def _dense(around: float, spread: float, each: int) -> list[Probe]:
    """Many probes near ``around``: passes below, fails above, a few misordered."""
    loads = [around * (1 + spread * k) for k in (-3, -2, -1, 1, 2, 3)] * each
    verdicts = ["pass" if load < around else "fail" for load in loads]
    verdicts[2], verdicts[3] = "fail", "pass"  # noise at the boundary
    return [probe(i, load, v) for i, (load, v) in enumerate(zip(loads, verdicts, strict=True))]


def test_resolved_once_the_interval_is_within_plus_minus_resolution() -> None:
    done = _dense(100.0, 0.02, 4)
    width = boundary_of(done, 0.95).relative_width
    assert 0.02 < width < 0.9
    assert decide(plan(resolution=width / 2 * 1.01, max_probes=99), done,
                  spent_s=0).reason == "resolved"
    still = decide(plan(resolution=width / 2 * 0.99, max_probes=99), done, spent_s=0)
    assert still.load is not None


def test_a_concurrency_search_is_resolved_at_one_stream() -> None:
    done = probes((1, "pass"), (2, "pass"), (4, "fail"), (3, "fail"), (2, "pass"), (3, "fail"),
                  (2, "pass"), (3, "fail"))
    boundary = boundary_of(done, 0.95)
    assert boundary.relative_width > 2 * 0.005  # not resolved by width
    assert decide(plan("concurrency", resolution=0.005), done, spent_s=0).reason == "resolved"


def test_stops_below_once_the_whole_interval_lies_under_what_must_be_beaten() -> None:
    """A tuning candidate's search (``stop_below`` = what it must beat) ends as soon as its
    interval's upper end is under that load, unresolved; a search without it goes on."""
    done = probes((10.0, "pass"), (20.0, "fail"))
    high = math.exp(boundary_of(done, 0.95).high)
    assert decide(plan(stop_below=high * 1.01), done, spent_s=0).reason == "below"
    assert decide(plan(stop_below=high * 0.99), done, spent_s=0).load is not None
    assert decide(plan(), done, spent_s=0).load is not None
    # before a pass and a fail exist there is no interval to judge
    assert decide(plan(stop_below=1000.0), probes((10.0, "fail")), spent_s=0).load is not None


def test_stops_with_max_probes_counting_invalid_ones() -> None:
    done = probes((10.0, "pass"), (20.0, "invalid"), (40.0, "fail"))
    assert decide(plan(max_probes=3), done, spent_s=0).reason == "max_probes"
    assert decide(plan(max_probes=4), done, spent_s=0).load is not None


def test_stops_with_budget_spent() -> None:
    done = probes((10.0, "pass"), (40.0, "fail"))
    assert decide(plan(budget_s=60.0), done, spent_s=60.0).reason == "budget_spent"
    assert decide(plan(budget_s=60.0), done, spent_s=59.0).load is not None
    reason, ran = run_search(plan(budget_s=45.0, start=10.0), lambda load, i: ("pass", -0.3),
                             budget_per_probe=10.0)
    assert reason == "budget_spent" and len(ran) == 5


def test_two_invalid_probes_in_a_row_with_nothing_valid_stop_the_search() -> None:
    p = plan("concurrency")
    assert decide(p, probes((8, "invalid")), spent_s=0).load == 8  # tried again
    assert decide(p, probes((8, "invalid"), (8, "invalid")),
                  spent_s=0).reason == "invalid_probes"


def test_two_invalid_probes_in_a_row_stop_the_search_after_valid_ones_too() -> None:
    done = probes((8, "pass"), (16, "invalid"), (16, "invalid"))
    assert decide(plan("concurrency"), done, spent_s=0).reason == "invalid_probes"


def test_an_invalid_probe_between_valid_ones_does_not_stop_the_search() -> None:
    done = probes((8, "pass"), (16, "invalid"), (16, "pass"), (32, "invalid"))
    decision = decide(plan("concurrency"), done, spent_s=0)
    assert decision.load is not None


def test_a_noise_free_search_brackets_the_capacity() -> None:
    """A world where every load up to ``C`` passes and every load above fails (margins +-0.5):
    the search resolves; its interval reaches into the gap between the highest pass and the
    lowest fail (where a noise-free world's 50% point lies), and for concurrency it holds ``C``
    in whole streams."""
    for by, capacity in (("rate", 37.3), ("rate", 4.21), ("concurrency", 37), ("concurrency", 3)):
        reason, done = run_search(plan(by), lambda load, i, c=capacity: (
            ("pass", -0.5) if load <= c else ("fail", 0.5)), anchor=60.0)
        boundary = boundary_of(done, 0.95)
        label = (by, capacity, [q.load for q in done], boundary)
        assert reason == "resolved", label
        highest_pass = max(q.load for q in done if q.verdict == "pass")
        lowest_fail = min(q.load for q in done if q.verdict == "fail")
        assert highest_pass <= capacity < lowest_fail, label
        assert math.exp(boundary.low) <= lowest_fail, label
        assert math.exp(boundary.high) >= highest_pass, label
        assert boundary.relative_width <= 2 * 0.05 or by == "concurrency", label
        if by == "concurrency":
            low, high = math.exp(boundary.low), math.exp(boundary.high)
            assert math.floor(low + 1e-9) <= capacity <= math.floor(high + 1e-9), label


def test_verdicts_drawn_from_the_probit_model_resolve_around_the_truth() -> None:
    rng = np.random.default_rng(11)
    truth = 80.0

    def verdict_at(load: float, index: int) -> tuple[str, float]:
        passed = rng.random() < norm.cdf(math.log(truth / load) / 0.03)
        return ("pass", -0.1) if passed else ("fail", 0.1)

    reason, done = run_search(plan(max_probes=25), verdict_at, anchor=100.0)
    boundary = boundary_of(done, 0.95)
    assert reason in ("resolved", "max_probes")
    assert math.exp(boundary.low) <= truth <= math.exp(boundary.high)
