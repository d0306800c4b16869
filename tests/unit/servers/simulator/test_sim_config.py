"""Engine knobs: vLLM names, string conversion, validation messages."""

from __future__ import annotations

import pytest

from tunegate.errors import ConfigError
from tunegate.servers.simulator import EngineConfig, list_scenarios, parse_engine_args
from tunegate.servers.simulator.engine import build_config
from tunegate.servers.simulator.scenarios import SCENARIOS, get_scenario


def test_cli_spelling_and_strings_are_converted() -> None:
    args = parse_engine_args(
        {
            "--max-num-seqs": "32",
            "enable-chunked-prefill": "false",
            "gpu_memory_utilization": "0.8",
            "env": ["NCCL_ALGO=Tree"],
            "TASK_QUEUE_ENABLE": "2",
        }
    )
    cfg = EngineConfig(**args)
    assert cfg.max_num_seqs == 32 and cfg.enable_chunked_prefill is False
    assert cfg.gpu_memory_utilization == 0.8
    assert dict(cfg.env) == {"NCCL_ALGO": "Tree", "TASK_QUEUE_ENABLE": "2"}


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ({"max_num_seqs": "many"}, r"max_num_seqs='many' is invalid; valid values: an integer"),
        ({"max_num_seqs": 0}, r"max_num_seqs=0 is invalid"),
        ({"gpu_memory_utilization": 1.5}, r"gpu_memory_utilization=1.5 .*\(0, 1\]"),
        ({"tensor_parallel_size": 3}, r"tensor_parallel_size=3 .*1, 2, 4, 8"),
        ({"scheduling_policy": "lifo"}, r"scheduling_policy='lifo' .*fcfs, priority"),
        ({"enforce_eager": "maybe"}, r"enforce_eager='maybe' .*true, false"),
        ({"env": {"NCCL_PROTO": "Star"}}, r"NCCL_PROTO='Star' .*LL, LL128, Simple"),
        ({"env": "NOEQUALS"}, r"NAME=VALUE"),
    ],
)
def test_invalid_values_name_knob_value_and_valid_values(
    args: dict[str, object], pattern: str
) -> None:
    with pytest.raises(ConfigError, match=pattern):
        build_config(get_scenario("fast"), args)


def test_scenario_defaults_then_user_args() -> None:
    cfg = build_config(get_scenario("seed"), {"enable_chunked_prefill": "true"})
    assert cfg.tensor_parallel_size == 8 and cfg.enforce_eager is True
    assert cfg.enable_chunked_prefill is True


def test_every_scenario_starts_with_its_defaults() -> None:
    from tunegate.servers.simulator.engine import Engine

    for scenario in list_scenarios():
        assert Engine(scenario.name).plan.num_blocks > 0
    assert list(SCENARIOS) and {"seed", "fast"} <= set(SCENARIOS)
