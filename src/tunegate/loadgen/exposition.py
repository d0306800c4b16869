"""A Prometheus text exposition (the body of ``GET /metrics``) as plain data.

Parsed with ``prometheus_client``'s own text parser, never by hand, then reduced to what the
telemetry needs: per metric family, its kind and one value per label set.

Names, as ``prometheus_client`` reports them: a counter under its sample name, which always
ends in ``_total`` (``vllm:generation_tokens_total``; llama.cpp's ``llamacpp:n_tokens_max``,
typed counter, becomes ``llamacpp:n_tokens_max_total``); a gauge, histogram or summary under
its family name (``vllm:time_to_first_token_seconds``). ``*_created`` series (start timestamps
``prometheus_client`` adds beside counters and histograms) are dropped, as are NaN and infinite
values, summary quantiles and families outside the given prefixes.

A scrape must never fail a run: when the parser rejects the text, the offending lines are
dropped one by one and the rest is parsed again; :attr:`Exposition.malformed_lines` says how
many were dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

__all__ = ["Exposition", "Family", "Histogram", "LabelSet", "parse_exposition"]

Kind = Literal["counter", "gauge", "histogram", "summary", "untyped"]
LabelSet = tuple[tuple[str, str], ...]
"""A series' labels, sorted, without ``le`` and ``quantile`` (those split a histogram or
summary into its samples, not into series)."""

_SPLITTING = frozenset({"le", "quantile"})
_KINDS: dict[str, Kind] = {"counter": "counter", "gauge": "gauge", "histogram": "histogram",
                           "summary": "summary"}


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram (or summary) series: observations, their sum, cumulative buckets."""

    count: float
    sum: float
    buckets: dict[str, float] = field(default_factory=dict)
    """Upper bound as exposed (``"0.1"``, ``"+Inf"``) -> cumulative count (empty for a
    summary)."""


@dataclass(slots=True)
class Family:
    """One metric family: its kind and one value per label set."""

    kind: Kind
    series: dict[LabelSet, float | Histogram] = field(default_factory=dict)


@dataclass(slots=True)
class Exposition:
    """A parsed scrape: families by name, and how many lines were malformed."""

    families: dict[str, Family] = field(default_factory=dict)
    malformed_lines: int = 0
    all_names: tuple[str, ...] = ()
    """Every family name the text held, before the prefix filter (for engine detection and
    for saying what a server exposed when no known prefix matched)."""


def _families(text: str) -> tuple[list[Metric], int]:
    """Parse ``text``; on a parser error drop each line the parser rejects on its own."""
    try:
        return list(text_string_to_metric_families(text)), 0
    except (ValueError, TypeError, IndexError):
        pass
    kept: list[str] = []
    dropped = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            try:
                list(text_string_to_metric_families(stripped + "\n"))
            except (ValueError, TypeError, IndexError):
                dropped += 1
                continue
        kept.append(line)
    try:
        return list(text_string_to_metric_families("\n".join(kept) + "\n")), dropped
    except (ValueError, TypeError, IndexError):  # lines fine alone, broken together
        return [], dropped + len(kept)


def _labels(labels: dict[str, str]) -> LabelSet:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in _SPLITTING))


def _histograms(samples: Sequence[Sample], base: str) -> dict[LabelSet, float | Histogram]:
    parts: dict[LabelSet, dict[str, object]] = {}
    for sample in samples:
        name, labels, value = sample.name, sample.labels, sample.value
        if not math.isfinite(value):
            continue
        part = parts.setdefault(_labels(labels), {"count": None, "sum": None, "buckets": {}})
        suffix = name[len(base):]
        if suffix == "_bucket" and "le" in labels:
            buckets = part["buckets"]
            assert isinstance(buckets, dict)
            buckets[labels["le"]] = float(value)
        elif suffix in ("_count", "_sum"):
            part[suffix[1:]] = float(value)
    out: dict[LabelSet, float | Histogram] = {}
    for key, part in parts.items():
        count, total, buckets = part["count"], part["sum"], part["buckets"]
        if isinstance(count, float) and isinstance(total, float) and isinstance(buckets, dict):
            out[key] = Histogram(count, total, dict(buckets))
    return out


def parse_exposition(text: str, prefixes: Sequence[str] | None = None) -> Exposition:
    """Parse a ``/metrics`` body.

    Args:
        text: The exposition text.
        prefixes: Keep only families whose name starts with one of these (``("vllm:",)``);
            ``None`` keeps every family.

    Example:
        >>> scrape = parse_exposition(
        ...     "# TYPE vllm:num_preemptions_total counter\\n"
        ...     'vllm:num_preemptions_total{model_name="m"} 3\\n')
        >>> scrape.families["vllm:num_preemptions_total"].series
        {(('model_name', 'm'),): 3.0}
    """
    raw, malformed = _families(text)
    typed = {f.name: f.type for f in raw}
    out = Exposition(malformed_lines=malformed)
    names: list[str] = []
    for family in raw:
        base, kind, samples = family.name, family.type, family.samples
        if base.endswith("_created") and typed.get(base[: -len("_created")]) in (
            "counter", "histogram", "summary"
        ):
            continue
        name = f"{base}_total" if kind == "counter" else base
        names.append(name)
        if prefixes is not None and not name.startswith(tuple(prefixes)):
            continue
        if kind in ("histogram", "summary"):
            series = _histograms(samples, base)
        else:
            wanted = name if kind == "counter" else None
            series = {_labels(s.labels): float(s.value) for s in samples
                      if math.isfinite(s.value) and (wanted is None or s.name == wanted)}
        if series:
            out.families[name] = Family(_KINDS.get(kind, "untyped"), series)
    out.all_names = tuple(names)
    return out
