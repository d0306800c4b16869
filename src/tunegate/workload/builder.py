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

Synthetic prompts are built in memory before anything is sent, about 5 bytes per token and,
without a tokenizer, 27-30 million words a second on this project's 2-core machine (CPU time,
measured with 10,000 x 1,024-word and 200 x 131,072-word prompts; 5.5 million before the words
were looked up in one vectorised step), so one workload's prompts total at most
:data:`MAX_PROMPT_TOKENS` (100 million: about 500 MB and 4 s to build); more is refused, with
the total, before a prompt is built.
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
"""Most prompt tokens (words without a tokenizer) the synthetic prompts of one workload hold."""

DESCRIPTION_FORMAT = "tunegate.workload/1"
"""Version tag of the ``Workload.description`` layout."""


@dataclass(frozen=True, slots=True)
class _Part:
    """The requests of one part (measured or warm-up) before indices are assigned."""

    prompts: list[str]
    input_tokens: list[int | None]
    output_tokens: list[int]
    inexact: int = 0


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(stream.encode())])


def _synthetic_part(
    inputs: Sequence[int],
    outputs: Sequence[int],
    *,
    first_key: int,
    rng: np.random.Generator,
    tokenizer: Tokenizer | None,
    prefixes: Sequence[str] = (),
    prefix_rng: np.random.Generator | None = None,
) -> _Part:
    prompts = [
        synthetic_prompt(int(length), key=first_key + i, rng=rng, tokenizer=tokenizer)
        for i, length in enumerate(inputs)
    ]
    texts = [p.text for p in prompts]
    counts = [p.input_tokens for p in prompts]
    if prefixes:
        assert prefix_rng is not None
        choice = prefix_rng.integers(0, len(prefixes), size=len(texts)).tolist()
        texts = [f"{prefixes[c]} {t}" for c, t in zip(choice, texts, strict=True)]
        if tokenizer is not None:
            counts = [tokenizer.count(t) for t in texts]
    return _Part(
        prompts=texts,
        input_tokens=counts,
        output_tokens=[int(x) for x in outputs],
        inexact=sum(not p.exact for p in prompts),
    )


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


def _check_prompt_total(config: WorkloadConfig, unique_tokens: int) -> None:
    """Refuse a workload whose prompts would not fit in memory (see the module docstring)."""
    prefix = config.shared_prefix_tokens
    total = unique_tokens + prefix * (config.num_requests + config.num_warmup + config.num_prefixes)
    if total > MAX_PROMPT_TOKENS:
        raise ConfigError(
            f"the workload's prompts total {total:,} tokens (num_requests + num_warmup = "
            f"{config.num_requests + config.num_warmup:,} x input_tokens {config.input_tokens}), "
            f"above the limit of {MAX_PROMPT_TOKENS:,}: they are built in memory before anything "
            "is sent (about 5 bytes per token); lower num_requests or input_tokens")


def _synthetic_parts(
    config: WorkloadConfig, tokenizer: Tokenizer | None
) -> tuple[_Part, _Part, LengthDistribution, LengthDistribution]:
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
    _check_prompt_total(config, int(inputs.sum()) + int(warm_inputs.sum()))
    key = int(_rng(seed, "prompt-keys").integers(0, 2**32))
    prefixes, _ = _shared_prefixes(config, tokenizer)
    measured = _synthetic_part(
        inputs.tolist(),
        outputs.tolist(),
        first_key=key,
        rng=_rng(seed, "prompts"),
        tokenizer=tokenizer,
        prefixes=prefixes,
        prefix_rng=_rng(seed, "prefix-choice"),
    )
    warmup = _synthetic_part(
        warm_inputs.tolist(),
        out_dist.sample(_rng(seed, "warmup-output-lengths"), w).tolist(),
        first_key=key + n,
        rng=_rng(seed, "warmup-prompts"),
        tokenizer=tokenizer,
        prefixes=prefixes,
        prefix_rng=_rng(seed, "warmup-prefix-choice"),
    )
    return measured, warmup, in_dist, out_dist


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


def _check_unique(prompts: list[str], config: WorkloadConfig) -> None:
    if len(set(prompts)) != len(prompts):
        raise ConfigError(
            f"dataset={config.dataset!r}: {len(prompts) - len(set(prompts))} of {len(prompts)} "
            f"prompts repeat; prompts this short cannot all differ (input_tokens="
            f"{config.input_tokens}); raise the minimum length (4 or more always works)"
        )


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
    else:
        measured, warmup, in_dist, out_dist = _synthetic_parts(config, tokenizer)
        _check_unique(measured.prompts + warmup.prompts, config)
        description["input_tokens"] = in_dist.spec
        description["output_tokens"] = out_dist.spec
        description["input_length_unit"] = "tokens" if tokenizer else "words"
        description["inexact_prompts"] = measured.inexact + warmup.inexact
        if config.shared_prefix_tokens:
            description["shared_prefix"] = {
                "length": config.shared_prefix_tokens,
                "unit": "tokens" if tokenizer else "words",
                "num_prefixes": config.num_prefixes,
                "inexact_prefixes": _shared_prefixes(config, tokenizer)[1],
                "placement": "prepended to every prompt; input_tokens is the unique part",
            }
        if config.dataset in PRESETS:
            description["preset"] = PRESETS[config.dataset].summary
    requests = [
        RequestSpec(i, prompt, out, tokens, warmup=True)
        for i, (prompt, tokens, out) in enumerate(
            zip(warmup.prompts, warmup.input_tokens, warmup.output_tokens, strict=True)
        )
    ]
    requests += [
        RequestSpec(w + i, prompt, out, tokens)
        for i, (prompt, tokens, out) in enumerate(
            zip(measured.prompts, measured.input_tokens, measured.output_tokens, strict=True)
        )
    ]
    schedule = _schedule(config, n + w)
    rate = schedule.request_rate
    description["arrival"] = {
        "kind": schedule.kind,
        "max_concurrency": schedule.max_concurrency,
        "request_rate": "inf" if rate is not None and rate == float("inf") else rate,
        "burstiness": schedule.burstiness,
    }
    description["measured"] = {
        "mean_input_tokens": _mean(measured.input_tokens),
        "mean_input_words": (
            # Synthetic prompts are words joined by single spaces: counting the spaces gives
            # len(p.split()) without building a list of every word of a 128k-word prompt.
            float(np.mean([p.count(" ") + 1 for p in measured.prompts]))
            if config.dataset not in ("jsonl", "sharegpt") and tokenizer is None
            else None
        ),
        "mean_output_tokens": float(np.mean(measured.output_tokens)),
    }
    return Workload(requests=tuple(requests), schedule=schedule, description=description)
