"""One soak window: its records judged by the gauge, reduced to the values the watch follows.

The records are hand-built (a closed loop of one request at a time at a chosen throughput), so
every expected value is exact: 8 output tokens at 20 tok/s are 400-ms requests, 150 of them in a
60-s window, each with its first token at 20 ms.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tunegate.gauge import validate_records
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.soak.window import CLIENT_SERIES, SERVER_SERIES, judge_window, server_died
from tunegate.stats.drift import DEFAULT_SERIES
from tunegate.testing import make_record
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.spec import Workload

MS = 1_000_000
OUT_TOKENS = 8
LEVEL = 20.0  # tok/s
TTFT_MS = 20.0
REQUEST_MS = OUT_TOKENS * 1000 / LEVEL  # 400 ms
WINDOW_S = 60.0
SENT = round(WINDOW_S * 1000 / REQUEST_MS)  # 150
CLOSED = build_workload(WorkloadConfig.model_validate({
    "dataset": "synthetic", "num_requests": 400, "input_tokens": "fixed:32",
    "output_tokens": f"fixed:{OUT_TOKENS}", "concurrency": 1}))
REFUSED = "cannot connect to http://127.0.0.1:8000: Connection refused"


def closed_loop(workload: Workload = CLOSED, *, stream: bool = True,
                failing: frozenset[int] = frozenset()) -> list[RequestRecord]:
    """One request at a time for ``WINDOW_S``; request ``n`` fails (HTTP 500 after 5 ms) when
    ``n % 4`` is in ``failing``. Non-streamed answers arrive as one body at the end."""
    records, t = [], 0
    for n, spec in enumerate(workload.requests):
        if t >= WINDOW_S * 1e9:
            break
        length, first = round(REQUEST_MS * MS), round(TTFT_MS * MS)
        if n % 4 in failing:
            records.append(dataclasses.replace(
                make_record(index=spec.index, send_ns=t, end_ns=t + 5 * MS, output_tokens=0,
                            outcome=Outcome.SERVER_ERROR, error="HTTP 500: overloaded\ntrace"),
                http_status=500))
            t += 5 * MS
            continue
        if stream:
            step = (length - first) / (OUT_TOKENS - 1)
            times = [t + first + round(k * step) for k in range(OUT_TOKENS)]
        else:
            times = [t + length]
        records.append(make_record(index=spec.index, send_ns=t, times_ns=times,
                                   output_tokens=OUT_TOKENS, streamed=stream,
                                   response_streamed=stream))
        t += length
    return records


def refused(n: int) -> list[RequestRecord]:
    """``n`` requests that found nobody listening: no status, no token."""
    return [make_record(index=i, send_ns=i * MS, end_ns=i * MS + MS // 2, output_tokens=0,
                        outcome=Outcome.SERVER_ERROR, error=REFUSED) for i in range(n)]


def block(**fields: Any) -> dict[str, Any]:
    """A ``server_metrics`` block as the scraper writes it (three scrapes, no restart)."""
    return {"source": "http://127.0.0.1:8000/metrics", "engine": "vllm", "scrapes": 3,
            "failed_scrapes": 0, "covers_run": True, "resets": [], "processes": 1,
            "one_process": True, "process_starts": [{"t_s": 0.0, "start_time": 1.7e9}],
            "derived": {}, **fields}


def test_the_series_are_the_watched_defaults() -> None:
    assert [*CLIENT_SERIES, "error_rate", *SERVER_SERIES] == [s.name for s in DEFAULT_SERIES]


def test_a_streamed_window_has_a_value_for_every_client_series() -> None:
    window = judge_window(3, 180.0, None, closed_loop(), None, CLOSED)
    assert window.valid, window.validation.codes()
    tpot = (REQUEST_MS - TTFT_MS) / (OUT_TOKENS - 1)
    client = {k: v for k, v in window.values.items() if k not in SERVER_SERIES}
    assert client == pytest.approx({
        "output_throughput": LEVEL, "median_ttft_ms": TTFT_MS, "p99_ttft_ms": TTFT_MS,
        "median_tpot_ms": tpot, "p99_tpot_ms": tpot,
        "median_e2el_ms": REQUEST_MS, "p99_e2el_ms": REQUEST_MS, "error_rate": 0.0})
    assert all(window.values[key] is None for key in SERVER_SERIES)  # no /metrics scraped
    assert (window.index, window.t_s, window.sent, window.failed) == (3, 180.0, SENT, 0)
    assert window.duration_s == pytest.approx(WINDOW_S)
    assert not window.restarted and not window.short and window.errors == ()


def test_a_window_row_is_what_soak_json_lists() -> None:
    window = judge_window(7, 420.0, "2026-01-01T00:07:00+00:00", closed_loop(stream=False),
                          None, CLOSED, short=True)
    row = window.to_dict()
    assert row == {
        "window": 7, "t_s": 420.0, "duration_s": 60.0, "wall_time": "2026-01-01T00:07:00+00:00",
        "sent": SENT, "failed": 0, "valid": False, "findings": window.validation.codes(),
        "invalid_metrics": sorted(window.validation.invalid_metrics), "restarted": False,
        "short": True, "errors": [], "values": window.values}
    assert "ttft_equals_e2el" in row["findings"]


def test_a_non_streamed_window_drops_exactly_what_the_gauge_invalidates() -> None:
    records = closed_loop(stream=False)
    window = judge_window(0, 0.0, None, records, None, CLOSED)
    report = validate_records(records, None, max_concurrency=1)
    assert not window.valid
    assert window.validation.codes() == report.codes() == ["ttft_equals_e2el"]
    invalid = window.validation.invalid_metrics
    # TTFT here is the whole latency: TTFT, TPOT (and what is built on them) measure nothing;
    # the request's total latency and the tokens delivered per second are still true.
    assert {"ttft", "tpot"} <= invalid
    assert not invalid & {"e2el", "throughput"}
    dropped = {key for key, value in window.values.items() if value is None}
    assert dropped == {key for key, metric in CLIENT_SERIES.items() if metric in invalid} \
        | set(SERVER_SERIES)
    assert dropped == {"median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
                       *SERVER_SERIES}
    assert window.values["output_throughput"] == pytest.approx(LEVEL)
    assert window.values["median_e2el_ms"] == pytest.approx(REQUEST_MS)
    assert window.values["p99_e2el_ms"] == pytest.approx(REQUEST_MS)
    assert window.values["error_rate"] == 0.0


def test_a_window_invalid_without_naming_metrics_drops_every_client_value() -> None:
    """An open loop asked for 5 requests/s that sent 10/s measured another load than its label
    (offered_load_mismatch names no metric): no client value is trusted; the error rate and the
    server's own figures still are."""
    open_loop = build_workload(WorkloadConfig.model_validate({
        "dataset": "synthetic", "num_requests": 600, "input_tokens": "fixed:32",
        "output_tokens": f"fixed:{OUT_TOKENS}", "request_rate": 5.0, "arrival": "constant"}))
    records = [make_record(index=i, send_ns=i * 100 * MS,
                           times_ns=[i * 100 * MS + (20 + 40 * k) * MS for k in range(8)])
               for i in range(600)]
    metrics = block(derived={"preemptions": 0.0, "kv_cache_usage_peak": 0.3})
    window = judge_window(0, 0.0, None, records, metrics, open_loop)
    assert not window.valid and window.validation.invalid_metrics == set()
    assert "offered_load_mismatch" in window.validation.codes()
    assert all(window.values[key] is None for key in CLIENT_SERIES)
    assert window.values["error_rate"] == 0.0
    assert window.values["preemptions"] == 0.0
    assert window.values["kv_cache_usage_peak"] == 0.3


