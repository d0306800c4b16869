"""The ``seed`` preset: the article's 1319 requests with exact means and a GSM8K-like skew."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tunegate.workload import build_workload, load_tokenizer
from tunegate.workload.config import WorkloadConfig
from tunegate.workload.lengths import LognormalLength
from tunegate.workload.presets import PRESETS, SEED_PRESET, draw_preset_lengths, rescale_to_total


def test_registry_holds_the_seed_preset() -> None:
    assert PRESETS["seed"] is SEED_PRESET
    assert SEED_PRESET.num_requests == 1319 and SEED_PRESET.concurrency == 16


@pytest.mark.parametrize("seed", [0, 1, 2, 12345])
def test_lengths_have_the_articles_exact_means_for_any_seed(seed: int) -> None:
    rng = np.random.default_rng
    ins, outs = draw_preset_lengths(
        SEED_PRESET, 1319, input_rng=rng([seed, 1]), output_rng=rng([seed, 2])
    )
    assert len(ins) == len(outs) == 1319
    assert int(ins.sum()) == 83031 and int(outs.sum()) == 209114
    assert abs(ins.mean() - 62.95) <= 0.001 and abs(outs.mean() - 158.54) <= 0.001
    # right-skewed like GSM8K: median below mean, long right tail, within the documented ranges
    assert np.median(ins) < ins.mean() and np.median(outs) < outs.mean()
    assert ins.min() >= 15 and ins.max() <= 200
    assert outs.min() >= 30 and outs.max() <= 400
    assert np.percentile(ins, 99) > 2 * np.median(ins)


def test_seed_workload_without_tokenizer_is_words_with_unknown_token_counts() -> None:
    workload = build_workload(WorkloadConfig(dataset="seed"))
    requests = workload.requests
    assert len(requests) == 1319
    assert workload.schedule.offsets_s is None and workload.schedule.max_concurrency == 16
    words = [len(r.prompt.split()) for r in requests]
    assert sum(words) == 83031
    assert sum(r.max_tokens for r in requests) == 209114
    assert all(r.input_tokens is None for r in requests)
    assert len({r.prompt for r in requests}) == 1319
    measured = workload.description["measured"]
    assert measured["mean_input_tokens"] is None
    assert measured["mean_input_words"] == pytest.approx(62.95, abs=0.001)
    assert measured["mean_output_tokens"] == pytest.approx(158.54, abs=0.001)
    assert workload.description["input_length_unit"] == "words"


def test_seed_workload_with_a_tokenizer_has_exact_token_counts(
    subword_tokenizer_path: Path,
) -> None:
    tok = load_tokenizer(str(subword_tokenizer_path))
    workload = build_workload(WorkloadConfig(dataset="seed", num_requests=200), tok)
    counts = [r.input_tokens for r in workload.requests]
    assert all(c is not None for c in counts)
    assert [tok.count(r.prompt) for r in workload.requests] == counts
    assert sum(c or 0 for c in counts) == round(62.95 * 200)
    assert workload.description["inexact_prompts"] == 0
    assert workload.description["input_length_unit"] == "tokens"
    assert workload.description["measured"]["mean_input_tokens"] == pytest.approx(62.95)


def test_rescale_to_total_hits_the_total_keeps_bounds_and_order() -> None:
    drawn = LognormalLength(60, 0.5, minimum=15, maximum=200).sample(np.random.default_rng(5), 999)
    result = rescale_to_total(drawn, 70_000, minimum=15, maximum=200)
    assert int(result.sum()) == 70_000
    assert result.min() >= 15 and result.max() <= 200
    # shape kept: a longer draw never ends up shorter than a shorter draw
    order = np.lexsort((result, drawn))
    assert np.all(np.diff(result[order]) >= 0)


def test_rescale_to_total_is_deterministic_and_checks_feasibility() -> None:
    values = np.array([1, 2, 3], dtype=np.int64)
    assert rescale_to_total(values, 12).tolist() == [2, 4, 6]
    assert rescale_to_total(values, 7).tolist() == rescale_to_total(values, 7).tolist()
    with pytest.raises(ValueError, match="unreachable"):
        rescale_to_total(values, 100, maximum=10)
