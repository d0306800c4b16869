"""Reasoning models: TTFT, the time to first answer token, TPOT over all tokens, the summary block.

Records are built by hand with whole-nanosecond timestamps: 10 reasoning events then the answer.
"""

from __future__ import annotations

import dataclasses

import pytest

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.metrics import summarize
from tunegate.metrics.definitions import itl_ns, tpot_ns, ttfat_ns, ttft_ns
from tunegate.testing import make_record, token_times

MS = 1_000_000


def _reasoning_record(index: int = 0, *, send_ms: int = 0, ttft_ms: int = 400, thinking: int = 10,
                      answer: int = 22, itl_ms: int = 20, split_known: bool = True
                      ) -> RequestRecord:
    """``thinking`` reasoning events, then ``answer`` answer events, one token each."""
    times = token_times(ttft_ms, itl_ms, thinking + answer, send_ns=send_ms * MS)
    record = make_record(index=index, send_ns=send_ms * MS, times_ns=times)
    return dataclasses.replace(
        record,
        content_kinds="r" * thinking + "a" * answer,
        t_first_answer_ns=times[thinking] if answer else None,
        reasoning_tokens=thinking if split_known else None,
        answer_tokens=answer if split_known else None,
        reasoning_tokens_source=CountSource.USAGE if split_known else CountSource.UNKNOWN,
    )


def test_ttft_is_the_first_reasoning_token_and_ttfat_the_first_answer_token() -> None:
    record = _reasoning_record(send_ms=5)
    assert ttft_ns(record) == 400 * MS
    assert ttfat_ns(record) == (400 + 10 * 20) * MS


def test_ttfat_equals_ttft_without_reasoning() -> None:
    times = token_times(400, 20, 8)
    record = dataclasses.replace(make_record(times_ns=times), t_first_answer_ns=times[0])
    assert ttfat_ns(record) == ttft_ns(record) == 400 * MS


def test_ttfat_undefined_when_the_answer_never_came_or_was_not_recorded() -> None:
    assert ttfat_ns(_reasoning_record(answer=0)) is None
    assert ttfat_ns(make_record(times_ns=token_times(400, 20, 8))) is None  # older record


def test_tpot_and_itl_count_reasoning_tokens_as_output_tokens() -> None:
    record = _reasoning_record()  # 32 output tokens, 20 ms apart, 10 of them reasoning
    assert record.output_tokens == 32
    assert tpot_ns(record) == pytest.approx(20 * MS)
    assert itl_ns(record) == [20 * MS] * 31


def test_no_reasoning_block_for_a_model_that_does_not_reason() -> None:
    records = [make_record(index=i, times_ns=token_times(400, 20, 8)) for i in range(3)]
    summary = summarize(records)
    assert not [key for key in summary if "ttfat" in key or "reasoning" in key]
    assert "total_answer_tokens" not in summary


def test_reasoning_block_values() -> None:
    records = [_reasoning_record(i, send_ms=100 * i, thinking=10 + 5 * i, answer=22)
               for i in range(3)]
    summary = summarize(records)
    ttfats = [400 + 20 * (10 + 5 * i) for i in range(3)]  # 600, 700, 800 ms
    assert summary["mean_ttfat_ms"] == pytest.approx(700)
    assert summary["median_ttfat_ms"] == pytest.approx(700)
    assert summary["p99_ttfat_ms"] == pytest.approx(ttfats[1] + 0.98 * 100)
    assert summary["mean_ttft_ms"] == pytest.approx(400)
    assert summary["requests_with_reasoning"] == 3
    assert summary["requests_without_answer"] == 0
    assert summary["total_reasoning_tokens"] == 10 + 15 + 20
    assert summary["total_answer_tokens"] == 3 * 22
    assert summary["total_output_tokens"] == 45 + 66
    assert summary["reasoning_tokens_unknown"] == 0
    assert summary["reasoning_tokens_source"] == {"usage": 3}


def test_requests_that_never_answered_are_counted_not_averaged_in() -> None:
    records = [_reasoning_record(0), _reasoning_record(1, answer=0, thinking=32)]
    summary = summarize(records)
    assert summary["requests_without_answer"] == 1
    assert summary["mean_ttfat_ms"] == pytest.approx(600)


def test_unknown_splits_are_counted_apart_from_known_totals() -> None:
    records = [_reasoning_record(0), _reasoning_record(1, split_known=False)]
    summary = summarize(records)
    assert summary["total_reasoning_tokens"] == 10
    assert summary["reasoning_tokens_unknown"] == 1
    assert summary["reasoning_tokens_source"] == {"usage": 1, "unknown": 1}


def test_failed_requests_do_not_open_the_block() -> None:
    failed = dataclasses.replace(_reasoning_record(1), outcome=Outcome.TRUNCATED)
    ok = make_record(index=0, times_ns=token_times(400, 20, 8))
    assert "mean_ttfat_ms" not in summarize([ok, failed])


def test_reasoning_reported_only_by_usage_opens_the_block() -> None:
    # e.g. reasoning hidden from the stream: TTFT already includes the thinking time.
    times = token_times(900, 20, 4)
    record = dataclasses.replace(make_record(times_ns=times, output_tokens=40),
                                 t_first_answer_ns=times[0], usage_reasoning_tokens=36,
                                 reasoning_tokens=36, answer_tokens=4,
                                 reasoning_tokens_source=CountSource.USAGE)
    summary = summarize([record])
    assert summary["requests_with_reasoning"] == 1
    assert summary["mean_ttfat_ms"] == pytest.approx(summary["mean_ttft_ms"])


def test_records_round_trip_and_older_records_read_back() -> None:
    record = _reasoning_record()
    assert RequestRecord.from_dict(record.to_dict()) == record
    old = record.to_dict()
    for name in ("content_kinds", "t_first_answer_ns", "usage_reasoning_tokens",
                 "tokenizer_reasoning_tokens", "reasoning_tokens", "reasoning_tokens_source",
                 "answer_tokens"):
        del old[name]
    restored = RequestRecord.from_dict(old)
    assert restored.content_kinds == "" and restored.t_first_answer_ns is None
    assert restored.reasoning_tokens_source is CountSource.UNKNOWN
    assert ttfat_ns(restored) is None
