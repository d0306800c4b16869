"""The columnar gauge finds what the per-request gauge found, to the evidence number.

``tests/fixtures/gauge_table/expected_findings.json`` holds the reports of the gauge as it was
before it read a :class:`~tunegate.gauge.table.SampleTable` (one Python object per request),
computed once from the record sets below. Equality with that frozen copy proves the columnar
checks unchanged, not merely self-consistent. Regenerate it (``python
tests/unit/gauge/test_gauge_table_equivalence.py``) only when a finding is meant to change.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tunegate.gauge import (
    Dataset,
    RequestSample,
    RooflineLimits,
    RunContext,
    ValidationReport,
    validate_dataset,
    validate_records,
)
from tunegate.gauge.dataset import summary_from_samples
from tunegate.gauge.from_records import dataset_from_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.testing import make_record

__all__ = ["CASES", "report_of"]

EXPECTED = (Path(__file__).resolve().parents[2] / "fixtures" / "gauge_table"
            / "expected_findings.json")
MS = 1_000_000
REL = 1e-9
"""Evidence numbers agree to this relative difference (summation order may differ)."""


def _times(rng: random.Random, send: int, ttft_ms: float, itl_ms: float, n: int,
           jitter: float = 0.3) -> list[int]:
    """``n`` content event times from ``send``: the first after ``ttft_ms``, then ~``itl_ms``."""
    out, t = [], send + int(ttft_ms * MS)
    for _ in range(n):
        out.append(t)
        t += max(1, int(itl_ms * MS * (1 + jitter * (rng.random() - 0.5))))
    return out


def _stream(rng: random.Random, n: int, *, slots: int = 8, ttft_ms: float = 120.0,
            itl_ms: float = 15.0, tokens: tuple[int, int] = (16, 64), input_tokens: int = 512,
            index0: int = 0, start_ns: int = 0) -> list[RequestRecord]:
    """A closed loop of ``slots``: each slot sends its next request when the last one ended."""
    free = [start_ns + k * 3 * MS for k in range(slots)]
    records = []
    for i in range(n):
        slot = min(range(slots), key=lambda k: free[k])
        send = free[slot]
        count = rng.randint(*tokens)
        times = _times(rng, send, ttft_ms * (0.8 + 0.4 * rng.random()), itl_ms, count)
        end = times[-1] + rng.randint(0, 2) * MS
        records.append(make_record(index=index0 + i, send_ns=send, times_ns=times, end_ns=end,
                                   input_tokens=input_tokens + rng.randint(-64, 64)))
        free[slot] = end
    return records


def _complete() -> tuple[list[RequestRecord], dict[str, Any]]:
    return _stream(random.Random(1), 300), {"max_concurrency": 8, "percentiles": (50.0, 99.0)}


def _overloaded() -> tuple[list[RequestRecord], dict[str, Any]]:
    """The loop claims 4 slots but 8 were in flight: Little's law and the peak say so."""
    return _stream(random.Random(2), 120), {"max_concurrency": 4, "percentiles": (50.0, 99.9)}


def _failed() -> tuple[list[RequestRecord], dict[str, Any]]:
    rng = random.Random(3)
    records = _stream(rng, 60)
    errors = ["HTTP 500: boom", "HTTP 500: boom", "  read timeout  ", "HTTP 429: slow down", ""]
    for i, record in enumerate(records[::3]):
        record.outcome = [Outcome.SERVER_ERROR, Outcome.TIMEOUT, Outcome.TRUNCATED][i % 3]
        record.error = errors[i % len(errors)] or None
        record.requested_max_tokens = 64
        if i % 2:  # failed before any content
            record.content_times_ns = []
            record.t_first_ns = record.t_last_ns = None
            record.output_tokens = None
    return records, {"max_concurrency": 8, "percentiles": (50.0, 90.0)}


