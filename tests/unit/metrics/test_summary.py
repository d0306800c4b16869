"""Run summaries: vLLM key names, failed requests excluded, percentiles, goodput."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.loadgen.records import CountSource, Outcome
from tunegate.metrics import parse_slos, summarize
from tunegate.metrics.summary import concurrency_profile, percentile_key
from tunegate.testing import make_record, token_times

MS = 1_000_000


def _steady(n: int = 10) -> list:
    # Request i is sent at i*100 ms: TTFT 400 + 10*i ms, ITL 20 ms, 32 tokens.
    return [
        make_record(index=i, send_ns=i * 100 * MS,
                    times_ns=token_times(400 + 10 * i, 20, 32, send_ns=i * 100 * MS),
                    input_tokens=64)
        for i in range(n)
    ]


def test_vllm_key_names_and_values() -> None:
    summary = summarize(_steady())
    ttfts = [400 + 10 * i for i in range(10)]
    assert summary["completed"] == 10
    assert summary["failed"] == 0
    assert summary["mean_ttft_ms"] == pytest.approx(np.mean(ttfts))
    assert summary["median_ttft_ms"] == pytest.approx(np.median(ttfts))
    assert summary["std_ttft_ms"] == pytest.approx(np.std(ttfts))
    assert summary["p99_ttft_ms"] == pytest.approx(np.percentile(ttfts, 99))
    assert summary["mean_itl_ms"] == pytest.approx(20.0)
    assert summary["mean_tpot_ms"] == pytest.approx(20.0)
    assert summary["total_output_tokens"] == 320
    assert summary["total_input_tokens"] == 640


def test_throughput_uses_first_send_to_last_end() -> None:
    summary = summarize(_steady())
    last_end = 900 + 490 + 31 * 20  # request 9: sent at 900, TTFT 490, 31 more tokens
    assert summary["duration"] == pytest.approx(last_end / 1000)
    assert summary["request_throughput"] == pytest.approx(10 / (last_end / 1000))
    assert summary["output_throughput"] == pytest.approx(320 / (last_end / 1000))
    assert summary["total_token_throughput"] == pytest.approx(960 / (last_end / 1000))


def test_failed_requests_are_counted_but_never_in_latency() -> None:
    records = [
        *_steady(4),
        make_record(index=9, times_ns=[1 * MS], outcome=Outcome.TRUNCATED),
        make_record(index=10, times_ns=[], outcome=Outcome.SERVER_ERROR),
    ]
    summary = summarize(records)
    assert summary["completed"] == 4
    assert summary["failed"] == 2
    assert summary["outcomes"] == {"complete": 4, "truncated": 1, "server_error": 1,
                                   "protocol_error": 0, "timeout": 0}
    assert summary["mean_ttft_ms"] == pytest.approx(np.mean([400, 410, 420, 430]))


def test_warmup_requests_are_excluded() -> None:
    records = _steady(3)
    records.append(make_record(index=3, times_ns=[5000 * MS], warmup=True))
    summary = summarize(records)
    assert summary["warmup_requests"] == 1
    assert summary["num_prompts"] == 3
    assert summary["mean_ttft_ms"] == pytest.approx(410.0)


def test_requested_percentiles_are_reported() -> None:
    summary = summarize(_steady(), percentiles=(50, 99.9))
    assert "p99.9_ttft_ms" in summary and "p50_itl_ms" in summary
    assert "p90_ttft_ms" not in summary
    assert percentile_key(99.0) == "p99" and percentile_key(99.9) == "p99.9"


def test_empty_distributions_are_none_not_zero() -> None:
    summary = summarize([make_record(times_ns=[], outcome=Outcome.TIMEOUT)])
    assert summary["mean_ttft_ms"] is None
    assert summary["completed"] == 0


def test_goodput_counts_requests_meeting_every_slo() -> None:
    records = _steady()  # TTFT 400..490 ms, TPOT 20 ms
    summary = summarize(records, slos=parse_slos(["ttft:445", "tpot:25"]))
    assert summary["goodput"]["good_requests"] == 5  # TTFT 400, 410, 420, 430, 440
    assert summary["request_goodput"] == pytest.approx(5 / summary["duration"])
    strict = summarize(records, slos=parse_slos(["tpot:19.9"]))
    assert strict["goodput"]["good_requests"] == 0


def test_token_sources_are_reported() -> None:
    records = [make_record(index=0, times_ns=[MS, 2 * MS], output_source=CountSource.EVENTS)]
    assert summarize(records)["output_tokens_source"] == {"events": 1}


def test_concurrency_profile_peak_and_littles_law_mean() -> None:
    records = [
        make_record(index=0, send_ns=0, times_ns=[100 * MS]),
        make_record(index=1, send_ns=50 * MS, times_ns=[150 * MS]),
        make_record(index=2, send_ns=200 * MS, times_ns=[300 * MS]),
    ]
    peak, mean = concurrency_profile(records)
    assert peak == 2
    assert mean == pytest.approx(300 / 300)