def test_error_rate_is_failed_over_sent_and_a_majority_of_failures_drops_throughput() -> None:
    records = closed_loop(failing=frozenset({3}))
    quarter = judge_window(0, 0.0, None, records, None, CLOSED)
    assert quarter.sent == len(records)
    assert quarter.failed == sum(1 for r in records if r.outcome is Outcome.SERVER_ERROR) > 0
    share = quarter.values["error_rate"]
    assert share == pytest.approx(quarter.failed / quarter.sent)
    assert share is not None and 0.24 < share < 0.26
    assert quarter.valid  # a warning: the surviving requests still measure the server
    assert quarter.values["output_throughput"] is not None
    assert quarter.errors == ("HTTP 500: overloaded",)  # first line of each distinct error

    most = judge_window(0, 0.0, None, closed_loop(failing=frozenset({1, 2, 3})), None, CLOSED)
    share = most.values["error_rate"]
    assert share == pytest.approx(most.failed / most.sent)
    assert share is not None and share > 0.5
    assert not most.valid and most.validation.invalid_metrics == {"throughput"}
    assert most.values["output_throughput"] is None
    assert most.values["median_ttft_ms"] == pytest.approx(TTFT_MS)  # the survivors' latency


def test_an_empty_window_has_no_values_at_all() -> None:
    window = judge_window(0, 0.0, None, [], None, CLOSED)
    assert window.sent == 0 and window.duration_s == 0.0
    assert all(value is None for value in window.values.values())