def _mostly_failed() -> tuple[list[RequestRecord], dict[str, Any]]:
    records = _stream(random.Random(4), 20)
    for record in records[:15]:
        record.outcome = Outcome.PROTOCOL_ERROR
        record.error = "invalid SSE"
    return records, {}


def _warmup() -> tuple[list[RequestRecord], dict[str, Any]]:
    """A slow first wave: marked warm-up in one case, left in the statistics in the other."""
    rng = random.Random(5)
    cold = _stream(rng, 8, ttft_ms=900.0, itl_ms=80.0)
    rest = _stream(rng, 120, index0=8, start_ns=max(r.t_end_ns for r in cold) + MS)
    for record in cold:
        record.warmup = True
    return cold + rest, {"max_concurrency": 8, "percentiles": (50.0, 95.0)}


def _cold_start_kept() -> tuple[list[RequestRecord], dict[str, Any]]:
    records, _ = _warmup()
    for record in records:
        record.warmup = False
    return records, {"max_concurrency": 8}


def _not_streamed(asked: bool, answered: bool | None, events: int = 1,
                  ) -> Callable[[], tuple[list[RequestRecord], dict[str, Any]]]:
    def build() -> tuple[list[RequestRecord], dict[str, Any]]:
        rng = random.Random(6)
        records = []
        for i in range(40):
            send = i * 250 * MS
            end = send + rng.randint(800, 1600) * MS
            times = [end - k for k in range(events - 1, -1, -1)]
            records.append(make_record(index=i, send_ns=send, times_ns=times,
                                       output_tokens=rng.randint(40, 200), streamed=asked,
                                       response_streamed=answered, input_tokens=700))
        return records, {"max_concurrency": 4, "percentiles": (50.0, 99.0)}
    return build


def _clock() -> tuple[list[RequestRecord], dict[str, Any]]:
    """Gaps going backwards, a first token before the send, an end before the send."""
    rng = random.Random(7)
    records = _stream(rng, 40)
    for record in records[::5]:
        times = record.content_times_ns
        times[2], times[3] = times[3], times[2]
    records[1].t_first_ns = records[1].content_times_ns[0] = records[1].t_send_ns - 5 * MS
    records[2].t_end_ns = records[2].t_send_ns - MS
    last = records[3].content_times_ns  # the last event stamped before the first one
    last[-1] = records[3].t_last_ns = last[0] - 10 * MS
    return records, {"max_concurrency": 8}


def _reasoning() -> tuple[list[RequestRecord], dict[str, Any]]:
    rng = random.Random(8)
    records = _stream(rng, 50, tokens=(40, 90))
    for i, record in enumerate(records):
        n = record.content_events
        think = n // 3
        record.content_kinds = "r" * think + "b" + "a" * (n - think - 1)
        record.t_first_answer_ns = record.content_times_ns[think]
        record.reasoning_tokens = record.usage_reasoning_tokens = think
        record.reasoning_tokens_source = CountSource.USAGE
        record.answer_tokens = n - think
        if i % 7 == 0:  # the answer arrived "before" the first token: a swapped field
            record.t_first_answer_ns = (record.t_first_ns or 0) - 20 * MS
        if i % 11 == 0:  # ended while still reasoning: no answer
            record.content_kinds = "r" * n
            record.t_first_answer_ns = None
    return records, {"max_concurrency": 8, "percentiles": (50.0, 90.0, 99.0)}


def _token_sources() -> tuple[list[RequestRecord], dict[str, Any]]:
    rng = random.Random(9)
    records = _stream(rng, 60, tokens=(20, 40))
    sources = [CountSource.USAGE, CountSource.TOKENIZER, CountSource.EVENTS,
               CountSource.UNKNOWN, CountSource.WORKLOAD]
    for i, record in enumerate(records):
        record.output_tokens_source = sources[i % len(sources)]
        record.usage_completion_tokens = record.output_tokens
        record.tokenizer_output_tokens = (record.output_tokens or 0) + (9 if i % 4 == 0 else 1)
        record.requested_max_tokens = 64
        record.ignore_eos = i % 3 == 0
        if i % 6 == 1:  # more events than usage tokens
            record.usage_completion_tokens = record.content_events - 3
        if record.output_tokens_source is CountSource.UNKNOWN:
            record.output_tokens = None
    return records, {"max_concurrency": 8, "request_rate": 50.0}


