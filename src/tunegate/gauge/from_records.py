"""tunegate's own records as a :class:`~tunegate.gauge.dataset.Dataset` (nanoseconds -> seconds).

Every column of a :class:`~tunegate.loadgen.record_table.RecordTable` that a check can use is
kept: what was asked (``streamed``, ``requested_max_tokens``, ``ignore_eos``), how the server
answered (``response_streamed``), and every token count with its source. The dataset holds the
columns only (:class:`~tunegate.gauge.table.SampleTable`), never a Python object per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tunegate.gauge.dataset import (
    Dataset,
    RunContext,
    Stat,
    Summary,
    stat_of,
    summary_from_table,
)
from tunegate.gauge.foreign.flat import stat_of_keys
from tunegate.gauge.foreign.vllm import vllm_summary
from tunegate.gauge.table import SampleTable
from tunegate.loadgen.record_table import RecordTable
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.definitions import NS_PER_S
from tunegate.metrics.quantiles import chunked_stats
from tunegate.metrics.summary import peak_in_flight, table_duration_ns

__all__ = ["dataset_from_record_table", "dataset_from_records", "summary_from_metrics",
           "table_context"]


def _origin_ns(table: RecordTable) -> int:
    sends = table.column("t_send_ns")
    return int(sends.min()) if len(sends) else 0


def _itl_stat(table: RecordTable, percentiles: Sequence[float]) -> Stat | None:
    """The pooled inter-token gaps of the measured complete rows, in ms.

    ``None`` when the table did not pool them (``RecordTable(pool_gaps=False)``: it holds
    fewer gaps than those rows have) or there are none. In memory the values are those of the
    per-record gauge (each gap in seconds, then in ms); beyond, the chunked selection of
    :mod:`tunegate.metrics.quantiles` (same percentiles, mean and std to the last digit or two).
    """
    ok = ~table.column("warmup") & table.column("success")
    expected = int(np.maximum(table.column("content_events")[ok] - 1, 0).sum())
    store = table.gaps
    if not expected or store.count != expected:
        return None
    if not store.on_disk:
        return stat_of(store.array() / NS_PER_S * 1e3, percentiles)
    stats = chunked_stats(store.chunks, percentiles, scale=1e-6)
    if stats is None:  # pragma: no cover - a file holds at least one gap
        return None
    return Stat(mean=stats.mean, median=stats.median, percentiles=dict(stats.percentiles),
                count=stats.count, std=stats.std)


def _peak(table: RecordTable) -> int:
    """Observed peak of measured requests in flight: that of
    :func:`~tunegate.metrics.summary.table_concurrency` (0 for a run of no duration), with a
    third of its memory."""
    measured = ~table.column("warmup")
    if not measured.any() or table_duration_ns(table) <= 0:
        return 0
    return peak_in_flight(table.column("t_send_ns")[measured], table.column("t_end_ns")[measured])


def summary_from_metrics(summary: Mapping[str, Any], percentiles: Sequence[float] = ()
                         ) -> Summary:
    """The gauge's :class:`Summary` of a run from :func:`tunegate.metrics.summarize`'s dict.

    The dict uses vLLM's key names (``completed``, ``mean_ttft_ms``, ``p99_ttft_ms``...) and a
    true instantaneous ``max_concurrent_requests``, so it is read as a tunegate result file is
    (:func:`~tunegate.gauge.foreign.vllm.vllm_summary` with ``exact_peak``), plus what the
    gauge's own summary of the records holds beside: the reasoning block (``*_ttfat_ms``, the
    mean of the known reasoning counts) and the mean of the *known* input lengths
    (``input_tokens_unknown``). A duration of 0 (no measured request) is no duration, and no
    completion no output total, and no measured request no peak, as in
    :func:`dataset_from_record_table`. ``percentiles``: those the dict quotes (its ``pNN_``
    keys are read whatever is passed).
    """
    doc = {**summary, "percentiles": list(percentiles)}
    base = vllm_summary(doc, exact_peak=True)
    completed = base.completed or 0

    def per_known(total_key: str, unknown_key: str) -> float | None:
        total, counted = summary.get(total_key), completed - int(summary.get(unknown_key) or 0)
        return total / counted if isinstance(total, int | float) and counted > 0 else None

    duration = base.duration_s or None
    total_out = base.total_output_tokens if completed else None
    return replace(
        base,
        duration_s=duration,
        total_output_tokens=total_out,
        output_throughput=base.output_throughput if total_out is not None and duration
        else None,
        max_concurrent_requests=base.max_concurrent_requests if base.num_prompts != 0
        else None,
        ttfat_ms=stat_of_keys(doc, "ttfat"),
        mean_reasoning_tokens=per_known("total_reasoning_tokens", "reasoning_tokens_unknown"),
        mean_input_tokens=per_known("total_input_tokens", "input_tokens_unknown"),
    )


def table_context(table: RecordTable, context: RunContext | None = None) -> RunContext:
    """``context`` with what the rows tell and it does not: whether streaming was asked for.

    The rows' one ``streamed`` value (every request asked the same) fills an unknown
    ``stream_requested``, as the records' samples used to tell it (reports that compare runs
    read it from the context).
    """
    context = context or RunContext()
    if context.stream_requested is not None or not len(table):
        return context
    streamed = table.column("streamed")
    if streamed.all() or not streamed.any():
        return replace(context, stream_requested=bool(streamed[0]))
    return context


def dataset_from_record_table(
    table: RecordTable,
    context: RunContext | None = None,
    *,
    summary: Summary | None = None,
    source: str = "tunegate",
    pool_itl: bool = True,
) -> Dataset:
    """A run's record table (warm-up rows included: they are marked, not dropped) as a dataset.

    Args:
        table: Every row of the run.
        context: The run's configuration; an unknown ``stream_requested`` is filled from the
            rows (:func:`table_context`).
        summary: The run's summary when the caller has it (:func:`summary_from_metrics` of
            the metrics summary); otherwise it is computed here with the definitions of
            :mod:`tunegate.metrics`: the observed peak concurrency from
            :func:`~tunegate.metrics.summary.table_concurrency`, the pooled ITL statistics
            from ``table.gaps`` (``None`` when the table did not pool them).
        source: The dataset's source name.
        pool_itl: Compute the ITL statistics of a summary computed here (off: ``None``, and
            no array of every gap; no check reads them, so validation leaves them out).
    """
    context = table_context(table, context)
    samples = SampleTable.from_record_table(table, _origin_ns(table))
    if summary is None:
        measured = bool((~table.column("warmup")).any())
        duration = table_duration_ns(table) / NS_PER_S or None
        summary = summary_from_table(samples, duration, context.percentiles, None)
        itl = _itl_stat(table, context.percentiles) if pool_itl else None
        summary = replace(summary, itl_ms=itl,
                          max_concurrent_requests=float(_peak(table)) if measured else None)
    return Dataset(source=source, summary=summary, context=context, table=samples)


def dataset_from_records(
    records: Sequence[RequestRecord], context: RunContext | None = None, source: str = "tunegate"
) -> Dataset:
    """Records (warm-up included: they are marked, not dropped) as a dataset.

    The records become a :class:`~tunegate.loadgen.record_table.RecordTable` (their gaps
    pooled for the ITL statistics) and then :func:`dataset_from_record_table`. The dataset
    computes its columns from that table when a check reads them, so it keeps the table (whose
    anonymous temporary files go when both are collected).
    """
    return dataset_from_record_table(RecordTable.from_records(records), context, source=source)
