"""The gauge checks, in the order they run, and :func:`run_checks`.

Order matters twice: findings are listed in this order (the gauge-breaking ones first), and a
check sees the findings of the checks before it, so a figure computed through an invalid field
is reported as derived (``derived_from``) rather than as independent evidence. Every code is
documented in :data:`tunegate.gauge.codes.CODES`.
"""

from __future__ import annotations

from tunegate.gauge.checks.base import Check, CheckResult, NotChecked
from tunegate.gauge.checks.counts import (
    client_saturated,
    token_count_approximate,
    token_count_mismatch,
)
from tunegate.gauge.checks.load import (
    error_rate,
    littles_law_violation,
    too_few_samples,
    warmup_included,
)
from tunegate.gauge.checks.physics import prefill_slower_than_decode, roofline_exceeded
from tunegate.gauge.checks.server import server_client_disagree
from tunegate.gauge.checks.timing import clock_anomaly, ttft_equals_e2el, ttft_missing
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity, ValidationReport

__all__ = ["CHECKS", "Check", "CheckResult", "NotChecked", "run_checks"]

CHECKS: dict[str, Check] = {
    "ttft_equals_e2el": ttft_equals_e2el,
    "ttft_missing": ttft_missing,
    "clock_anomaly": clock_anomaly,
    "error_rate": error_rate,
    "prefill_slower_than_decode": prefill_slower_than_decode,
    "littles_law_violation": littles_law_violation,
    "token_count_mismatch": token_count_mismatch,
    "token_count_approximate": token_count_approximate,
    "client_saturated": client_saturated,
    "too_few_samples": too_few_samples,
    "warmup_included": warmup_included,
    "server_client_disagree": server_client_disagree,
    "roofline_exceeded": roofline_exceeded,
}
"""Code -> check, run in this order (an explicit registry, no import magic)."""


def run_checks(data: Dataset) -> ValidationReport:
    """Run every check on ``data``; say what could not be checked, and why."""
    prior: dict[str, Finding] = {}
    not_checked: dict[str, str] = {}
    limited: list[str] = []
    for code, check in CHECKS.items():
        result = check(data, prior)
        if isinstance(result, Finding):
            prior[result.code] = result
        elif isinstance(result, NotChecked):
            not_checked[code] = result.reason
            if result.needs_requests:
                limited.append(code)
    findings = list(prior.values())
    if not data.has_requests:
        findings.append(Finding(
            code="summary_only", severity=Severity.INFO,
            message=("The report has no per-request data: TTFT == E2EL and prefill vs decode "
                     "were judged from summary statistics (means and percentiles), and "
                     + (", ".join(limited) if limited else "no check") + " could not run."),
            evidence={"format": data.source, "not_checked": limited},
            remedy="Keep per-request data (vLLM --save-detailed, AIPerf profile_export.jsonl).",
        ))
    return ValidationReport(tuple(findings), tuple(not_checked.items()))
