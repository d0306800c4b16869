"""Specification of the workload's bounds (issue 13): absurd sizes are refused, with the
limit and its reason, before a prompt is built; hostile prompt files are one clear error."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest

from tunegate.errors import ConfigError, InputFileError
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.builder import MAX_PROMPT_TOKENS
from tunegate.workload.config import format_validation_error
from tunegate.workload.datasets import MAX_DATASET_BYTES, load_jsonl, load_sharegpt
from tunegate.workload.lengths import MAX_LENGTH, parse_length_distribution


def _config(**fields: Any) -> WorkloadConfig:
    base: dict[str, Any] = {"num_requests": 4, "input_tokens": "8", "output_tokens": "8",
                            "concurrency": 2}
    return WorkloadConfig.model_validate(base | fields)


def _refusal(**fields: Any) -> str:
    with pytest.raises(pydantic.ValidationError) as info:
        _config(**fields)
    return format_validation_error(info.value, source="cli")


# --- Sizes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"num_requests": 999_999_999_999}, "cli: num_requests: at most 1,000,000: with "
         "--report or in a tuning run every request's record is kept in memory"),
        ({"num_warmup": 10**9}, "cli: num_warmup: at most 1,000,000"),
        ({"num_requests": 600_000, "num_warmup": 600_000},
         "num_requests + num_warmup = 1,200,000 exceeds 1,000,000"),
        ({"concurrency": 99_999_999}, "cli: concurrency: at most 65,536 requests in flight: "
         "each holds its own TCP connection"),
        ({"request_rate": 1e-300}, "cli: request_rate: at least 0.001 requests/s"),
        ({"request_rate": 1e300}, "cli: request_rate: at most 1,000,000 requests/s"),
        ({"input_tokens": "1000000000"}, "length 1000000000 exceeds the limit of 1,048,576 "
         "tokens per request"),
        ({"output_tokens": "uniform:1,2000000"}, "HIGH 2000000 exceeds the limit"),
        ({"input_tokens": "lognormal:10,1,max=99999999"}, "max 99999999 exceeds the limit"),
        ({"output_tokens": "normal:2000000,5"}, "MEAN 2000000 exceeds the limit"),
        ({"shared_prefix_tokens": 10**7}, "shared_prefix_tokens: at most 1,048,576 tokens"),
    ],
    ids=["num_requests", "num_warmup", "requests_plus_warmup", "concurrency", "rate_tiny",
         "rate_huge", "input_fixed", "output_uniform", "input_max", "output_mean", "prefix"],
)
def test_absurd_sizes_are_refused_with_the_limit_and_why(fields: dict[str, Any],
                                                         expected: str) -> None:
    message = _refusal(**fields)
    assert expected in message
    assert len(message.splitlines()) == 1


def test_the_limits_themselves_are_accepted() -> None:
    config = _config(num_requests=1_000_000, concurrency=65_536, request_rate=0.001,
                     input_tokens=str(MAX_LENGTH), output_tokens=str(MAX_LENGTH))
    assert config.num_requests == 1_000_000
    assert _config(request_rate=float("inf")).request_rate == float("inf")
    assert _config(request_rate=1_000_000).request_rate == 1_000_000


def test_an_unbounded_tail_is_clipped_at_the_longest_length() -> None:
    dist = parse_length_distribution("lognormal:1000000,3", option="--input-tokens")
    lengths = dist.sample(np.random.default_rng(0), 10_000)
    assert lengths.max() == MAX_LENGTH  # the tail reaches it, and stops there


def test_shared_prefixes_totalling_more_than_the_memory_bound_are_refused_before_any_is_built(
) -> None:
    config = _config(shared_prefix_tokens=1_000_000, num_prefixes=101)
    with pytest.raises(ConfigError, match=r"the shared prefixes total 101,000,000 tokens .* "
                       r"above the limit of 100,000,000: they are kept in memory"):
        build_workload(config)
    assert MAX_PROMPT_TOKENS == 100_000_000


def test_prompts_totalling_more_than_memory_are_built_on_demand() -> None:
    workload = build_workload(_config(num_requests=200, input_tokens="1000000"))
    assert len(workload.requests) == 200
    assert workload.requests[-1].prompt.count(" ") + 1 == 1_000_000


# --- Hostile prompt files --------------------------------------------------------------------


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b'{"prompt": "a", "x": ' + NESTED + b"}\n", ":1: JSON nested deeper than can be read"),
        (b'{"prompt": "ok"}\n{"prompt": "a", "max_tokens": ' + b"9" * 5000 + b"}\n",
         ":2: unreadable JSON (Exceeds the limit (4300 digits)"),
        (b'{"prompt": "a", "max_tokens": 1000000000000000000000000000000}\n',
         ":1: field 'max_tokens' is 1000000000000000000000000000000, above the limit of "
         "1,048,576"),
        (b'{"prompt": "caf\xe9"}\n', "not UTF-8 text (bad byte at offset 15)"),
    ],
    ids=["nested", "huge_integer", "max_tokens_over_limit", "latin1"],
)
def test_hostile_jsonl_files_are_one_error_naming_the_file_and_line(
    tmp_path: Path, data: bytes, fragment: str
) -> None:
    path = _write(tmp_path / "p.jsonl", data)
    with pytest.raises(InputFileError) as info:
        load_jsonl(path)
    assert str(info.value).startswith(str(path))
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (NESTED, "JSON nested deeper than can be read"),
        (b'[{"conversations": [], "x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001 + b"]",
         "JSON nested deeper than can be read"),
        (b"[" + b"1" * 5000 + b"]", "unreadable JSON"),
        (b'[{"conversations": [{"from": "human", "value": "\xff"}]}]', "not UTF-8 text"),
    ],
    ids=["nested_list", "nested_in_an_entry", "huge_integer", "not_utf8"],
)
def test_hostile_sharegpt_files_are_one_error_naming_the_file(
    tmp_path: Path, data: bytes, fragment: str
) -> None:
    path = _write(tmp_path / "s.json", data)
    with pytest.raises(InputFileError) as info:
        load_sharegpt(path)
    assert str(info.value).startswith(str(path))
    assert fragment in str(info.value)


@pytest.mark.parametrize("loader", [load_jsonl, load_sharegpt])
def test_a_fifo_or_directory_is_refused_instead_of_blocking(tmp_path: Path, loader: Any) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes to it: reading would block for ever
    for path in (fifo, tmp_path):
        with pytest.raises(InputFileError, match="not a regular file"):
            loader(path)


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as handle:
        handle.truncate(MAX_DATASET_BYTES + 1)  # sparse: no disk used, never read
    with pytest.raises(InputFileError, match=r"1,073,741,825 bytes, above the limit"):
        load_jsonl(path)
