"""``WorkloadConfig`` validation and the one-line-per-field error messages the CLI shows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tunegate.workload.config import WorkloadConfig, format_validation_error
from tunegate.workload.lengths import FixedLength, LognormalLength

BASE: dict[str, Any] = {"num_requests": 10, "input_tokens": "fixed:8", "output_tokens": 4}


def errors_of(**values: Any) -> str:
    with pytest.raises(pydantic.ValidationError) as info:
        WorkloadConfig(**values)
    return format_validation_error(info.value, source="workload.toml")


def test_distributions_are_parsed_from_text_and_dump_back_to_it() -> None:
    config = WorkloadConfig(
        num_requests=3,
        input_tokens="lognormal:63,0.4;max=200",
        output_tokens=16,
        concurrency=2,
    )
    assert config.input_tokens == LognormalLength(63, 0.4, maximum=200)
    assert config.output_tokens == FixedLength(16)
    dumped = config.model_dump(mode="json")
    assert dumped["input_tokens"] == "lognormal:63,0.4,max=200"
    assert dumped["output_tokens"] == "fixed:16"
    assert WorkloadConfig.model_validate(dumped) == config


def test_infinite_rate_survives_a_json_round_trip() -> None:
    config = WorkloadConfig(**BASE, request_rate=math.inf)
    dumped = config.model_dump(mode="json")
    assert dumped["request_rate"] == "inf"
    assert WorkloadConfig.model_validate(dumped).request_rate == math.inf


def test_seed_preset_fills_count_and_concurrency() -> None:
    config = WorkloadConfig(dataset="seed")
    assert (config.num_requests, config.concurrency, config.request_rate) == (1319, 16, None)
    open_loop = WorkloadConfig(dataset="seed", request_rate=4.0)
    assert open_loop.concurrency is None  # rate given: no closed-loop default


def test_rate_and_concurrency_together_mean_a_capped_open_loop() -> None:
    config = WorkloadConfig(**BASE, request_rate=5.0, concurrency=3)
    assert (config.request_rate, config.concurrency) == (5.0, 3)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {**BASE, "concurrency": 0},
            "workload.toml: concurrency: Input should be greater than or equal to 1 (got 0)",
        ),
        (
            {**BASE, "request_rate": -1},
            "workload.toml: request_rate: Input should be greater than 0 (got -1)",
        ),
        (
            {**BASE, "concurrency": 1, "seed": -3},
            "workload.toml: seed: Input should be greater than or equal to 0 (got -3)",
        ),
        (
            {**BASE, "concurrency": 1, "colour": "red"},
            "workload.toml: colour: Extra inputs are not permitted (got 'red')",
        ),
        (
            {"input_tokens": 8, "output_tokens": 8, "concurrency": 1},
            "workload.toml: num_requests: Field required",
        ),
        (
            {**BASE, "concurrency": 1, "input_tokens": "zipf:2"},
            "workload.toml: input_tokens: cannot parse 'zipf:2'",
        ),
        (
            {**BASE, "concurrency": 1, "dataset": "csv"},
            "dataset: Input should be 'synthetic', 'seed', 'jsonl' or 'sharegpt' (got 'csv')",
        ),
        (BASE, "workload.toml: set concurrency (closed loop) or request_rate (open loop)"),
        (
            {**BASE, "concurrency": 2, "arrival": "gamma"},
            "apply only to open loop; set request_rate too",
        ),
        ({**BASE, "request_rate": 2, "burstiness": 0.5}, "burstiness=0.5 needs arrival='gamma'"),
        (
            {**BASE, "request_rate": 2, "burstiness": 0},
            "burstiness: Input should be greater than 0 (got 0)",
        ),
        (
            {"num_requests": 3, "output_tokens": 4, "concurrency": 1},
            "input_tokens is required with dataset='synthetic'",
        ),
        (
            {"dataset": "jsonl", "num_requests": 3, "concurrency": 1},
            "dataset_path is required with dataset='jsonl'",
        ),
        (
            {**BASE, "concurrency": 1, "dataset_path": "p.jsonl"},
            "dataset_path is only used with dataset='jsonl' or 'sharegpt'",
        ),
        (
            {"dataset": "seed", "input_tokens": 5},
            "input_tokens is only used with dataset='synthetic'",
        ),
        ({"dataset": "seed", "output_tokens": 5}, "output_tokens cannot change preset 'seed'"),
    ],
)
def test_invalid_configs_give_one_line_naming_field_and_value(
    values: dict[str, Any], expected: str
) -> None:
    message = errors_of(**values)
    assert expected in message
    assert "Value error" not in message


def test_every_problem_gets_its_own_line() -> None:
    message = errors_of(num_requests=0, num_warmup=-1, input_tokens=8, output_tokens=8)
    assert message.splitlines() == [
        "workload.toml: num_requests: Input should be greater than or equal to 1 (got 0)",
        "workload.toml: num_warmup: Input should be greater than or equal to 0 (got -1)",
    ]


def test_file_datasets_accept_paths() -> None:
    config = WorkloadConfig(
        dataset="sharegpt", dataset_path="data/s.json", num_requests=2, request_rate=1.0
    )
    assert config.dataset_path == Path("data/s.json")
    assert config.model_dump(mode="json")["dataset_path"] == "data/s.json"
