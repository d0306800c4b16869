"""Validity checks ("is the gauge broken?") on records and, later, on foreign reports."""

from __future__ import annotations

from collections.abc import Sequence

from tunegate.gauge.findings import Finding, Severity, ValidationReport
from tunegate.gauge.record_checks import RECORD_CHECKS, RecordsContext
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord

__all__ = ["Finding", "Severity", "ValidationReport", "validate_records"]


def validate_records(
    records: Sequence[RequestRecord], lag: LagSummary | None = None
) -> ValidationReport:
    """Run every record check on the measured (non-warm-up) records."""
    ctx = RecordsContext(records=[r for r in records if not r.warmup], lag=lag)
    findings = [f for check in RECORD_CHECKS if (f := check(ctx)) is not None]
    return ValidationReport(tuple(findings))
