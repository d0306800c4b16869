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
from tunegate.gauge.from_records import dataset_from_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord

__all__ = [
    "CHECKS",
    "CODES",
    "Dataset",
    "Finding",
    "RequestSample",
    "RooflineLimits",
    "RunContext",
    "Severity",
    "Summary",
    "ValidatedFile",
    "ValidationReport",
    "engine_of_metrics",
    "load_report",
    "validate_dataset",
    "validate_file",
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
) -> ValidationReport:
    """Run every check on a run's records (warm-up records are marked and left out).

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
    """
    stream = {r.streamed for r in records}
    context = RunContext(
        max_concurrency=max_concurrency, request_rate=request_rate,
        stream_requested=stream.pop() if len(stream) == 1 else None,
        percentiles=tuple(percentiles),
        warmup_excluded=warmup_excluded if warmup_excluded is not None
        else sum(1 for r in records if r.warmup),
        lag=lag, server_metrics=server_metrics, roofline=roofline,
        arrival=arrival, burstiness=burstiness, engine=engine or engine_of_metrics(server_metrics),
    )
    return run_checks(dataset_from_records(records, context))
