"""Turn a :class:`WorkloadConfig` into a :class:`Workload`, deterministically.

Each random choice draws from its own named stream, ``default_rng([seed, crc32(name)])``
(input lengths, output lengths, prompt words, dataset order, arrivals, and separate streams for
warm-up requests), so changing one part of a config never shifts another part's draws; in
particular the measured requests do not depend on ``num_warmup``.

Shared prefixes (``shared_prefix_tokens > 0``): ``num_prefixes`` seeded prefixes of exactly
that many tokens (with a tokenizer) or words (without) are drawn once; each request draws one
of them (seeded, uniform) and its prompt is ``prefix + " " + unique part``, the unique part as
without a prefix (so prompts stay unique). With a tokenizer ``input_tokens`` is the whole
prompt's true count.

Request order: the ``num_warmup`` warm-up requests first (indices ``0..W-1``,
``warmup=True``), then the ``num_requests`` measured ones. The ``description`` holds the full
config (``WorkloadConfig.model_validate(description["config"])`` rebuilds the same workload), the
effective distributions and arrival, and the means of the measured requests' drawn lengths.

Synthetic prompts are built on demand, not before the run: the requests are a
:class:`~tunegate.workload.lazy.LazyRequests`, which keeps the drawn lengths and, every few
thousand requests, the generator states a block of prompts is rebuilt from (a million 128-word
requests cost a few MB; see that module for the blocks and how much one holds). Building the
workload makes one forward pass to record those states (it only draws the words, unless a
tokenizer is used or some prompt is shorter than four words, when it builds and checks every
prompt once). Their size is bounded per prompt (``lengths.MAX_LENGTH`` for the unique part and
for the shared prefix, checked by the config), not in total. What stays in memory for the whole
run is bounded instead: the shared prefixes total at most :data:`MAX_PROMPT_TOKENS` tokens (words
without a tokenizer; 100 million: about 500 MB), ``num_prefixes x shared_prefix_tokens``; more is
refused before a prefix is built. Prompts from a file are read into memory (a plain tuple of
specs), bounded by the file size limit ``datasets.MAX_DATASET_BYTES``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunegate.errors import ConfigError
from tunegate.workload.arrivals import closed_loop, open_loop
from tunegate.workload.config import WorkloadConfig, format_validation_error
from tunegate.workload.datasets import (
    Dataset,
    DatasetEntry,
    load_jsonl,
    load_sharegpt,
    sample_entries,
)
from tunegate.workload.lazy import PartPlan, plan_requests
from tunegate.workload.lengths import LengthDistribution
from tunegate.workload.presets import PRESETS, draw_preset_lengths
from tunegate.workload.prompts import synthetic_prompt
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload
from tunegate.workload.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "DESCRIPTION_FORMAT",
    "MAX_PROMPT_TOKENS",
    "WorkloadConfig",
    "build_workload",
    "format_validation_error",
]

MAX_PROMPT_TOKENS = 100_000_000
"""Most tokens (words without a tokenizer) the shared prefixes of one workload hold in total."""

DESCRIPTION_FORMAT = "tunegate.workload/1"
"""Version tag of the ``Workload.description`` layout."""


@dataclass(frozen=True, slots=True)
class _Part:
    """The requests of one part (measured or warm-up) before indices are assigned."""

    prompts: list[str]
    input_tokens: list[int | None]
    output_tokens: list[int]


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stream.encode())])


def _shared_prefixes(config: WorkloadConfig, tokenizer: Tokenizer | None) -> tuple[list[str], int]:
    """The seeded shared prefixes, and how many missed their exact length."""
    if not config.shared_prefix_tokens:
        return [], 0
    key = int(_rng(config.seed, "prefix-keys").integers(0, 2**32))
    rng = _rng(config.seed, "shared-prefixes")
    drawn = [
        synthetic_prompt(config.shared_prefix_tokens, key=key + j, rng=rng, tokenizer=tokenizer)
        for j in range(config.num_prefixes)
    ]
    return [p.text for p in drawn], sum(not p.exact for p in drawn)


def _check_prefix_total(config: WorkloadConfig) -> None:
    """Refuse shared prefixes that would not fit in memory (see the module docstring)."""
    total = config.shared_prefix_tokens * config.num_prefixes
    if total > MAX_PROMPT_TOKENS:
        raise ConfigError(
            f"the shared prefixes total {total:,} tokens (num_prefixes {config.num_prefixes:,} x "
            f"shared_prefix_tokens {config.shared_prefix_tokens:,}), above the limit of "
            f"{MAX_PROMPT_TOKENS:,}: they are kept in memory for the whole run (about 5 bytes "
            "per token); lower num_prefixes or shared_prefix_tokens")


def _synthetic(
    config: WorkloadConfig, tokenizer: Tokenizer | None, description: dict[str, Any]
) -> Sequence[RequestSpec]:
    """The lazy synthetic requests; fills the synthetic part of ``description``."""
    n, w, seed = config.num_requests, config.num_warmup, config.seed
    preset = PRESETS.get(config.dataset)
    if preset is not None:
        in_dist: LengthDistribution = preset.input_tokens
        out_dist: LengthDistribution = preset.output_tokens
        inputs, outputs = draw_preset_lengths(
            preset,
            n,
            input_rng=_rng(seed, "input-lengths"),
            output_rng=_rng(seed, "output-lengths"),
        )
    else:
        assert config.input_tokens is not None and config.output_tokens is not None
        in_dist, out_dist = config.input_tokens, config.output_tokens
        inputs = in_dist.sample(_rng(seed, "input-lengths"), n)
        outputs = out_dist.sample(_rng(seed, "output-lengths"), n)
    warm_inputs = in_dist.sample(_rng(seed, "warmup-input-lengths"), w)
    warm_outputs = out_dist.sample(_rng(seed, "warmup-output-lengths"), w)
    _check_prefix_total(config)
    key = int(_rng(seed, "prompt-keys").integers(0, 2**32))
    prefixes, inexact_prefixes = _shared_prefixes(config, tokenizer)
    requests, (warm_stats, stats), repeats = plan_requests(
        [PartPlan(0, key + n, True, warm_inputs, warm_outputs),
         PartPlan(w, key, False, inputs, outputs)],
        prompt_rngs=[_rng(seed, "warmup-prompts"), _rng(seed, "prompts")],
        prefix_rngs=[_rng(seed, "warmup-prefix-choice"), _rng(seed, "prefix-choice")],
        prefixes=prefixes,
        prefix_length=config.shared_prefix_tokens,
        tokenizer=tokenizer,
    )
    if repeats:
        raise ConfigError(
            f"dataset={config.dataset!r}: {repeats} of {n + w} prompts repeat; prompts this "
            f"short cannot all differ (input_tokens={config.input_tokens}); raise the minimum "
            "length (4 or more always works)"
        )
    description["input_tokens"] = in_dist.spec
    description["output_tokens"] = out_dist.spec
    description["input_length_unit"] = "tokens" if tokenizer else "words"
    description["inexact_prompts"] = stats.inexact + warm_stats.inexact
    if config.shared_prefix_tokens:
        description["shared_prefix"] = {
            "length": config.shared_prefix_tokens,
            "unit": "tokens" if tokenizer else "words",
            "num_prefixes": config.num_prefixes,
            "inexact_prefixes": inexact_prefixes,
            "placement": "prepended to every prompt; input_tokens is the unique part",
        }
    if config.dataset in PRESETS:
        description["preset"] = PRESETS[config.dataset].summary
    description["measured"] = {
        "mean_input_tokens": stats.mean_input_tokens,
        # Without a tokenizer a prompt is its drawn number of words, plus the prefix's, joined
        # by single spaces: the mean whitespace word count, without building a prompt.
        "mean_input_words": (
            float(np.mean(np.asarray(inputs, dtype=np.int64) + config.shared_prefix_tokens))
            if tokenizer is None
            else None
        ),
        "mean_output_tokens": float(np.mean(np.asarray(outputs, dtype=np.int64))),
    }
    return requests


def _file_part(
    config: WorkloadConfig,
    dataset: Dataset,
    entries: Sequence[DatasetEntry],
    tokenizer: Tokenizer | None,
    stream: str,
) -> _Part:
    dist = config.output_tokens
    drawn = dist.sample(_rng(config.seed, stream), len(entries)).tolist() if dist else []
    outputs: list[int] = []
    for i, entry in enumerate(entries):
        if dataset.format == "jsonl" and entry.output_tokens is not None:
            outputs.append(entry.output_tokens)
        elif dist is not None:
            outputs.append(int(drawn[i]))
        elif dataset.format == "sharegpt" and tokenizer is not None and entry.reply is not None:
            outputs.append(max(1, tokenizer.count(entry.reply)))
        elif dataset.format == "sharegpt":
            raise ConfigError(
                f"dataset {str(dataset.path)!r}: ShareGPT output lengths need a tokenizer (to "
                "count each reply's tokens) or output_tokens (e.g. 'fixed:256'); set one"
            )
        else:
            raise ConfigError(
                f"{entry.origin}: no 'max_tokens' on this line and no output_tokens configured; "
                "add max_tokens to every line or set output_tokens (e.g. 'fixed:256')"
            )
    return _Part(
        prompts=[e.prompt for e in entries],
        input_tokens=[tokenizer.count(e.prompt) if tokenizer else None for e in entries],
        output_tokens=outputs,
    )


def _load_dataset(config: WorkloadConfig) -> Dataset:
    assert config.dataset_path is not None
    if config.dataset == "jsonl":
        return load_jsonl(config.dataset_path)
    return load_sharegpt(config.dataset_path)


def _schedule(config: WorkloadConfig, total: int) -> ArrivalSchedule:
    if config.request_rate is None:
        assert config.concurrency is not None
        return closed_loop(config.concurrency)
    return open_loop(
        total,
        config.request_rate,
        kind=config.arrival,
        burstiness=config.burstiness,
        rng=_rng(config.seed, "arrivals"),
        max_concurrency=config.concurrency,
    )


def _mean(values: Sequence[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known and len(known) == len(values) else None


def build_workload(config: WorkloadConfig, tokenizer: Tokenizer | None = None) -> Workload:
    """Build the requests and schedule that ``config`` describes.

    Args:
        config: The validated configuration.
        tokenizer: Counts tokens; when ``None`` and ``config.tokenizer`` is set, that one is
            loaded. Without any, synthetic lengths are word counts and ``input_tokens`` is
            ``None``.

    Returns:
        The workload; the same config (and tokenizer) always gives an identical one.

    Raises:
        ConfigError: the config cannot be realised (no output length source, prompts too short
            to differ).
        InputFileError: the prompt file is missing, malformed or too small.
        TokenizerError: ``config.tokenizer`` cannot be loaded offline.
    """
    if tokenizer is None and config.tokenizer is not None:
        tokenizer = load_tokenizer(config.tokenizer)
    n, w = config.num_requests, config.num_warmup
    description: dict[str, Any] = {
        "format": DESCRIPTION_FORMAT,
        "config": config.model_dump(mode="json"),
        "dataset": config.dataset,
        "seed": config.seed,
        "num_requests": n,
        "num_warmup": w,
        "tokenizer": tokenizer.name if tokenizer else None,
    }
    requests: Sequence[RequestSpec]
    if config.dataset in ("jsonl", "sharegpt"):
        dataset = _load_dataset(config)
        entries = sample_entries(dataset, n + w, _rng(config.seed, "dataset-order"))
        measured = _file_part(config, dataset, entries[:n], tokenizer, "output-lengths")
        warmup = _file_part(config, dataset, entries[n:], tokenizer, "warmup-output-lengths")
        description["dataset_file"] = {
            "path": str(dataset.path),
            "sha256": dataset.sha256,
            "usable_entries": len(dataset.entries),
            "skipped_entries": dict(dataset.skipped),
            "sampling": "without replacement, seeded permutation",
        }
        description["input_tokens"] = None
        description["output_tokens"] = config.output_tokens.spec if config.output_tokens else None
        requests = tuple(
            [
                RequestSpec(i, prompt, out, tokens, warmup=True)
                for i, (prompt, tokens, out) in enumerate(
                    zip(warmup.prompts, warmup.input_tokens, warmup.output_tokens, strict=True)
                )
            ]
            + [
                RequestSpec(w + i, prompt, out, tokens)
                for i, (prompt, tokens, out) in enumerate(
                    zip(measured.prompts, measured.input_tokens, measured.output_tokens,
                        strict=True)
                )
            ]
        )
        measured_summary = {
            "mean_input_tokens": _mean(measured.input_tokens),
            "mean_input_words": None,
            "mean_output_tokens": float(np.mean(measured.output_tokens)),
        }
    else:
        requests = _synthetic(config, tokenizer, description)
        measured_summary = description.pop("measured")
    schedule = _schedule(config, n + w)
    rate = schedule.request_rate
    description["arrival"] = {
        "kind": schedule.kind,
        "max_concurrency": schedule.max_concurrency,
        "request_rate": "inf" if rate is not None and rate == float("inf") else rate,
        "burstiness": schedule.burstiness,
    }
    description["measured"] = measured_summary
    return Workload(requests=requests, schedule=schedule, description=description)