def _open_loop(rate: float, sent_at: float, cap: int | None = 4,
               ) -> Callable[[], tuple[list[RequestRecord], dict[str, Any]]]:
    """Poisson arrivals at ``sent_at`` req/s in a run configured for ``rate``."""
    def build() -> tuple[list[RequestRecord], dict[str, Any]]:
        rng = random.Random(10)
        records, t = [], 0
        for i in range(200):
            t += int(rng.expovariate(sent_at) * 1e9)
            times = _times(rng, t, 90.0, 12.0, rng.randint(10, 30))
            records.append(make_record(index=i, send_ns=t, times_ns=times, input_tokens=256))
        return records, {"request_rate": rate, "max_concurrency": cap, "arrival": "poisson",
                         "percentiles": (50.0, 99.0)}
    return build


def _ties() -> tuple[list[RequestRecord], dict[str, Any]]:
    """Back-to-back requests: each one sent at the instant the previous one ended."""
    records, send = [], 0
    for i in range(30):
        times = [send + (50 + 10 * k) * MS for k in range(8)]
        records.append(make_record(index=i, send_ns=send, times_ns=times))
        send = times[-1]
    return records, {"max_concurrency": 1, "request_rate": 12.0, "percentiles": (50.0,)}


def _physics() -> tuple[list[RequestRecord], dict[str, Any]]:
    """Long prompts that prefill slower than they decode; a roofline the decode beats."""
    rng = random.Random(11)
    records = _stream(rng, 40, ttft_ms=5000.0, itl_ms=2.0, input_tokens=2048, tokens=(30, 60))
    roofline = RooflineLimits(peak_flops=1e12, mem_bandwidth=1e11, weight_bytes=1e9, params=5e8,
                              description="a tiny chip")
    server = {"engine": "vllm", "source": "http://h/metrics", "scrapes": 2, "resets": [],
              "derived": {"ttft_mean_s": 0.5, "e2el_mean_s": 3.1, "queue_time_mean_s": 0.2,
                          "requests": 40.0, "generation_tokens": 900.0}}
    return records, {"max_concurrency": 8, "roofline": roofline, "server_metrics": server,
                     "percentiles": (50.0,)}


def _server_with_warmup() -> tuple[list[RequestRecord], dict[str, Any]]:
    records, options = _warmup()
    server = {"engine": "sglang", "source": "http://h/metrics", "scrapes": 3, "resets": [],
              "derived": {"ttft_mean_s": 0.01, "e2el_mean_s": 0.2,
                          "requests": float(len(records)), "generation_tokens": 10.0}}
    lag = LagSummary(samples=50, p50_ms=0.5, p99_ms=6.0, max_ms=9.0, over_1ms_fraction=0.3,
                     cpu_busy_fraction=0.9)
    return records, {**options, "server_metrics": server, "lag": lag, "warmup_excluded": 0}


def _empty_outputs() -> tuple[list[RequestRecord], dict[str, Any]]:
    rng = random.Random(12)
    records = _stream(rng, 30)
    for record in records[:5]:
        record.content_times_ns = []
        record.t_first_ns = record.t_last_ns = None
        record.output_tokens = 0
    return records, {"max_concurrency": 8}


def _single() -> tuple[list[RequestRecord], dict[str, Any]]:
    return [make_record(index=0, times_ns=[400 * MS, 420 * MS, 440 * MS])], {
        "percentiles": (99.0,)}


def _all_warmup() -> tuple[list[RequestRecord], dict[str, Any]]:
    records = _stream(random.Random(13), 12)
    for record in records:
        record.warmup = True
    return records, {"max_concurrency": 8}


