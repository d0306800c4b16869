"""Gauge checks on records: each fires on the broken case and stays silent on the healthy one."""

from __future__ import annotations

from tunegate.gauge import Severity, validate_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import CountSource, Outcome
from tunegate.testing import make_record, token_times

MS = 1_000_000


def _healthy(n: int = 20) -> list:
    return [make_record(index=i, send_ns=i * MS, times_ns=token_times(400, 20, 32, i * MS))
            for i in range(n)]


def _not_streamed(n: int = 20, *, asked: bool, answered: bool) -> list:
    # One content event per request at the end: what stream=false (or a deaf server) gives.
    return [make_record(index=i, send_ns=i * MS, times_ns=[i * MS + 9_557_600_000],
                        output_tokens=158, streamed=asked, response_streamed=answered)
            for i in range(n)]


def test_healthy_streams_pass_without_findings() -> None:
    report = validate_records(_healthy())
    assert report.valid
    assert report.findings == ()


def test_ttft_equals_e2el_when_streaming_was_off() -> None:
    report = validate_records(_not_streamed(asked=False, answered=False))
    assert not report.valid
    finding = report.findings[0]
    assert finding.code == "ttft_equals_e2el"
    assert finding.severity is Severity.ERROR
    assert "stream=false" in finding.message
    assert finding.evidence["requests_equal"] == 20
    assert finding.evidence["median_ttft_ms"] == finding.evidence["median_e2el_ms"] == 9557.6
    assert {"ttft", "tpot", "itl"} <= report.invalid_metrics


def test_ttft_equals_e2el_names_a_server_that_ignored_stream_true() -> None:
    report = validate_records(_not_streamed(asked=True, answered=False))
    finding = report.findings[0]
    assert finding.code == "ttft_equals_e2el"
    assert "answered 20 streaming requests with one JSON body" in finding.message


def test_single_token_outputs_do_not_trigger_ttft_equals_e2el() -> None:
    records = [make_record(index=i, times_ns=[400 * MS]) for i in range(20)]
    assert validate_records(records).valid


def test_a_few_equal_requests_are_not_a_broken_gauge() -> None:
    records = _healthy(19) + _not_streamed(1, asked=True, answered=True)
    assert "ttft_equals_e2el" not in validate_records(records).codes()


def test_error_rate_warns_then_invalidates() -> None:
    failing = [make_record(index=100 + i, times_ns=[], outcome=Outcome.SERVER_ERROR,
                           error="HTTP 500: boom") for i in range(2)]
    warn = validate_records(_healthy(18) + failing)
    assert warn.valid and warn.findings[0].code == "error_rate"
    assert warn.findings[0].severity is Severity.WARNING
    assert "HTTP 500: boom" in warn.findings[0].message
    many = [make_record(index=i, times_ns=[], outcome=Outcome.TIMEOUT) for i in range(10)]
    assert not validate_records(_healthy(5) + many).valid


def test_client_saturation_is_reported_with_evidence() -> None:
    lag = LagSummary(samples=100, p50_ms=0.4, p99_ms=7.5, max_ms=20.0,
                     over_1ms_fraction=0.2, cpu_busy_fraction=0.98)
    report = validate_records(_healthy(), lag)
    finding = next(f for f in report.findings if f.code == "client_saturated")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["lag_p99_ms"] == 7.5
    assert "--workers" in finding.remedy
    calm = LagSummary(100, 0.1, 0.5, 0.9, 0.0, 0.2)
    assert validate_records(_healthy(), calm).findings == ()


def test_a_lagging_client_says_which_of_its_times_the_kernel_took() -> None:
    def finding(kernel_receipts: float | None):  # type: ignore[no-untyped-def]
        lag = LagSummary(samples=100, p50_ms=2.0, p99_ms=9.0, max_ms=30.0,
                         over_1ms_fraction=0.5, cpu_busy_fraction=0.99,
                         kernel_receipts=kernel_receipts)
        report = validate_records(_healthy(), lag)
        return next(f for f in report.findings if f.code == "client_saturated")

    for read_timed in (finding(None), finding(0.98)):  # one read timed late is enough to doubt
        assert "timestamps may be late" in read_timed.message
    kernel_timed = finding(1.0)
    assert "receipt times are the kernel's" in kernel_timed.message
    assert "share the newest one's time" in kernel_timed.message
    assert kernel_timed.evidence["kernel_receipts"] == 1.0
    # Events that queued together while the client was busy share a time: gaps still doubted.
    assert kernel_timed.invalidates == finding(None).invalidates == ("itl",)


def test_event_counted_tokens_are_flagged_approximate() -> None:
    records = [make_record(index=0, times_ns=token_times(400, 20, 4),
                           output_source=CountSource.EVENTS)]
    assert validate_records(records).codes() == ["token_count_approximate"]


def test_warmup_records_are_not_validated() -> None:
    records = _healthy() + _not_streamed(30, asked=False, answered=False)
    for record in records[20:]:
        record.warmup = True
    assert validate_records(records).valid
