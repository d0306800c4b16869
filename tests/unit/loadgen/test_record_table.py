"""A record table keeps, per request, what summaries and checks read; gaps pool apart."""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import pytest

from tunegate.loadgen import record_table
from tunegate.loadgen.record_table import (
    NO_COUNT,
    NO_TIME,
    OUTCOMES,
    SOURCES,
    GapStore,
    RecordTable,
)
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


class _SmallDisk:
    """An unbuffered temporary file on a disk that is full after ``budget`` bytes: the write
    that crosses it writes what fits and then fails, as a real full disk does."""

    def __init__(self, budget: int) -> None:
        self.file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - closed by the table
        self.budget = budget

    def write(self, data: memoryview) -> int:
        room = self.budget - self.file.seek(0, 2)
        if room < len(data):
            self.file.write(data[:max(room, 0)])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return int(self.file.write(data) or 0)

    def __getattr__(self, name: str) -> object:
        return getattr(self.file, name)


def test_a_full_temporary_disk_keeps_every_row_in_memory_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(record_table, "_temporary_file", lambda prefix: _SmallDisk(
        budget=int(1.5 * 4096 * record_table.COLUMNS.itemsize)))  # one block fits, not two
    table = RecordTable()
    for i in range(3 * 4096 + 10):
        table.add(make_record(index=i, times_ns=[1, 2]))
    assert table.column("index").tolist() == list(range(3 * 4096 + 10))
    assert table.on_disk  # the first block is in the file, the rest in memory after it


def test_gaps_that_no_file_takes_stay_in_memory() -> None:
    store = GapStore(in_memory=4)
    store._file = _SmallDisk(budget=8 * 6)  # type: ignore[assignment]
    for start in range(0, 20, 5):
        store.add(np.arange(start, start + 5, dtype=np.int64))
    assert store.spill_error
    assert store.array().tolist() == list(range(20))
    store.close()
