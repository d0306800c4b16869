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
from tunegate.gauge.checks.offered import offered_load_mismatch
from tunegate.gauge.checks.physics import prefill_slower_than_decode, roofline_exceeded
from tunegate.gauge.checks.server import (
    server_client_disagree,
    server_metrics_mixed,
    server_restarted,
)
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
    "offered_load_mismatch": offered_load_mismatch,
    "token_count_mismatch": token_count_mismatch,
    "token_count_approximate": token_count_approximate,
    "client_saturated": client_saturated,
    "too_few_samples": too_few_samples,
    "warmup_included": warmup_included,
    "server_restarted": server_restarted,
    "server_metrics_mixed": server_metrics_mixed,
    "server_client_disagree": server_client_disagree,
    "roofline_exceeded": roofline_exceeded,
}
"""Code -> check, run in this order (an explicit registry, no import magic)."""


def run_checks(data: Dataset) -> ValidationReport:
    """Run every check on ``data``; say what could not be checked, and why."""
    prior: dict[str, Finding] = {}
    not_checked: dict[str, str] = {}
    judged: list[str] = []
    limited: list[str] = []
    for code, check in CHECKS.items():
        result = check(data, prior)
        if isinstance(result, NotChecked):
            not_checked[code] = result.reason
            if result.needs_requests:
                limited.append(code)
            continue
        judged.append(code)
        if isinstance(result, Finding):
            prior[result.code] = result
    findings = list(prior.values())
    if not data.has_requests:
        findings.append(_summary_only(data, judged, limited))
    return ValidationReport(tuple(findings), tuple(not_checked.items()))


def _summary_only(data: Dataset, judged: list[str], limited: list[str]) -> Finding:
    """Which checks the summary statistics alone could answer, and which needed requests."""
    ran = ", ".join(judged) if judged else "no check"
    missed = (f"; {', '.join(limited)} could not run without per-request data" if limited
              else "")
    return Finding(
        code="summary_only", severity=Severity.INFO,
        message=(f"The report has no per-request data: {ran} judged its summary statistics "
                 f"(means, percentiles, totals){missed}. Checks that could not run for "
                 "another reason are listed under not_checked."),
        evidence={"format": data.source, "judged": judged, "not_checked": limited},
        remedy="Keep per-request data (vLLM --save-detailed, SGLang --output-details, AIPerf "
               "profile_export.jsonl).",
    )
