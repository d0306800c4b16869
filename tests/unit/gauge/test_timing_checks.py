"""ttft_equals_e2el (summary path), ttft_missing and clock_anomaly: firing and silent cases."""

from __future__ import annotations

from tunegate.gauge import Dataset, RequestSample, RunContext, Severity, Summary, validate_dataset
from tunegate.gauge.dataset import Stat


def _stat(mean: float, p99: float) -> Stat:
    return Stat(mean=mean, median=mean, percentiles={99.0: p99})


def _summary(ttft: Stat | None, e2el: Stat, **kw: float) -> Dataset:
    fields = {"completed": 100, "failed": 0, "duration_s": 100.0, "mean_output_tokens": 158.54,
              "mean_input_tokens": 62.95} | kw
    return Dataset("vllm", Summary(ttft_ms=ttft, e2el_ms=e2el, **fields))  # type: ignore[arg-type]


def _req(ttft: float | None, e2el: float, out: int = 10, **kw: object) -> RequestSample:
    return RequestSample(ok=True, ttft_s=ttft, e2el_s=e2el, input_tokens=60, output_tokens=out,
                         **kw)  # type: ignore[arg-type]


def test_summary_ttft_equal_to_e2el_is_rejected() -> None:
    report = validate_dataset(_summary(_stat(9557.6, 15000.0), _stat(9557.6, 15000.0)))
    finding = report.findings[0]
    assert finding.code == "ttft_equals_e2el" and finding.severity is Severity.ERROR
    assert finding.evidence["basis"] == "summary"
    assert "ttft" in report.invalid_metrics and not report.valid


def test_summary_with_distinct_ttft_and_e2el_passes() -> None:
    report = validate_dataset(_summary(_stat(1100.0, 2000.0), _stat(8960.0, 15000.0)))
    assert "ttft_equals_e2el" not in report.codes()
    assert report.valid


def test_single_token_summaries_are_not_a_broken_gauge() -> None:
    data = _summary(_stat(50.0, 80.0), _stat(50.0, 80.0), mean_output_tokens=1.0)
    assert "ttft_equals_e2el" not in validate_dataset(data).codes()


def test_ttft_absent_or_zero_in_a_summary_is_ttft_missing() -> None:
    absent = validate_dataset(_summary(None, _stat(900.0, 1500.0)))
    zero = validate_dataset(_summary(_stat(0.0, 0.0), _stat(900.0, 1500.0)))
    for report, state in ((absent, "absent"), (zero, "reported as 0")):
        finding = next(f for f in report.findings if f.code == "ttft_missing")
        assert finding.severity is Severity.ERROR and finding.evidence["ttft"] == state
        assert "ttft_equals_e2el" not in report.codes()


def test_some_requests_without_ttft_warn_all_of_them_invalidate() -> None:
    some = [_req(0.2, 1.0)] * 18 + [_req(None, 1.0)] * 2
    all_missing = [_req(None, 1.0)] * 20
    warn = validate_dataset(Dataset("vllm", Summary(completed=20), tuple(some)))
    error = validate_dataset(Dataset("vllm", Summary(completed=20), tuple(all_missing)))
    assert next(f for f in warn.findings if f.code == "ttft_missing").severity is Severity.WARNING
    assert not error.valid and "ttft_missing" in error.codes()
    healthy = validate_dataset(Dataset("vllm", Summary(completed=20), (_req(0.2, 1.0),) * 20))
    assert "ttft_missing" not in healthy.codes()


def test_single_chunk_answers_to_a_streaming_request_are_named() -> None:
    reqs = tuple(_req(1.0255, 1.0255, out=32, chunks=1, stream_requested=True) for _ in range(8))
    finding = validate_dataset(Dataset("aiperf", Summary(completed=8), reqs)).findings[0]
    assert finding.code == "ttft_equals_e2el"
    assert "8 responses arrived as a single chunk" in finding.message


def test_clock_anomalies_are_errors() -> None:
    cases = {
        "ttft_negative": _req(-0.1, 1.0),
        "e2el_before_ttft": _req(2.0, 1.0),
        "itl_negative": _req(0.2, 1.0, itls_s=(0.5, -0.1)),
        "gaps_exceed_e2el": _req(0.2, 1.0, itls_s=(0.5, 0.5)),
    }
    for key, bad in cases.items():
        reqs = (_req(0.2, 1.0, itls_s=(0.4, 0.4)),) * 9 + (bad,)
        report = validate_dataset(Dataset("vllm", Summary(completed=10, duration_s=5.0), reqs))
        finding = next(f for f in report.findings if f.code == "clock_anomaly")
        assert key in finding.evidence and finding.severity is Severity.ERROR, key


def test_a_request_longer_than_the_run_is_a_clock_anomaly() -> None:
    reqs = (_req(0.2, 1.0),) * 5 + (_req(0.2, 30.0),)
    report = validate_dataset(Dataset("vllm", Summary(completed=6, duration_s=10.0), reqs))
    assert "request_longer_than_run_s" in next(
        f for f in report.findings if f.code == "clock_anomaly").evidence
    sane = validate_dataset(Dataset("vllm", Summary(completed=6, duration_s=40.0), reqs))
    assert "clock_anomaly" not in sane.codes()


def test_summary_clock_anomalies() -> None:
    data = _summary(_stat(2000.0, 3000.0), _stat(1000.0, 1500.0))
    assert "mean_ttft_above_mean_e2el_ms" in next(
        f for f in validate_dataset(data).findings if f.code == "clock_anomaly").evidence
    assert "clock_anomaly" in validate_dataset(
        _summary(_stat(100.0, 300.0), _stat(1000.0, 1500.0), duration_s=0.0)).codes()


def test_context_stream_flag_names_the_cause() -> None:
    data = Dataset("vllm", _summary(_stat(9557.6, 1.5e4), _stat(9557.6, 1.5e4)).summary,
                   context=RunContext(stream_requested=False))
    assert "stream=false" in validate_dataset(data).findings[0].message
