"""Which words a seeded synthetic prompt holds, and how the builder counts them.

A workload is reproduced from its seed, so the words of a prompt are part of its contract: after
the four key words, word i is ``WORDS[d_i]`` for the i-th draw ``d_i`` of
``rng.integers(0, 256)``, however the lookup is implemented. The description's
``mean_input_words`` is the mean of each prompt's whitespace-separated word count.
"""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.workload import FixedLength, UniformLength, WorkloadConfig, build_workload
from tunegate.workload.prompts import KEY_WORDS, WORDS, prefix_words, synthetic_prompt


@pytest.mark.parametrize("length", [1, KEY_WORDS, KEY_WORDS + 1, 1000, 70_000])
def test_filler_words_are_the_word_list_indexed_by_the_draws(length: int) -> None:
    prompt = synthetic_prompt(length, key=12345, rng=np.random.default_rng(9))
    draws = np.random.default_rng(9).integers(0, len(WORDS), size=max(length - KEY_WORDS, 0))
    expected = prefix_words(12345)[:length] + [WORDS[int(d)] for d in draws]
    assert prompt.text == " ".join(expected)
    assert all(type(word) is str for word in prompt.text.split())


@pytest.mark.parametrize("shared_prefix", [0, 50])
def test_mean_input_words_is_the_mean_whitespace_word_count(shared_prefix: int) -> None:
    workload = build_workload(WorkloadConfig(
        dataset="synthetic", num_requests=20, num_warmup=3, seed=4,
        input_tokens=UniformLength(5, 60), output_tokens=FixedLength(8), concurrency=2,
        shared_prefix_tokens=shared_prefix, num_prefixes=2 if shared_prefix else 1))
    words = [len(r.prompt.split()) for r in workload.measured]
    assert len(set(words)) > 1  # lengths differ, so the mean is not any one prompt's count
    assert workload.description["measured"]["mean_input_words"] == float(np.mean(words))
