"""tunegate's own records as a :class:`~tunegate.gauge.dataset.Dataset` (nanoseconds -> seconds).

Every field of a :class:`~tunegate.loadgen.records.RequestRecord` that a check can use is kept:
what was asked (``streamed``, ``requested_max_tokens``, ``ignore_eos``), how the server answered
(``response_streamed``), and every token count with its source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tunegate.gauge.dataset import Dataset, RequestSample, RunContext, summary_from_samples
from tunegate.loadgen.records import CountSource, RequestRecord
from tunegate.metrics.definitions import (
    NS_PER_S,
    benchmark_duration_ns,
    e2el_ns,
    itl_ns,
    ttfat_ns,
    ttft_ns,
)
from tunegate.metrics.summary import concurrency_profile

__all__ = ["dataset_from_records", "sample_from_record"]


def _s(ns: float | None) -> float | None:
    return None if ns is None else ns / NS_PER_S


def sample_from_record(record: RequestRecord, origin_ns: int = 0) -> RequestSample:
    """One record as a sample; ``origin_ns`` is subtracted from absolute times."""
    source = record.output_tokens_source
    return RequestSample(
        ok=record.outcome.is_success,
        ttft_s=_s(ttft_ns(record)),
        e2el_s=_s(e2el_ns(record)),
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        itls_s=tuple(g / NS_PER_S for g in itl_ns(record)),
        start_s=(record.t_send_ns - origin_ns) / NS_PER_S,
        end_s=(record.t_end_ns - origin_ns) / NS_PER_S,
        error=record.error,
        stream_requested=record.streamed,
        response_streamed=record.response_streamed,
        content_events=record.content_events,
        usage_output_tokens=record.usage_completion_tokens,
        tokenizer_output_tokens=record.tokenizer_output_tokens,
        output_tokens_source=None if source is CountSource.UNKNOWN else source.value,
        requested_max_tokens=record.requested_max_tokens,
        ignore_eos=record.ignore_eos,
        warmup=record.warmup,
        # Only for reasoning models: elsewhere TTFAT is TTFT and says nothing new.
        ttfat_s=_s(ttfat_ns(record)) if record.reasoning_streamed else None,
        reasoning_tokens=record.reasoning_tokens,
    )


def dataset_from_records(
    records: Sequence[RequestRecord], context: RunContext | None = None, source: str = "tunegate"
) -> Dataset:
    """Records (warm-up included: they are marked, not dropped) as a dataset.

    The summary is computed here with the same definitions as :mod:`tunegate.metrics`; the
    observed peak concurrency comes from :func:`~tunegate.metrics.summary.concurrency_profile`.
    """
    context = context or RunContext()
    origin = min((r.t_send_ns for r in records), default=0)
    samples = tuple(sample_from_record(r, origin) for r in records)
    measured = [r for r in records if not r.warmup]
    duration = benchmark_duration_ns(measured) / NS_PER_S or None
    summary = summary_from_samples(samples, duration, context.percentiles)
    peak, _ = concurrency_profile(records)
    summary = replace(summary, max_concurrent_requests=float(peak) if measured else None)
    return Dataset(source=source, summary=summary, requests=samples, context=context)
