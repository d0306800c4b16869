"""Synthetic prompts: exact word counts without a tokenizer, exact token counts with one."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tunegate.workload.prompts import KEY_WORDS, WORDS, prefix_words, synthetic_prompt
from tunegate.workload.tokenizer import load_tokenizer


def test_word_list_is_256_distinct_short_lowercase_words() -> None:
    assert len(WORDS) == len(set(WORDS)) == 256
    assert all(w.isalpha() and w.islower() and len(w) <= 6 for w in WORDS)


@pytest.mark.parametrize("length", [1, 3, 4, 5, 63, 400])
def test_without_tokenizer_a_prompt_is_exactly_n_words_and_claims_no_token_count(
    length: int,
) -> None:
    prompt = synthetic_prompt(length, key=123, rng=np.random.default_rng(0))
    words = prompt.text.split(" ")
    assert len(words) == length
    assert set(words) <= set(WORDS)
    assert prompt.input_tokens is None  # a word count is never reported as a token count
    assert prompt.exact


def test_first_words_spell_the_key_so_consecutive_prompts_differ_at_the_start() -> None:
    rng = np.random.default_rng(0)
    prompts = [synthetic_prompt(50, key=1000 + i, rng=rng).text for i in range(600)]
    assert len(set(prompts)) == 600
    first_words = [p.split()[0] for p in prompts]
    assert all(a != b for a, b in itertools.pairwise(first_words))
    assert prompts[0].split()[:KEY_WORDS] == prefix_words(1000)


def test_prefix_words_are_a_bijection_on_32_bit_keys() -> None:
    assert prefix_words(0) == ["the"] * 4
    assert prefix_words(1) == ["of", "the", "the", "the"]
    assert prefix_words(256) == ["the", "of", "the", "the"]
    assert prefix_words(2**32) == prefix_words(0)
    keys = [0, 255, 256, 65_535, 65_536, 2**24, 2**32 - 1]
    assert len({tuple(prefix_words(k)) for k in keys}) == len(keys)


def test_same_seed_same_prompt_different_seed_different() -> None:
    a = synthetic_prompt(40, key=5, rng=np.random.default_rng(1)).text
    b = synthetic_prompt(40, key=5, rng=np.random.default_rng(1)).text
    c = synthetic_prompt(40, key=5, rng=np.random.default_rng(2)).text
    assert a == b != c


@pytest.mark.parametrize("length", [1, 2, 7, 63, 200])
def test_word_level_tokenizer_gives_exactly_n_tokens(
    word_tokenizer_path: Path, length: int
) -> None:
    tok = load_tokenizer(str(word_tokenizer_path))
    prompt = synthetic_prompt(length, key=9, rng=np.random.default_rng(0), tokenizer=tok)
    assert prompt.exact
    assert prompt.input_tokens == length == tok.count(prompt.text)


@pytest.mark.parametrize("length", [1, 2, 5, 17, 63, 158])
def test_subword_tokenizer_gives_exactly_n_tokens_after_trimming(
    subword_tokenizer_path: Path, length: int
) -> None:
    tok = load_tokenizer(str(subword_tokenizer_path))
    assert tok.count("mother father") > 2  # words really split into several tokens here
    prompt = synthetic_prompt(length, key=9, rng=np.random.default_rng(0), tokenizer=tok)
    assert prompt.exact
    assert prompt.input_tokens == length == tok.count(prompt.text)


class _EvenTokenizer:
    """Every word is two tokens: odd lengths are impossible."""

    name = "even"

    def encode(self, text: str) -> list[int]:
        return [1, 2] * len(text.split())

    def decode(self, ids: list[int]) -> str:
        return " ".join(["the"] * (len(ids) // 2 + len(ids) % 2))

    def count(self, text: str) -> int:
        return len(self.encode(text))


def test_best_effort_records_the_true_count_when_n_is_unreachable() -> None:
    prompt = synthetic_prompt(
        7, key=0, rng=np.random.default_rng(0), tokenizer=_EvenTokenizer(), max_attempts=3
    )
    assert not prompt.exact
    assert prompt.input_tokens in (6, 8)
    assert prompt.input_tokens == _EvenTokenizer().count(prompt.text)


def test_length_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        synthetic_prompt(0, key=0, rng=np.random.default_rng(0))
