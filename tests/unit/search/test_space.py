"""The search space: unit-cube mapping, traffic lights, constraints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tunegate.errors import ConfigError
from tunegate.search.space import Constraint, Layer, Light, Param, SearchSpace

SEQS = Param("max_num_seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=1, high=1024, default=256)
TOKENS = Param("max_num_batched_tokens", "int", Layer.SCHEDULING, low=64, high=8192,
               default=2048)
CHUNKED = Param("enable_chunked_prefill", "bool", Layer.FEATURES, default=False)
POLICY = Param("scheduling_policy", "categorical", Layer.SCHEDULING, choices=("fcfs", "priority"),
               default="fcfs")
UTIL = Param("gpu_memory_utilization", "float", Layer.MEMORY_CONCURRENCY, low=0.5, high=0.95,
             default=0.9)
MODEL = Param("model", "categorical", Layer.FEATURES, light=Light.FORBIDDEN,
              choices=("llama-8b",), default="llama-8b", reason="the model is the product")
STREAM = Param("stream", "bool", Layer.FEATURES, light=Light.MUST_CHANGE, required=True,
               default=False, reason="stream=false makes TTFT == E2EL")


def _seqs_le_tokens(config: dict) -> dict | None:
    if config["max_num_seqs"] > config["max_num_batched_tokens"]:
        return {**config, "max_num_seqs": config["max_num_batched_tokens"]}
    return config


SPACE = SearchSpace.of([SEQS, TOKENS, CHUNKED, POLICY, UTIL, MODEL, STREAM],
                       [Constraint("max_num_seqs <= max_num_batched_tokens", _seqs_le_tokens)])


def test_only_situational_parameters_are_searched() -> None:
    assert [p.name for p in SPACE.tunable] == [
        "max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill",
        "scheduling_policy", "gpu_memory_utilization"]


def test_every_config_carries_fixed_values() -> None:
    config = SPACE.from_unit([0.5] * SPACE.dims)
    assert config["model"] == "llama-8b"
    assert config["stream"] is True  # must_change applied
    assert SPACE.default()["stream"] is False  # the baseline before the fix


@pytest.mark.parametrize("param", [SEQS, TOKENS, CHUNKED, POLICY, UTIL])
@given(u=st.floats(min_value=0.0, max_value=1.0))
def test_unit_mapping_stays_in_range(param: Param, u: float) -> None:
    assert param.contains(param.from_unit(u))


@pytest.mark.parametrize("param", [SEQS, TOKENS, CHUNKED, POLICY])
def test_discrete_values_round_trip_through_the_unit_interval(param: Param) -> None:
    values = param.values if param.kind in ("bool", "categorical") else [
        int(param.low), int(param.high), 17, 300]
    for value in values:
        if param.contains(value):
            assert param.from_unit(param.to_unit(value)) == value


def test_log_int_spends_half_the_interval_below_the_geometric_middle() -> None:
    assert SEQS.from_unit(0.5) == 32  # sqrt(1 * 1025) ~ 32


def test_constraints_repair_or_reject() -> None:
    repaired = SPACE.repair({"max_num_seqs": 1000, "max_num_batched_tokens": 512})
    assert repaired == {"max_num_seqs": 512, "max_num_batched_tokens": 512}
    impossible = SearchSpace.of([SEQS], [Constraint("never", lambda c: None)])
    assert impossible.repair({"max_num_seqs": 4}) is None


def test_forbidden_changes_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"forbidden.*the model is the product"):
        SPACE.check_forbidden({"model": "llama-70b"})
    SPACE.check_forbidden({"model": "llama-8b", "max_num_seqs": 3})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "int"}, "low <= high"),
        ({"kind": "log_int", "low": 0, "high": 4}, "low >= 1"),
        ({"kind": "categorical"}, "needs choices"),
        ({"kind": "complex"}, "is not one of"),
        ({"kind": "bool", "light": Light.MUST_CHANGE}, "required value"),
    ],
)
def test_malformed_parameters_name_themselves(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Param("knob", layer=Layer.SCHEDULING, **kwargs)
    assert "'knob'" in str(info.value)


def test_duplicate_parameters_are_refused() -> None:
    with pytest.raises(ConfigError, match="defined twice: max_num_seqs"):
        SearchSpace.of([SEQS, SEQS])