def _mixed_stream_flag() -> tuple[list[RequestRecord], dict[str, Any]]:
    records = _not_streamed(True, None, events=1)()[0]
    for record in records[::2]:
        record.streamed = False
    return records, {"max_concurrency": 4}


RECORD_CASES: dict[str, Callable[[], tuple[list[RequestRecord], dict[str, Any]]]] = {
    "complete": _complete,
    "overloaded": _overloaded,
    "failed": _failed,
    "mostly_failed": _mostly_failed,
    "warmup": _warmup,
    "cold_start_kept": _cold_start_kept,
    "stream_false": _not_streamed(False, False),
    "stream_ignored": _not_streamed(True, False),
    "one_chunk": _not_streamed(True, True),
    "one_chunk_unknown_answer": _not_streamed(True, None, events=1),
    "all_text_in_one_event": _not_streamed(True, True, events=3),
    "mixed_stream_flag": _mixed_stream_flag,
    "clock": _clock,
    "reasoning": _reasoning,
    "token_sources": _token_sources,
    "open_loop_fast": _open_loop(40.0, 60.0),
    "open_loop_slow": _open_loop(40.0, 25.0),
    "open_loop_on_rate": _open_loop(40.0, 40.0),
    "open_loop_slow_below_cap": _open_loop(40.0, 10.0, cap=16),
    "open_loop_slow_uncapped": _open_loop(40.0, 10.0, cap=None),
    "ties": _ties,
    "physics": _physics,
    "server_with_warmup": _server_with_warmup,
    "empty_outputs": _empty_outputs,
    "single": _single,
    "all_warmup": _all_warmup,
    "empty": lambda: ([], {}),
}
"""Record sets judged by :func:`~tunegate.gauge.validate_records` (keyword arguments beside)."""


def _samples_gaps() -> Dataset:
    """Foreign samples: gaps unknown (``None``), known empty (``()``), negative, too long."""
    rng = random.Random(14)
    samples = []
    for i in range(40):
        ttft = 0.1 + 0.05 * rng.random()
        gaps = tuple(0.01 + 0.005 * rng.random() for _ in range(20))
        e2el = ttft + sum(gaps)
        kind = i % 5
        samples.append(RequestSample(
            ok=i % 9 != 4, ttft_s=ttft, e2el_s=e2el if kind != 3 else ttft + sum(gaps) / 2,
            input_tokens=300, output_tokens=21,
            itls_s=None if kind == 0 else () if kind == 1 else
            (*gaps[:5], -0.002, *gaps[6:]) if kind == 2 else gaps,
            start_s=i * 0.2, end_s=i * 0.2 + e2el, chunks=1 if kind == 4 else None,
            error="HTTP 503" if i % 9 == 4 else None, warmup=i < 2,
            stream_requested=None, response_streamed=None))
    requests = tuple(samples)
    summary = summary_from_samples(requests, 9.0, (50.0, 99.0))
    return Dataset("aiperf", summary, requests,
                   RunContext(max_concurrency=4, percentiles=(50.0, 99.0), warmup_excluded=2))


def _samples_sampled() -> Dataset:
    """GuideLLM-like: a sample of the requests, a duration, TTFT == E2EL, a chunk count."""
    samples = tuple(RequestSample(
        ok=True, ttft_s=1.0 + 0.01 * i, e2el_s=1.0 + 0.01 * i, output_tokens=50 + i,
        input_tokens=40, itls_s=(), chunks=1, stream_requested=True, start_s=0.5 * i,
        end_s=0.5 * i + 1.0, ignore_eos=True, requested_max_tokens=80,
        output_tokens_source="events" if i % 2 else None) for i in range(12))
    summary = summary_from_samples(samples, 6.0, (50.0, 90.0))
    return Dataset("guidellm", summary, samples,
                   RunContext(request_rate=3.0, max_concurrency=2, percentiles=(50.0, 90.0)),
                   requests_are_sample=True)


