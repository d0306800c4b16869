"""Seeded request specifications and arrival schedules; no network I/O happens here.

Start with :class:`WorkloadConfig` and :func:`build_workload`; the parts (length
distributions, prompts, prompt files, arrivals, presets, tokenizers) are usable on their own.
A synthetic workload's requests are a :class:`LazyRequests` (prompts built on demand, see
:mod:`tunegate.workload.lazy`), an open-loop schedule's offsets an :class:`Offsets`.
"""

from __future__ import annotations

from tunegate.workload.arrivals import (
    ArrivalKind,
    Offsets,
    arrival_offsets,
    closed_loop,
    open_loop,
)
from tunegate.workload.builder import DESCRIPTION_FORMAT, build_workload
from tunegate.workload.config import WorkloadConfig, format_validation_error
from tunegate.workload.datasets import (
    Dataset,
    DatasetEntry,
    load_jsonl,
    load_sharegpt,
    sample_entries,
)
from tunegate.workload.lazy import LazyRequests
from tunegate.workload.lengths import (
    FixedLength,
    LengthDistribution,
    LognormalLength,
    NormalLength,
    UniformLength,
    parse_length_distribution,
)
from tunegate.workload.presets import (
    PRESETS,
    SEED_PRESET,
    Preset,
    draw_preset_lengths,
    rescale_to_total,
)
from tunegate.workload.prompts import WORDS, SyntheticPrompt, synthetic_prompt
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload
from tunegate.workload.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "DESCRIPTION_FORMAT",
    "PRESETS",
    "SEED_PRESET",
    "WORDS",
    "ArrivalKind",
    "ArrivalSchedule",
    "Dataset",
    "DatasetEntry",
    "FixedLength",
    "LazyRequests",
    "LengthDistribution",
    "LognormalLength",
    "NormalLength",
    "Offsets",
    "Preset",
    "RequestSpec",
    "SyntheticPrompt",
    "Tokenizer",
    "UniformLength",
    "Workload",
    "WorkloadConfig",
    "arrival_offsets",
    "build_workload",
    "closed_loop",
    "draw_preset_lengths",
    "format_validation_error",
    "load_jsonl",
    "load_sharegpt",
    "load_tokenizer",
    "open_loop",
    "parse_length_distribution",
    "rescale_to_total",
    "sample_entries",
    "synthetic_prompt",
]
