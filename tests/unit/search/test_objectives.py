"""Objectives and SLOs: at most five objectives, parsed SLOs."""

from __future__ import annotations

import pytest

from tunegate.errors import ConfigError
from tunegate.search.objectives import (
    MAX_OBJECTIVES,
    Objective,
    check_objectives,
    parse_outcome_constraint,
)
from tunegate.search.selection import select_proposer
from tunegate.search.space import Layer, Param, SearchSpace

SPACE = SearchSpace.of([Param("x", "int", Layer.SCHEDULING, low=1, high=64, default=8)])


def test_more_than_five_objectives_is_a_config_error() -> None:
    six = [Objective(f"m{i}") for i in range(MAX_OBJECTIVES + 1)]
    with pytest.raises(ConfigError, match=r"at most 5.*aggregate"):
        check_objectives(six)
    with pytest.raises(ConfigError, match="at most 5"):
        select_proposer(SPACE, 0, budget=30, objectives=six)
    assert len(check_objectives(six[:5])) == 5


def test_no_objective_or_a_repeated_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        check_objectives([])
    with pytest.raises(ConfigError, match="named twice: a"):
        check_objectives([Objective("a"), Objective("a", "lower")])


def test_slos_parse_and_judge() -> None:
    slo = parse_outcome_constraint("p99_ttft_ms <= 3000")
    assert (slo.metric, slo.op, slo.bound) == ("p99_ttft_ms", "<=", 3000.0)
    assert slo.satisfied({"p99_ttft_ms": 3000.0})
    assert not slo.satisfied({"p99_ttft_ms": 3000.5})
    assert not slo.satisfied({})  # a missing value does not meet an SLO
    floor = parse_outcome_constraint("request_goodput>=1.5")
    assert floor.slack(2.0) == 0.5 and str(floor) == "request_goodput >= 1.5"
    with pytest.raises(ConfigError, match="METRIC <= NUMBER"):
        parse_outcome_constraint("p99_ttft_ms < 3000")