def _samples_back_to_back() -> Dataset:
    """Send times only, no measured peak: each request sent when the previous one ended.

    Ends count before sends at one instant, so one request was in flight, under the cap of 2:
    the slow arrivals are the client's, not the cap's.
    """
    samples = tuple(RequestSample(ok=True, ttft_s=0.05, e2el_s=0.5, output_tokens=10,
                                  input_tokens=100, start_s=0.5 * i, end_s=0.5 * (i + 1))
                    for i in range(30))
    summary = summary_from_samples(samples, 15.0, (50.0,))
    return Dataset("vllm", summary, samples,
                   RunContext(request_rate=10.0, max_concurrency=2, percentiles=(50.0,)))


DATASET_CASES: dict[str, Callable[[], Dataset]] = {
    "samples_gaps": _samples_gaps,
    "samples_sampled": _samples_sampled,
    "samples_back_to_back": _samples_back_to_back,
}
"""Datasets of foreign samples judged by :func:`~tunegate.gauge.validate_dataset`."""

CASES = [*RECORD_CASES, *DATASET_CASES]


def report_of(case: str) -> dict[str, Any]:
    """The report of one case as plain JSON data, and the summary the gauge computed."""
    if case in RECORD_CASES:
        records, options = RECORD_CASES[case]()
        lag = options.pop("lag", None)
        report: ValidationReport = validate_records(records, lag, **options)
        dataset = dataset_from_records(records, RunContext(
            percentiles=tuple(options.get("percentiles", ()))))
    else:
        dataset = DATASET_CASES[case]()
        report = validate_dataset(dataset)
    data: dict[str, Any] = json.loads(json.dumps(
        {**report.to_dict(), "summary": asdict(dataset.summary)}))
    return data


def _same(new: Any, old: Any, where: str, absolute: float = 0.0) -> None:
    """Equal JSON data; numbers within :data:`REL` (or ``absolute``), NaN equal to NaN."""
    if isinstance(old, float) or isinstance(new, float):
        assert isinstance(new, int | float) and isinstance(old, int | float), where
        if math.isnan(old):
            assert math.isnan(new), f"{where}: {new} != {old}"
        else:
            assert new == pytest.approx(old, rel=REL, abs=absolute), f"{where}: {new} != {old}"
    elif isinstance(old, dict):
        assert isinstance(new, dict) and list(new) == list(old), f"{where}: {new} != {old}"
        for key in old:
            _same(new[key], old[key], f"{where}.{key}", absolute)
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), f"{where}: {new} != {old}"
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            _same(a, b, f"{where}[{i}]", absolute)
    else:
        assert new == old, f"{where}: {new!r} != {old!r}"


@pytest.mark.parametrize("case", CASES)
def test_findings_equal_the_per_request_gauge(case: str) -> None:
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    _same(report_of(case), expected[case], case)


def test_every_case_is_frozen_and_most_find_something() -> None:
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    assert sorted(expected) == sorted(CASES)
    codes = {f["code"] for report in expected.values() for f in report["findings"]}
    assert {"ttft_equals_e2el", "ttft_missing", "clock_anomaly", "error_rate",
            "littles_law_violation", "offered_load_mismatch", "token_count_mismatch",
            "token_count_approximate", "warmup_included", "too_few_samples",
            "prefill_slower_than_decode", "roofline_exceeded", "server_client_disagree",
            "client_saturated"} <= codes
    assert "prefill_slower_than_decode" in {
        f["code"] for f in expected["physics"]["findings"]}


def main() -> None:
    """Write the expected reports (run on the gauge whose findings are the reference)."""
    reports = {case: report_of(case) for case in CASES}
    EXPECTED.parent.mkdir(parents=True, exist_ok=True)
    EXPECTED.write_text(json.dumps(reports, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {len(reports)} reports to {EXPECTED.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
