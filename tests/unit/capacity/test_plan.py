"""What a capacity search looks for and may spend: the defaults a user gets without flags, and
every argument out of range refused with a ConfigError that names the flag to change."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tunegate.capacity import CapacityPlan, requests_for
from tunegate.errors import ConfigError
from tunegate.metrics.slo_spec import parse_slo_specs

P99 = parse_slo_specs(["ttft_p99:500"])
MEANS = parse_slo_specs(["ttft_mean:500", "tpot_mean:50"])


@pytest.mark.parametrize(("tokens", "by_concurrency", "by_rate"), [
    (["ttft_p99:500"], 1000, 1000),
    (["ttft_mean:500"], 200, 500),
    (["ttft_mean:500", "tpot_mean:50"], 200, 500),
    (["ttft_median:500"], 200, 500),
    (["ttft_p90:500"], 200, 500),
    (["ttft_p95:500"], 200, 500),
    (["ttft_p98:500"], 500, 500),
    (["ttft_p90:500", "tpot_p99:50", "e2el_mean:9000"], 1000, 1000),
    (["ttft:500"], 1000, 1000),                   # attainment 0.99
])
def test_probe_requests_default_to_ten_beyond_the_highest_quantile_with_a_floor_per_knob(
        tokens: list[str], by_concurrency: int, by_rate: int) -> None:
    """At least 200 measured requests, 500 by rate (the backlog needs them)."""
    slos = parse_slo_specs(tokens)
    assert requests_for(slos, "concurrency") == by_concurrency
    assert requests_for(slos, "rate") == by_rate
    assert CapacityPlan(by="concurrency", slos=slos).probe_requests == by_concurrency
    assert CapacityPlan(by="rate", slos=slos).probe_requests == by_rate


def test_a_p99_9_target_needs_ten_thousand_requests() -> None:
    assert requests_for(parse_slo_specs(["ttft_p99.9:500"])) == 10000


def test_an_attainment_share_sets_probe_requests_as_a_quantile_does() -> None:
    assert requests_for(parse_slo_specs(["ttft:500"], attainment=0.995)) == 2000
    assert requests_for(parse_slo_specs(["ttft:500"], attainment=0.9)) == 200


@pytest.mark.parametrize(("probe_requests", "warmup"), [(1000, 50), (200, 10), (100, 10),
                                                         (400, 20), (210, 11), (20, 10)])
def test_warmup_defaults_to_five_percent_of_a_probe_and_at_least_ten(
        probe_requests: int, warmup: int) -> None:
    for by in ("rate", "concurrency"):
        plan = CapacityPlan(by=by, slos=P99, probe_requests=probe_requests)  # type: ignore[arg-type]
        assert plan.warmup == warmup


def test_default_warmup_follows_the_default_probe_size() -> None:
    assert CapacityPlan(by="rate", slos=P99).warmup == 50
    assert CapacityPlan(by="concurrency", slos=MEANS).warmup == 10
    assert CapacityPlan(by="rate", slos=MEANS).warmup == 25
    assert CapacityPlan(by="rate", slos=P99, warmup=0).warmup == 0


def test_concurrency_range_defaults_to_whole_streams() -> None:
    plan = CapacityPlan(by="concurrency", slos=P99)
    assert (plan.min_load, plan.max_load) == (1.0, 1024.0)
    assert plan.min_load == int(plan.min_load) >= 1
    assert plan.max_load == int(plan.max_load)
    assert plan.unit == "streams"


def test_rate_range_defaults_to_a_positive_fractional_floor() -> None:
    plan = CapacityPlan(by="rate", slos=P99)
    assert 0 < plan.min_load < 1
    assert plan.max_load == 1000.0
    assert plan.unit == "req/s"


def test_other_defaults() -> None:
    plan = CapacityPlan(by="rate", slos=P99)
    assert (plan.start, plan.resolution, plan.confidence, plan.max_probes, plan.budget_s,
            plan.seed) == (None, 0.05, 0.95, 20, None, 0)


def test_a_min_load_above_the_default_max_raises_the_default_max_tenfold() -> None:
    plan = CapacityPlan(by="concurrency", slos=P99, min_load=16, max_load=4096)
    assert (plan.min_load, plan.max_load) == (16, 4096)
    plan = CapacityPlan(by="concurrency", slos=P99, min_load=2048)
    assert (plan.min_load, plan.max_load) == (2048, 20480)
    with pytest.raises(ConfigError, match="--max-load"):
        CapacityPlan(by="concurrency", slos=P99, min_load=2048, max_load=1024)


def test_the_plan_reads_back_as_json() -> None:
    plan = CapacityPlan(by="concurrency", slos=P99, start=16, max_probes=12, budget_s=600,
                        seed=3, stop_below=40.0)
    assert plan.to_json() == {
        "by": "concurrency", "unit": "streams", "start": 16, "min_load": 1.0,
        "max_load": 1024.0, "resolution": 0.05, "confidence": 0.95, "probe_requests": 1000,
        "warmup": 50, "max_probes": 12, "budget_s": 600, "seed": 3, "stop_below": 40.0}


BAD: list[tuple[dict[str, Any], str]] = [
    ({"resolution": 0.001}, "--resolution"),
    ({"resolution": 0.6}, "--resolution"),
    ({"resolution": -0.05}, "--resolution"),
    ({"resolution": math.nan}, "--resolution"),
    ({"confidence": 0.4}, "--confidence"),
    ({"confidence": 1.0}, "--confidence"),
    ({"confidence": 95.0}, "--confidence"),
    ({"min_load": -1.0}, "--min-load"),
    ({"min_load": 10.0, "max_load": 5.0}, "--max-load"),
    ({"min_load": 10.0, "max_load": 10.0}, "--max-load"),
    ({"max_load": math.inf}, "--max-load"),
    ({"max_load": -3.0}, "--max-load"),
    ({"start": 2000.0}, "--start"),
    ({"start": 0.01}, "--start"),
    ({"start": 5.0, "min_load": 10.0, "max_load": 100.0}, "--start"),
    ({"max_probes": 1}, "--max-probes"),
    ({"max_probes": 0}, "--max-probes"),
    ({"probe_requests": 10}, "--probe-requests"),
    ({"probe_requests": -5}, "--probe-requests"),
    ({"budget_s": 0.0}, "--budget"),
    ({"budget_s": -60.0}, "--budget"),
    ({"slos": ()}, "--slo"),
]


@pytest.mark.parametrize(("kwargs", "flag"), BAD, ids=[f"{k}-{f}" for k, f in BAD])
def test_each_invalid_argument_raises_config_error_naming_the_flag(kwargs: dict[str, Any],
                                                                   flag: str) -> None:
    arguments: dict[str, Any] = {"by": "rate", "slos": P99, **kwargs}
    with pytest.raises(ConfigError) as info:
        CapacityPlan(**arguments)
    assert flag in str(info.value)


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"min_load": 1.5}, "--min-load"),
    ({"max_load": 100.5}, "--max-load"),
    ({"start": 0.5}, "--start"),
])
def test_a_concurrency_range_is_whole_streams(kwargs: dict[str, Any], flag: str) -> None:
    with pytest.raises(ConfigError) as info:
        CapacityPlan(by="concurrency", slos=P99, **kwargs)
    assert flag in str(info.value)


def test_the_ends_of_each_range_are_accepted() -> None:
    for kwargs in ({"resolution": 0.005}, {"resolution": 0.5}, {"confidence": 0.5},
                   {"confidence": 0.999}, {"max_probes": 2}, {"probe_requests": 20},
                   {"start": 0.05}, {"start": 1000.0}, {"budget_s": 0.5}):
        CapacityPlan(by="rate", slos=P99, **kwargs)  # type: ignore[arg-type]
