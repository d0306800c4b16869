"""A record table keeps, per request, what summaries and checks read; gaps pool apart."""

from __future__ import annotations

import os

import numpy as np

from tunegate.loadgen.record_table import NO_COUNT, NO_TIME, OUTCOMES, SOURCES, RecordTable
from tunegate.loadgen.records import CountSource, Outcome
from tunegate.testing import make_record, token_times


def test_a_row_holds_the_records_fields_and_sentinels_for_what_it_lacks() -> None:
    done = make_record(index=7, send_ns=5, times_ns=token_times(10, 2, 4, send_ns=5),
                       input_tokens=None, output_source=CountSource.EVENTS)
    failed = make_record(index=8, send_ns=9, outcome=Outcome.TIMEOUT, error="deadline",
                         response_streamed=None)
    table = RecordTable.from_records([done, failed])
    row, bad = table.rows()
    assert len(table) == 2 and row["index"] == 7 and bad["index"] == 8
    assert row["t_first_ns"] == 5 + 10 * 10**6 and row["t_last_ns"] == 5 + 16 * 10**6
    assert row["content_events"] == 4 and row["output_tokens"] == 4
    assert row["input_tokens"] == NO_COUNT and bad["t_first_ns"] == NO_TIME
    assert SOURCES[row["output_tokens_source"]] is CountSource.EVENTS
    assert OUTCOMES[bad["outcome"]] is Outcome.TIMEOUT and not bad["success"]
    assert bad["response_streamed"] == -1 and row["response_streamed"] == 1
    assert table.errors == {1: "deadline"}
    assert not table.column("success").flags.writeable


def test_only_measured_complete_requests_pool_their_gaps_and_a_negative_gap_is_flagged() -> None:
    measured = make_record(times_ns=[0, 3, 10])
    warmup = make_record(times_ns=[0, 100], warmup=True)
    failed = make_record(times_ns=[0, 50], outcome=Outcome.TRUNCATED)
    backwards = make_record(times_ns=[0, 8, 5])
    table = RecordTable.from_records([measured, warmup, failed, backwards])
    assert table.gaps.array().tolist() == [3, 7, 8, -3]
    assert table.column("itl_negative").tolist() == [False, False, False, True]


def test_gaps_move_to_an_anonymous_file_that_closing_removes() -> None:
    table = RecordTable()
    table.gaps._in_memory = 10
    for i in range(20):
        table.add(make_record(index=i, times_ns=token_times(1, 1, 5)))
    assert table.gaps.on_disk and table.gaps.count == 80
    assert np.array_equal(table.gaps.array(), np.full(80, 10**6))
    descriptor = table.gaps._file.fileno()  # type: ignore[union-attr]
    assert os.fstat(descriptor).st_nlink == 0  # never a name on disk
    table.close()
    assert table.gaps.count == 0 and not table.gaps.on_disk


def test_rows_added_after_reading_are_seen_by_the_next_read() -> None:
    table = RecordTable()
    for i in range(5000):  # across a sealed block
        table.add(make_record(index=i, times_ns=[1, 2]))
    assert table.column("index")[-1] == 4999
    table.add(make_record(index=5000, times_ns=[1, 2]))
    assert table.column("index").tolist() == list(range(5001))
