"""Shared prompt prefixes: seeded, prepended, prompts still unique, described, validated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from tunegate.workload import build_workload, load_tokenizer
from tunegate.workload.config import WorkloadConfig

BASE: dict[str, Any] = {
    "num_requests": 30,
    "input_tokens": "uniform:8,20",
    "output_tokens": 4,
    "concurrency": 4,
}


def _prefix_of(prompt: str, n_words: int) -> str:
    return " ".join(prompt.split()[:n_words])


def test_every_prompt_starts_with_one_of_the_shared_prefixes() -> None:
    wl = build_workload(WorkloadConfig(**BASE, shared_prefix_tokens=50, num_prefixes=3, seed=2))
    prompts = [r.prompt for r in wl.requests]
    prefixes = {_prefix_of(p, 50) for p in prompts}
    assert len(prefixes) == 3  # 30 uniform draws over 3 prefixes hit all of them
    assert len(set(prompts)) == len(prompts)  # the unique part keeps prompts unique
    plain = build_workload(WorkloadConfig(**BASE, seed=2))
    # The unique part is exactly the prompt without a prefix: input_tokens stays its length.
    assert [" ".join(p.split()[50:]) for p in prompts] == [r.prompt for r in plain.requests]


def test_one_prefix_by_default_and_same_seed_same_prefix() -> None:
    a = build_workload(WorkloadConfig(**BASE, shared_prefix_tokens=40))
    b = build_workload(WorkloadConfig(**BASE, shared_prefix_tokens=40))
    c = build_workload(WorkloadConfig(**BASE, shared_prefix_tokens=40, seed=9))
    assert len({_prefix_of(r.prompt, 40) for r in a.requests}) == 1
    assert a == b
    assert _prefix_of(a.requests[0].prompt, 40) != _prefix_of(c.requests[0].prompt, 40)


def test_description_serialises_the_prefix() -> None:
    config = WorkloadConfig(**BASE, shared_prefix_tokens=16, num_prefixes=2)
    wl = build_workload(config)
    assert wl.description["config"]["shared_prefix_tokens"] == 16
    assert wl.description["config"]["num_prefixes"] == 2
    assert WorkloadConfig.model_validate(wl.description["config"]) == config
    assert wl.description["shared_prefix"]["unit"] == "words"
    assert wl.description["shared_prefix"]["num_prefixes"] == 2


def test_with_a_tokenizer_the_prefix_is_exact_tokens(word_tokenizer_path: Path) -> None:
    tok = load_tokenizer(str(word_tokenizer_path))
    wl = build_workload(WorkloadConfig(**BASE, shared_prefix_tokens=25), tok)
    plain = build_workload(WorkloadConfig(**BASE), tok)
    for r, p in zip(wl.requests, plain.requests, strict=True):
        assert r.input_tokens == (p.input_tokens or 0) + 25 == tok.count(r.prompt)
    assert wl.description["shared_prefix"]["unit"] == "tokens"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"dataset": "seed", "shared_prefix_tokens": 8}, "only applies to dataset='synthetic'"),
        ({**BASE, "num_prefixes": 3}, "needs shared_prefix_tokens > 0"),
        ({**BASE, "shared_prefix_tokens": -1}, "greater than or equal to 0"),
    ],
)
def test_invalid_prefix_settings_are_rejected(values: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=message):
        WorkloadConfig(**values)
