"""Validity checks ("is the gauge broken?") on tunegate's records and on other tools' reports.

Everything becomes a :class:`Dataset` first (per-request samples when known, summaries always,
the run's configuration), and one ordered set of checks (:mod:`tunegate.gauge.checks`) reads
it. :data:`CODES` documents every finding code. Foreign files are read by
:mod:`tunegate.gauge.foreign` (:func:`validate_file`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.gauge.checks import CHECKS, run_checks
from tunegate.gauge.codes import CODES
from tunegate.gauge.dataset import (
    Dataset,
    RequestSample,
    RooflineLimits,
    RunContext,
    Summary,
    engine_of_metrics,
)
from tunegate.gauge.findings import Finding, Severity, ValidationReport
from tunegate.gauge.foreign import ValidatedFile, load_report, validate_file
from tunegate.gauge.from_records import (
    dataset_from_record_table,
    dataset_from_records,
    summary_from_metrics,
)
from tunegate.gauge.table import SampleTable
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.record_table import RecordTable
from tunegate.loadgen.records import RequestRecord

__all__ = [
    "CHECKS",
    "CODES",
    "Dataset",
    "Finding",
    "RequestSample",
    "RooflineLimits",
    "RunContext",
    "SampleTable",
    "Severity",
    "Summary",
    "ValidatedFile",
    "ValidationReport",
    "dataset_from_record_table",
    "dataset_from_records",
    "engine_of_metrics",
    "load_report",
    "summary_from_metrics",
    "validate_dataset",
    "validate_file",
    "validate_record_table",
    "validate_records",
]


def validate_dataset(data: Dataset) -> ValidationReport:
    """Run every gauge check on a normalised dataset."""
    return run_checks(data)


def validate_records(
    records: Sequence[RequestRecord],
    lag: LagSummary | None = None,
    *,
    max_concurrency: int | None = None,
    request_rate: float | None = None,
    percentiles: Sequence[float] = (),
    warmup_excluded: int | None = None,
    server_metrics: Mapping[str, Any] | None = None,
    roofline: RooflineLimits | None = None,
    arrival: str | None = None,
    burstiness: float | None = None,
    engine: str | None = None,
    summary: Summary | None = None,
) -> ValidationReport:
    """Run every check on a run's records (warm-up records are marked and left out).

    The records become a :class:`~tunegate.loadgen.record_table.RecordTable` without their
    pooled gaps (no check reads the ITL distribution), then :func:`validate_record_table`.

    Args:
        records: Every record of the run, warm-up included.
        lag: The client's event-loop lag (``client_saturated``).
        max_concurrency: Closed-loop slots or cap (``littles_law_violation``).
        request_rate: Open-loop rate; ``None`` or infinity for a closed loop.
        percentiles: Percentiles the result quotes (``too_few_samples``); none: not checked.
        warmup_excluded: Warm-up requests excluded (``warmup_included`` stays silent if > 0).
        server_metrics: The server's metrics over the run (``server_client_disagree``).
        roofline: Hardware limits (``roofline_exceeded``).
        arrival / burstiness: The open loop's arrival process (``offered_load_mismatch``).
        engine: The serving engine, when known (engine-specific remedies).
        summary: The run's summary when the caller has it (:func:`summary_from_metrics`);
            computed from the records otherwise.
    """
    with RecordTable.from_records(records, pool_gaps=False) as table:
        return validate_record_table(
            table, lag, max_concurrency=max_concurrency, request_rate=request_rate,
            percentiles=percentiles, warmup_excluded=warmup_excluded,
            server_metrics=server_metrics, roofline=roofline, arrival=arrival,
            burstiness=burstiness, engine=engine, summary=summary)


def validate_record_table(
    table: RecordTable,
    lag: LagSummary | None = None,
    *,
    max_concurrency: int | None = None,
    request_rate: float | None = None,
    percentiles: Sequence[float] = (),
    warmup_excluded: int | None = None,
    server_metrics: Mapping[str, Any] | None = None,
    roofline: RooflineLimits | None = None,
    arrival: str | None = None,
    burstiness: float | None = None,
    engine: str | None = None,
    summary: Summary | None = None,
) -> ValidationReport:
    """Run every check on a run's record table (warm-up rows are marked and left out).

    The arguments are those of :func:`validate_records`. ``summary``: the run's summary when
    the caller has it (:func:`summary_from_metrics` of
    :func:`tunegate.metrics.summary.summarize_table`'s dict), so the columns are not
    summarised twice; computed from the table otherwise, without ITL statistics (no check
    reads them, and pooling every gap would cost 8 bytes a gap).
    """
    warmup = table.column("warmup")
    context = RunContext(
        max_concurrency=max_concurrency, request_rate=request_rate,
        percentiles=tuple(percentiles),
        warmup_excluded=warmup_excluded if warmup_excluded is not None
        else int(warmup.sum()),
        lag=lag, server_metrics=server_metrics, roofline=roofline,
        arrival=arrival, burstiness=burstiness, engine=engine or engine_of_metrics(server_metrics),
    )
    # stream_requested: the rows' one value, when they agree (dataset_from_record_table)
    return run_checks(dataset_from_record_table(table, context, summary=summary,
                                                pool_itl=False))
