"""Each metric's definition on hand-built records (whole-nanosecond timestamps)."""

from __future__ import annotations

import pytest

from tunegate.loadgen.records import Outcome
from tunegate.metrics.definitions import (
    benchmark_duration_ns,
    decode_rate,
    e2el_ns,
    generation_rate,
    itl_ns,
    prefill_rate,
    stream_end_ns,
    tpot_ns,
    ttft_ns,
)
from tunegate.testing import make_record, token_times

MS = 1_000_000


def test_ttft_is_first_content_event_minus_send() -> None:
    record = make_record(send_ns=5 * MS, times_ns=token_times(400, 20, 32, send_ns=5 * MS))
    assert ttft_ns(record) == 400 * MS


def test_e2el_ends_at_last_content_event_not_at_stream_end() -> None:
    times = token_times(400, 20, 32)
    record = make_record(times_ns=times, end_ns=times[-1] + 3 * MS)  # usage + [DONE] after
    assert e2el_ns(record) == (400 + 31 * 20) * MS
    assert stream_end_ns(record) == (400 + 31 * 20 + 3) * MS


def test_itl_is_every_gap_between_content_events() -> None:
    record = make_record(times_ns=[100 * MS, 120 * MS, 150 * MS])
    assert itl_ns(record) == [20 * MS, 30 * MS]


def test_tpot_excludes_the_first_token() -> None:
    record = make_record(times_ns=token_times(400, 20, 32))
    assert tpot_ns(record) == pytest.approx(20 * MS)


def test_tpot_uses_token_count_not_event_count() -> None:
    # 8 events carrying 4 tokens each: TPOT divides by 31 tokens, ITL sees 7 gaps of 80 ms.
    record = make_record(times_ns=token_times(400, 80, 8), output_tokens=32)
    assert tpot_ns(record) == pytest.approx(7 * 80 * MS / 31)
    assert itl_ns(record) == [80 * MS] * 7


def test_tpot_undefined_for_a_single_token() -> None:
    assert tpot_ns(make_record(times_ns=[400 * MS])) is None
    assert decode_rate(make_record(times_ns=[400 * MS])) is None


def test_rates_in_tokens_per_second() -> None:
    record = make_record(times_ns=token_times(500, 20, 51), input_tokens=100)
    assert prefill_rate(record) == pytest.approx(100 / 0.5)
    assert decode_rate(record) == pytest.approx(1 / 0.020)
    assert generation_rate(record) == pytest.approx(51 / 1.5)


def test_article_arithmetic_generation_rate_is_output_over_e2el() -> None:
    # The seed article: 158.54 tokens in 9557.6 ms is 16.6 tok/s of "decode" (generation rate).
    record = make_record(times_ns=[9_557_600_000], output_tokens=158, input_tokens=63)
    assert generation_rate(record) == pytest.approx(158 / 9.5576)
    assert prefill_rate(record) == pytest.approx(63 / 9.5576)


def test_metrics_undefined_without_content() -> None:
    record = make_record(times_ns=[], outcome=Outcome.SERVER_ERROR, end_ns=7 * MS)
    assert ttft_ns(record) is None
    assert e2el_ns(record) is None
    assert tpot_ns(record) is None
    assert itl_ns(record) == []
    assert prefill_rate(record) is None
    assert generation_rate(record) is None


def test_prefill_rate_needs_a_known_input_length() -> None:
    assert prefill_rate(make_record(times_ns=[400 * MS], input_tokens=None)) is None


def test_duration_spans_first_send_to_last_end_of_measured_requests() -> None:
    records = [
        make_record(index=0, send_ns=0, times_ns=[10 * MS], warmup=True),
        make_record(index=1, send_ns=20 * MS, times_ns=[30 * MS, 90 * MS]),
        make_record(index=2, send_ns=40 * MS, times_ns=[50 * MS], end_ns=120 * MS),
    ]
    assert benchmark_duration_ns(records) == 100 * MS
    assert benchmark_duration_ns([]) == 0


def test_duration_ends_at_the_last_completion_not_a_late_failure() -> None:
    records = [
        make_record(index=0, send_ns=0, times_ns=[100 * MS]),
        make_record(index=1, send_ns=10 * MS, times_ns=[], outcome=Outcome.TIMEOUT,
                    end_ns=300_000 * MS),
    ]
    assert benchmark_duration_ns(records) == 100 * MS
    only_failures = [records[1]]
    assert benchmark_duration_ns(only_failures) == (300_000 - 10) * MS
