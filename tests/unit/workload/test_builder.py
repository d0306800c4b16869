"""``build_workload``: determinism, warm-up, schedules, prompt files, and the description."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError, InputFileError
from tunegate.workload import Workload, build_workload, load_tokenizer
from tunegate.workload.config import WorkloadConfig

SYNTHETIC: dict[str, Any] = {
    "num_requests": 40,
    "input_tokens": "lognormal:30,0.5,min=4",
    "output_tokens": "uniform:10,50",
    "concurrency": 4,
}


def build(**values: Any) -> Workload:
    return build_workload(WorkloadConfig(**values))


def test_same_seed_same_workload_different_seed_different() -> None:
    a = build(**SYNTHETIC, seed=1, request_rate=3.0)
    b = build(**SYNTHETIC, seed=1, request_rate=3.0)
    c = build(**SYNTHETIC, seed=2, request_rate=3.0)
    assert a == b
    assert a.requests != c.requests
    assert a.schedule.offsets_s != c.schedule.offsets_s


def test_synthetic_requests_follow_the_distributions() -> None:
    workload = build(**SYNTHETIC)
    assert [r.index for r in workload.requests] == list(range(40))
    assert all(10 <= r.max_tokens <= 50 for r in workload.requests)
    assert all(len(r.prompt.split()) >= 4 for r in workload.requests)
    assert all(r.input_tokens is None for r in workload.requests)
    assert len({r.prompt for r in workload.requests}) == 40


def test_warmup_requests_come_first_flagged_and_leave_measured_ones_unchanged() -> None:
    plain = build(**SYNTHETIC)
    warm = build(**SYNTHETIC, num_warmup=3)
    assert len(warm.requests) == 43
    assert [r.warmup for r in warm.requests] == [True] * 3 + [False] * 40
    assert [r.index for r in warm.requests] == list(range(43))
    assert len(warm.measured) == 40
    assert [(r.prompt, r.max_tokens) for r in warm.measured] == [
        (r.prompt, r.max_tokens) for r in plain.requests
    ]
    # warm-up prompts differ too, from their first words on (no shared cached prefix)
    assert len({tuple(r.prompt.split()[:4]) for r in warm.requests}) == 43
    assert warm.description["measured"] == plain.description["measured"]


def test_open_loop_schedule_covers_warmup_and_can_be_capped() -> None:
    workload = build(**SYNTHETIC, num_warmup=2, request_rate=8.0, arrival="gamma", burstiness=0.5)
    schedule = workload.schedule
    assert schedule.offsets_s is not None and len(schedule.offsets_s) == 42
    assert schedule.offsets_s[0] == 0.0
    assert (schedule.kind, schedule.burstiness, schedule.max_concurrency) == ("gamma", 0.5, 4)
    assert workload.description["arrival"] == {
        "kind": "gamma",
        "max_concurrency": 4,
        "request_rate": 8.0,
        "burstiness": 0.5,
    }


def test_infinite_rate_sends_all_at_once() -> None:
    values = {**SYNTHETIC, "concurrency": None}
    workload = build(**values, request_rate=float("inf"))
    assert workload.schedule.offsets_s == (0.0,) * 40
    assert workload.description["arrival"]["request_rate"] == "inf"


def test_description_is_json_and_rebuilds_the_same_workload() -> None:
    workload = build(**SYNTHETIC, seed=9, num_warmup=2, request_rate=float("inf"))
    description = json.loads(json.dumps(workload.description, allow_nan=False))
    assert description["format"] == "tunegate.workload/1"
    assert description["input_tokens"] == "lognormal:30,0.5,min=4"
    assert description["output_tokens"] == "uniform:10,50"
    assert (description["seed"], description["num_requests"], description["num_warmup"]) == (
        9,
        40,
        2,
    )
    mean_out = sum(r.max_tokens for r in workload.measured) / 40
    assert description["measured"]["mean_output_tokens"] == pytest.approx(mean_out)
    rebuilt = build_workload(WorkloadConfig.model_validate(description["config"]))
    assert rebuilt == workload


def test_prompts_too_short_to_differ_are_refused() -> None:
    with pytest.raises(ConfigError, match="prompts repeat"):
        build(num_requests=300, input_tokens=1, output_tokens=1, concurrency=1)
    assert len(build(num_requests=256, input_tokens=1, output_tokens=1, concurrency=1).requests)


def test_config_tokenizer_is_loaded_and_counts_tokens(word_tokenizer_path: Path) -> None:
    workload = build(**SYNTHETIC, tokenizer=str(word_tokenizer_path))
    tok = load_tokenizer(str(word_tokenizer_path))
    assert all(r.input_tokens == tok.count(r.prompt) for r in workload.requests)
    assert workload.description["tokenizer"] == str(word_tokenizer_path)


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_workload_uses_line_lengths_then_the_distribution(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"prompt": f"question {i}", "max_tokens": i + 1} for i in range(5)
    ]
    lines += [{"prompt": f"open question {i}"} for i in range(5)]
    path = write_jsonl(tmp_path / "p.jsonl", lines)
    workload = build(
        dataset="jsonl", dataset_path=path, num_requests=10, output_tokens=77, concurrency=2
    )
    by_prompt = {r.prompt: r.max_tokens for r in workload.requests}
    assert by_prompt == {
        **{f"question {i}": i + 1 for i in range(5)},
        **{f"open question {i}": 77 for i in range(5)},
    }
    file_info = workload.description["dataset_file"]
    assert file_info["path"] == str(path) and file_info["usable_entries"] == 10
    assert len(file_info["sha256"]) == 64


def test_jsonl_line_without_output_length_and_no_distribution_names_the_line(
    tmp_path: Path,
) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "a", "max_tokens": 3}, {"prompt": "b"}])
    with pytest.raises(ConfigError, match=re.escape(f"{path}:2: no 'max_tokens'")):
        build(dataset="jsonl", dataset_path=path, num_requests=2, concurrency=1)


def test_jsonl_with_fewer_prompts_than_requests_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "a", "max_tokens": 3}] * 3)
    with pytest.raises(InputFileError, match="3 usable prompts, but 4 requests"):
        build(dataset="jsonl", dataset_path=path, num_requests=3, num_warmup=1, concurrency=1)


def write_sharegpt(path: Path) -> Path:
    items = [
        {
            "conversations": [
                {"from": "human", "value": f"the question {i}"},
                {"from": "gpt", "value": " ".join(["word"] * (i + 1))},
            ]
        }
        for i in range(6)
    ]
    items.append({"conversations": [{"from": "gpt", "value": "orphan"}]})
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def test_sharegpt_output_length_is_the_reply_token_count(
    tmp_path: Path, word_tokenizer_path: Path
) -> None:
    path = write_sharegpt(tmp_path / "s.json")
    tok = load_tokenizer(str(word_tokenizer_path))
    config = WorkloadConfig(dataset="sharegpt", dataset_path=path, num_requests=6, concurrency=1)
    workload = build_workload(config, tok)
    # "word" is not in the word-level vocabulary: each maps to [UNK], still one token each
    assert sorted(r.max_tokens for r in workload.requests) == [1, 2, 3, 4, 5, 6]
    assert all(r.input_tokens == 3 for r in workload.requests)  # "the question N" -> 3 tokens
    assert workload.description["dataset_file"]["skipped_entries"] == {"no human turn with text": 1}


def test_sharegpt_without_tokenizer_uses_the_output_distribution(tmp_path: Path) -> None:
    path = write_sharegpt(tmp_path / "s.json")
    workload = build(
        dataset="sharegpt", dataset_path=path, num_requests=6, output_tokens=9, concurrency=1
    )
    assert {r.max_tokens for r in workload.requests} == {9}
    assert all(r.input_tokens is None for r in workload.requests)


def test_sharegpt_without_tokenizer_or_distribution_says_what_to_set(tmp_path: Path) -> None:
    path = write_sharegpt(tmp_path / "s.json")
    with pytest.raises(ConfigError, match=r"need a tokenizer .* or output_tokens"):
        build(dataset="sharegpt", dataset_path=path, num_requests=2, concurrency=1)
