"""The delivery: Pareto set with dominance rates, knee, recommendation, hypervolume per round."""

from __future__ import annotations

import pytest

from tunegate.search.delivery import WORDING, deliver, hypervolume_per_round
from tunegate.search.objectives import Objective, OutcomeConstraint

OBJECTIVES = [Objective("throughput"), Objective("latency", "lower")]


def point(trial: int, throughput: float, latency: float, *, verified: bool = True) -> dict:
    return {"trial": trial, "params": {"seqs": trial}, "verified": verified,
            "values": {"throughput": throughput, "latency": latency}}


# In maximisation form: (4,-4), (3,-2), (1,-1) trade off; (2,-3) and (1,-5) are dominated.
POINTS = [point(0, 2.0, 3.0), point(1, 4.0, 4.0), point(2, 3.0, 2.0), point(3, 1.0, 1.0),
          point(4, 1.0, 5.0), {"trial": 5, "params": {"seqs": 5}, "values": None}]


def test_front_dominance_rates_and_knee() -> None:
    doc = deliver(POINTS, OBJECTIVES)
    assert [p["trial"] for p in doc["pareto"]] == [1, 2, 3]  # by first objective
    rates = {p["trial"]: p["dominance_rate"] for p in doc["pareto"]}
    # Of the other 4 complete configs: trial 1 dominates 4; trial 2 dominates 0 and 4;
    # trial 3 dominates 4 (same throughput, lower latency).
    assert rates == {1: 0.25, 2: 0.5, 3: 0.25}
    assert doc["knee"]["trial"] == 2
    assert doc["recommendation"]["trial"] == 2  # no priority: the knee
    assert doc["evaluated"] == 6 and doc["complete"] == 5
    assert WORDING == "near-optimal within budget" and "optimal" not in doc["note"]


def test_priority_and_slos_choose_the_recommendation() -> None:
    doc = deliver(POINTS, OBJECTIVES, priority={"throughput": 1.0})
    assert doc["recommendation"]["trial"] == 1
    slo = OutcomeConstraint("latency", "<=", 3.5)
    doc = deliver(POINTS, OBJECTIVES, slos=[slo], priority={"throughput": 1.0})
    assert doc["recommendation"]["trial"] == 2  # trial 1 misses the latency SLO
    assert {p["trial"]: p["meets_slos"] for p in doc["pareto"]} == {1: False, 2: True, 3: True}
    never = OutcomeConstraint("latency", "<=", 0.5)
    doc = deliver(POINTS, OBJECTIVES, slos=[never])
    assert doc["recommendation"] is None and "no recommendation" in doc["note"]


def test_verified_configs_are_preferred() -> None:
    points = [point(0, 4.0, 4.0, verified=False), point(1, 3.0, 2.0), point(2, 1.0, 1.0)]
    doc = deliver(points, OBJECTIVES, priority={"throughput": 1.0})
    assert doc["recommendation"]["trial"] == 1
    assert "statistically verified" in doc["recommendation"]["rule"]


def test_a_large_front_is_cut_to_five_by_hypervolume_contribution() -> None:
    points = [point(i, float(i), float(i)) for i in range(1, 9)]  # all non-dominated
    doc = deliver(points, OBJECTIVES, max_front=5)
    assert len(doc["pareto"]) == 5


def test_one_objective_delivers_the_best() -> None:
    doc = deliver(POINTS, [Objective("throughput")])
    assert [p["trial"] for p in doc["pareto"]] == [1]
    assert doc["knee"]["trial"] == 1


def test_hypervolume_per_round_by_hand() -> None:
    reference = {"throughput": 0.0, "latency": 6.0}
    curve = hypervolume_per_round(POINTS, OBJECTIVES, reference=reference)
    # Maximisation form, reference (0, -6): (2,-3) -> 2*3 = 6; + (4,-4): 4*2 + 2*1 = 10;
    # + (3,-2): 3*4 + 1*2 = 14; + (1,-1): 14 + 1*1 = 15; dominated and failed points add 0.
    assert curve == pytest.approx([6.0, 10.0, 14.0, 15.0, 15.0, 15.0])
    slo = OutcomeConstraint("latency", "<=", 3.5)
    assert hypervolume_per_round(POINTS, OBJECTIVES, [slo], reference)[1] == pytest.approx(6.0)
