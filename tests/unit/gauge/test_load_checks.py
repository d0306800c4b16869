"""littles_law_violation, error_rate (summary), too_few_samples and warmup_included."""

from __future__ import annotations

import pytest

from tunegate.gauge import Dataset, RequestSample, RunContext, Severity, Summary, validate_dataset
from tunegate.gauge.dataset import Stat


def _run(completed: int, duration: float, e2el_ms: float, cap: int | None = 16,
         peak: float | None = None) -> Dataset:
    summary = Summary(completed=completed, failed=0, duration_s=duration,
                      e2el_ms=Stat(mean=e2el_ms), max_concurrent_requests=peak)
    return Dataset("vllm", summary, context=RunContext(max_concurrency=cap))


def _codes(data: Dataset) -> list[str]:
    return validate_dataset(data).codes()


def test_littles_law_holds_for_the_articles_run() -> None:
    # 1319 requests in 792.4 s x 9.5576 s = 15.9 in flight at concurrency 16.
    assert "littles_law_violation" not in _codes(_run(1319, 792.4, 9557.6))


def test_more_in_flight_than_the_cap_is_an_error() -> None:
    report = validate_dataset(_run(1319, 400.0, 9557.6))  # 31.5 in flight
    finding = next(f for f in report.findings if f.code == "littles_law_violation")
    assert finding.severity is Severity.ERROR and not report.valid
    assert finding.evidence["implied_concurrency"] > 31
    peak = validate_dataset(_run(1319, 792.4, 9557.6, peak=17))
    assert "observed peak 17" in next(f for f in peak.findings
                                      if f.code == "littles_law_violation").message


def test_a_closed_loop_far_below_its_slots_warns() -> None:
    finding = next(f for f in validate_dataset(_run(1319, 2000.0, 9557.6)).findings
                   if f.code == "littles_law_violation")  # 6.3 in flight
    assert finding.severity is Severity.WARNING


def test_littles_law_needs_the_configured_concurrency() -> None:
    report = validate_dataset(_run(1319, 400.0, 9557.6, cap=None))
    assert "littles_law_violation" in dict(report.not_checked)


def test_error_rate_from_a_summary() -> None:
    summary = Summary(completed=40, failed=60)
    report = validate_dataset(Dataset("vllm", summary))
    finding = next(f for f in report.findings if f.code == "error_rate")
    assert finding.severity is Severity.ERROR and finding.evidence["share"] == 0.6
    assert "error_rate" not in _codes(Dataset("vllm", Summary(completed=100, failed=0)))


def _p99_of(completed: int) -> Dataset:
    return Dataset("vllm", Summary(completed=completed, e2el_ms=Stat(1.0, 1.0, {99.0: 2.0})))


def test_a_p99_beyond_the_data_is_named_as_the_maximum() -> None:
    finding = next(f for f in validate_dataset(_p99_of(40)).findings
                   if f.code == "too_few_samples")
    assert finding.severity is Severity.INFO
    assert finding.evidence["tail_samples"] == {"e2el": {"p99": pytest.approx(0.4)}}
    assert finding.evidence["requests_needed_for_p99"] == 100
    assert "p99 of 40 requests" in finding.message and "maximum" in finding.message


def test_a_thin_but_real_tail_is_not_flagged() -> None:
    # p99 of 200 requests rests on 2 of them: imprecise, but a percentile. Every tool quotes
    # p99 whatever the run's size; flagging this on nearly every report teaches users to ignore
    # the gauge.
    assert "too_few_samples" not in _codes(_p99_of(200))
    assert "too_few_samples" not in _codes(_p99_of(100))


def test_enough_requests_for_the_tail_give_no_finding() -> None:
    assert "too_few_samples" not in _codes(_p99_of(1319))


def test_pooled_itl_percentiles_are_not_judged_per_request() -> None:
    itl_only = Dataset("vllm", Summary(completed=40, itl_ms=Stat(1.0, 1.0, {99.0: 2.0})),
                       context=RunContext(percentiles=(99.0,)))
    assert "too_few_samples" not in _codes(itl_only)


def _wave(first_s: float, n: int = 80) -> tuple[RequestSample, ...]:
    return tuple(RequestSample(ok=True, ttft_s=0.1, e2el_s=first_s if i < 8 else 1.0,
                               input_tokens=50, output_tokens=100, start_s=float(i))
                 for i in range(n))


def test_a_cold_first_wave_is_warmup_included() -> None:
    data = Dataset("vllm", Summary(completed=80), _wave(5.0), RunContext(max_concurrency=8))
    finding = next(f for f in validate_dataset(data).findings if f.code == "warmup_included")
    assert finding.evidence["ratio"] == 5.0 and finding.evidence["first_wave"] == 8
    warm = Dataset("vllm", Summary(completed=80), _wave(1.1), RunContext(max_concurrency=8))
    assert "warmup_included" not in _codes(warm)
    excluded = Dataset("vllm", Summary(completed=80), _wave(5.0),
                       RunContext(max_concurrency=8, warmup_excluded=8))
    assert "warmup_included" not in _codes(excluded)


def test_summary_only_says_exactly_what_ran_and_what_could_not() -> None:
    report = validate_dataset(_run(1319, 792.4, 9557.6))
    info = next(f for f in report.findings if f.code == "summary_only")
    assert info.severity is Severity.INFO
    assert set(info.evidence["not_checked"]) == {
        "token_count_mismatch", "token_count_approximate", "warmup_included"}
    assert dict(report.not_checked)["warmup_included"].startswith("needs per-request")
    # A check listed as judged never also appears as not checked, and vice versa.
    assert not set(info.evidence["judged"]) & set(dict(report.not_checked))
    assert "littles_law_violation" in info.evidence["judged"]


def test_summary_only_does_not_claim_a_check_it_could_not_run() -> None:
    # No E2EL and no TPOT to derive it from: TTFT == E2EL cannot be judged.
    summary = Summary(completed=100, duration_s=10.0, ttft_ms=Stat(mean=100.0))
    report = validate_dataset(Dataset("vllm", summary))
    info = next(f for f in report.findings if f.code == "summary_only")
    assert "ttft_equals_e2el" in dict(report.not_checked)
    assert "ttft_equals_e2el" not in info.evidence["judged"]
    assert "ttft_equals_e2el" not in info.message
