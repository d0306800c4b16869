"""The gauge against a server with programmed timing, over real loopback sockets.

These are the issue's acceptance cases: exact timings through every framing quirk, a server that
ignores stream=true caught by validation, and every failure mode ending as exactly one outcome
with its partial data kept.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import CountSource, Outcome
from tunegate.loadgen.runner import run_workload_async
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.workload import WorkloadConfig, build_workload

pytestmark = pytest.mark.integration


def _workload(
    n: int = 16, concurrency: int = 8, output: int = 32, **extra: object
) -> WorkloadConfig:
    return WorkloadConfig.model_validate({
        "dataset": "synthetic", "num_requests": n, "input_tokens": "24",
        "output_tokens": str(output), "concurrency": concurrency, "seed": 3, **extra})


def _bench(url: str, endpoint: str = "completions", stream: bool = True, **workload: object):
    options = BenchOptions(target=TargetOptions(url=url, endpoint=endpoint, stream=stream,
                                                request_timeout_s=30),
                           workload=_workload(**workload))
    return bench(options)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_programmed_timing_is_measured_within_5_percent_through_every_quirk(
    endpoint: str,
) -> None:
    # First token 400 ms after the request, then one token every 20 ms, 32 tokens; role-only
    # first delta, events split mid-line, CRLF endings and comment lines. Server in its own
    # process so its work never delays the client's clock.
    behaviour = Behaviour.adversarial(ttft_ms=400, itl_ms=20, tokens=32)
    with serve_in_process(behaviour) as url:
        result = _bench(url, endpoint=endpoint)
    s = result.summary
    assert s["completed"] == 16 and s["failed"] == 0
    assert all(r.outcome is Outcome.COMPLETE for r in result.records)
    assert all(r.output_tokens == 32 for r in result.records)
    assert all(r.content_events == 32 for r in result.records)
    assert s["mean_ttft_ms"] == pytest.approx(400, rel=0.05)
    assert s["mean_itl_ms"] == pytest.approx(20, rel=0.05)
    assert s["mean_tpot_ms"] == pytest.approx(20, rel=0.05)
    assert result.validation.valid


def test_role_only_first_delta_is_not_the_first_token(loopback) -> None:
    with loopback(Behaviour(ttft_ms=300, itl_ms=5, tokens=4, role_first=True)) as url:
        result = _bench(url, endpoint="chat", n=4, concurrency=4, output=4)
    # The role-only delta arrives at once; counting it would make TTFT ~0 ms.
    assert result.summary["mean_ttft_ms"] > 290


def test_server_ignoring_stream_true_is_caught(loopback) -> None:
    with loopback(Behaviour(ttft_ms=50, itl_ms=5, tokens=16, ignore_stream=True)) as url:
        result = _bench(url, output=16)
    assert not result.validation.valid
    assert result.validation.codes()[0] == "ttft_equals_e2el"
    assert all(r.response_streamed is False for r in result.records)
    assert "one JSON body" in result.validation.findings[0].message
    doc = result.to_json()
    assert doc["validation"]["valid"] is False
    assert "ttft" in doc["validation"]["invalid_metrics"]


def test_no_stream_reproduces_the_broken_gauge(loopback) -> None:
    with loopback(Behaviour(ttft_ms=50, itl_ms=5, tokens=16)) as url:
        result = _bench(url, stream=False, output=16)
    assert result.summary["mean_ttft_ms"] == pytest.approx(result.summary["mean_e2el_ms"])
    assert "stream=false" in result.validation.findings[0].message


@pytest.mark.parametrize(
    ("behaviour", "outcome", "events", "fragment"),
    [
        (Behaviour(ttft_ms=5, itl_ms=2, tokens=16, error_after=5), Outcome.SERVER_ERROR, 5,
         "in-band error"),
        (Behaviour(ttft_ms=5, itl_ms=2, tokens=16, event_error_after=3), Outcome.SERVER_ERROR, 3,
         "event: error"),
        (Behaviour(ttft_ms=5, itl_ms=2, tokens=16, truncate_after=7), Outcome.TRUNCATED, 7,
         "without [DONE]"),
        (Behaviour(ttft_ms=5, itl_ms=2, tokens=16, malformed_after=4), Outcome.PROTOCOL_ERROR, 4,
         "unreadable chunk"),
    ],
)
def test_mid_stream_failures_are_failed_with_partial_data_kept(
    loopback, behaviour: Behaviour, outcome: Outcome, events: int, fragment: str
) -> None:
    with loopback(behaviour) as url:
        result = _bench(url, n=4, concurrency=2, output=16)
    assert result.summary["completed"] == 0
    assert result.summary["failed"] == 4
    for record in result.records:
        assert record.outcome is outcome
        assert record.content_events == events  # what arrived before the failure is kept
        assert record.t_first_ns is not None
        assert fragment in (record.error or "")
    assert result.summary["mean_ttft_ms"] is None  # failures never enter latency statistics


def test_http_errors_are_server_errors_with_the_message(loopback) -> None:
    with loopback(Behaviour(ttft_ms=5, itl_ms=1, tokens=4, http_error_every=2)) as url:
        result = _bench(url, n=8, concurrency=1, output=4)
    failed = [r for r in result.records if not r.outcome.is_success]
    assert len(failed) == 4
    assert all(r.outcome is Outcome.SERVER_ERROR and r.http_status == 500 for r in failed)
    assert all("programmed failure" in (r.error or "") for r in failed)


def test_timeout_keeps_what_arrived(loopback) -> None:
    with loopback(Behaviour(ttft_ms=50, itl_ms=100, tokens=20)) as url:
        options = BenchOptions(target=TargetOptions(url=url, request_timeout_s=0.5),
                               workload=_workload(n=2, concurrency=2, output=20))
        result = bench(options)
    for record in result.records:
        assert record.outcome is Outcome.TIMEOUT
        assert 3 <= record.content_events <= 6


def test_connection_refused_is_a_server_error() -> None:
    config = ClientConfig(base_url="http://127.0.0.1:9", model="m", request_timeout_s=5)
    workload = build_workload(_workload(n=2, concurrency=2))
    result = run_workload(workload, config)
    assert [r.outcome for r in result.records] == [Outcome.SERVER_ERROR] * 2
    assert "cannot connect" in (result.records[0].error or "")


def test_without_usage_a_named_tokenizer_counts_output(loopback, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    model = tokenizers.models.WordLevel({"[UNK]": 0, "token": 1}, unk_token="[UNK]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    behaviour = Behaviour(ttft_ms=5, itl_ms=1, tokens=8, tokens_per_event=2, include_usage=False)
    with loopback(behaviour) as url:
        options = BenchOptions(target=TargetOptions(url=url),
                               workload=_workload(n=2, concurrency=2, output=8,
                                                  tokenizer=str(path)))
        counted = bench(options)
        plain = _bench(url, n=2, concurrency=2, output=8)
    assert all(r.output_tokens == 8 and r.output_tokens_source is CountSource.TOKENIZER
               for r in counted.records)
    # Without usage or tokenizer: 4 events of 2 tokens are counted as 4, and flagged.
    assert all(r.output_tokens == 4 and r.output_tokens_source is CountSource.EVENTS
               for r in plain.records)
    assert "token_count_approximate" in plain.validation.codes()


def test_interrupt_keeps_every_record_measured_so_far(loopback) -> None:
    behaviour = Behaviour(ttft_ms=10, itl_ms=50, tokens=40)  # each request takes ~2 s
    with loopback(behaviour) as url:
        config = ClientConfig(base_url=url, model="loopback")
        workload = build_workload(_workload(n=8, concurrency=4, output=40))

        async def interrupted():
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(0.5, stop.set)
            return await run_workload_async(workload, config, stop=stop)

        result = asyncio.run(interrupted())
    assert result.interrupted
    assert len(result.records) == 4 and result.not_sent == 4
    for record in result.records:
        assert record.outcome is Outcome.TRUNCATED
        assert "interrupted" in (record.error or "")
        assert 5 <= record.content_events <= 12


def test_open_loop_rate_spreads_the_sends(loopback) -> None:
    with loopback(Behaviour(ttft_ms=1, itl_ms=1, tokens=2)) as url:
        options = BenchOptions(
            target=TargetOptions(url=url),
            workload=WorkloadConfig.model_validate({
                "dataset": "synthetic", "num_requests": 20, "input_tokens": "8",
                "output_tokens": "2", "request_rate": 40.0, "arrival": "constant"}))
        result = bench(options)
    sends = sorted(r.t_send_ns for r in result.records)
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(sends)]
    assert statistics.median(gaps_ms) == pytest.approx(25.0, abs=3.0)


def test_duration_stops_sending_new_requests(loopback) -> None:
    with loopback(Behaviour(ttft_ms=50, itl_ms=1, tokens=2)) as url:
        options = BenchOptions(target=TargetOptions(url=url), duration_s=0.5,
                               workload=_workload(n=1000, concurrency=2, output=2))
        result = bench(options)
    assert 10 <= len(result.records) <= 30
    assert result.run.not_sent == 1000 - len(result.records)


def test_two_worker_processes_measure_every_request() -> None:
    with serve_in_process(Behaviour(ttft_ms=100, itl_ms=5, tokens=8)) as url:
        options = BenchOptions(target=TargetOptions(url=url), workers=2,
                               workload=_workload(n=12, concurrency=4, output=8))
        result = bench(options)
    assert sorted(r.index for r in result.records) == list(range(12))
    assert result.run.workers == 2 and len(result.run.worker_lags) == 2
    assert result.summary["mean_ttft_ms"] == pytest.approx(100, rel=0.1)
    assert result.summary["max_concurrent_requests"] <= 4


def _counter_failing_mid_run_in_second_process(marker: str) -> Callable[[str], int]:
    """The first worker counts words forever; the second one's counter fails on its 2nd use."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        first = True
    except FileExistsError:
        first = False
    calls = [0]

    def count(text: str) -> int:
        calls[0] += 1
        if not first and calls[0] >= 2:
            raise RuntimeError("tokenizer exploded in the worker")
        return len(text.split())

    return count


def test_a_crashed_worker_is_reported_and_the_others_records_kept(tmp_path: Path) -> None:
    factory = functools.partial(_counter_failing_mid_run_in_second_process,
                                str(tmp_path / "marker"))
    with serve_in_process(Behaviour(ttft_ms=10, itl_ms=20, tokens=10)) as url:
        config = ClientConfig(base_url=url, model="loopback")
        workload = build_workload(_workload(n=40, concurrency=2, output=10))
        result = run_workload(workload, config, workers=2, counter_factory=factory)
    assert len(result.worker_errors) == 1
    assert "tokenizer exploded" in result.worker_errors[0]
    assert result.interrupted
    assert result.records, "the surviving worker's records are kept"
    assert len(result.records) < 20  # it was stopped early, not left running
    assert all(r.index % 2 == result.records[0].index % 2 for r in result.records)


def test_workers_keep_the_offered_concurrency_to_the_end() -> None:
    from tunegate.loadgen.workers import split_workload

    workload = build_workload(_workload(n=660, concurrency=16, output=4))
    parts = split_workload(workload, 6)
    for part in parts:
        slots = part.schedule.max_concurrency or 0
        assert len(part.requests) / slots == pytest.approx(660 / 16, rel=0.1)