def test_the_servers_derived_metrics_are_its_series() -> None:
    metrics = block(derived={"preemptions": 4, "queue_time_mean_s": 0.125,
                             "kv_cache_usage_peak": 0.875, "ttft_mean_s": 0.02})
    window = judge_window(0, 0.0, None, closed_loop(), metrics, CLOSED)
    assert {k: window.values[k] for k in SERVER_SERIES} == {
        "preemptions": 4.0, "queue_time_mean_s": 0.125, "kv_cache_usage_peak": 0.875}
    assert isinstance(window.values["preemptions"], float)
    assert "ttft_mean_s" not in window.values  # not a watched series

    missing = block(derived={"preemptions": None, "kv_cache_usage_peak": "n/a"})
    values = judge_window(0, 0.0, None, closed_loop(), missing, CLOSED).values
    assert all(values[k] is None for k in SERVER_SERIES)


RESET = {"metric": "vllm:request_success_total", "before": 912.0, "after": 3.0, "t_s": 31.5}


@pytest.mark.parametrize(("fields", "restarted"), [
    ({}, False),
    ({"resets": [RESET]}, True),  # a counter went backwards (llama.cpp: no start time)
    ({"resets": [RESET], "processes": None, "one_process": None, "process_starts": []}, True),
    ({"processes": 2, "one_process": True,  # a later start time that stayed: a new process
      "process_starts": [{"t_s": 0.0, "start_time": 1.7e9},
                         {"t_s": 30.0, "start_time": 1.7e9 + 600}]}, True),
    ({"processes": 2, "one_process": False,  # two replicas behind one URL answering in turn
      "process_starts": [{"t_s": 0.0, "start_time": 1.7e9},
                         {"t_s": 5.0, "start_time": 1.7e9 - 50},
                         {"t_s": 10.0, "start_time": 1.7e9}]}, False),
], ids=["steady", "counter-reset", "reset-no-start-time", "new-process", "replicas"])
def test_restarted_means_a_counter_reset_or_a_new_process(fields: dict[str, Any],
                                                          restarted: bool) -> None:
    window = judge_window(0, 0.0, None, closed_loop(), block(**fields), CLOSED)
    assert window.restarted is restarted
    assert ("server_restarted" in window.validation.codes()) is restarted


def test_no_server_metrics_is_no_restart() -> None:
    assert not judge_window(0, 0.0, None, closed_loop(), None, CLOSED).restarted


def test_a_restarted_window_keeps_no_client_value_but_the_servers_own() -> None:
    metrics = block(resets=[RESET], derived={"preemptions": 2.0})
    window = judge_window(0, 0.0, None, closed_loop(), metrics, CLOSED)
    assert window.restarted and not window.valid
    assert {"ttft", "tpot", "e2el", "throughput"} <= window.validation.invalid_metrics
    assert all(window.values[key] is None for key in CLIENT_SERIES)
    assert window.values["error_rate"] == 0.0
    assert window.values["preemptions"] == 2.0


def test_server_died_when_every_request_failed_before_any_response() -> None:
    assert server_died(refused(10))
    timed_out = [dataclasses.replace(r, outcome=Outcome.TIMEOUT) for r in refused(3)]
    assert server_died(timed_out)

    answered_503 = [*refused(9), dataclasses.replace(refused(1)[0], http_status=503)]
    assert not server_died(answered_503)  # someone answers, if only to refuse
    one_token = [*refused(9), make_record(index=9, send_ns=0, times_ns=[5 * MS], end_ns=9 * MS,
                                          outcome=Outcome.TRUNCATED)]
    assert not server_died(one_token)
    assert not server_died([*refused(9), *closed_loop()[:1]])
    assert not server_died(closed_loop(failing=frozenset({0, 1, 2, 3})))  # HTTP 500s
    assert not server_died([])  # nothing sent is not a death


def test_a_dead_window_counts_every_request_as_failed_and_names_the_error() -> None:
    window = judge_window(5, 300.0, None, refused(40), None, CLOSED)
    assert (window.sent, window.failed) == (40, 40)
    assert window.values["error_rate"] == 1.0
    assert window.errors == (REFUSED,)
    assert all(window.values[key] is None for key in CLIENT_SERIES)
