"""A run's records as rows on disk: 131 bytes per request instead of a Python object each.

A :class:`~tunegate.loadgen.records.RequestRecord` with 128 content events costs 2.5 KiB (the
simulator's, whose timestamps are shared within a step) to 7 KiB (a real socket's, one int per
event) and summaries and checks used to build more per-request objects beside it. A
:class:`RecordTable` takes each record as it ends (:meth:`RecordTable.add`) and keeps only what
the metrics and the gauge read, as one fixed-width row; the record can then be dropped. Rows
are kept in memory a block at a time and then appended to an anonymous temporary file, so the
table's memory does not grow with the run; the summary and the gauge read one column at a time
(:meth:`RecordTable.column`).

What a row keeps of a record's content events: their number, whether any gap between two
consecutive events is negative, and the first and last times (the gaps of a row sum to
``t_last_ns - t_first_ns`` exactly). The gaps themselves, every one of which is a sample of the
pooled ITL distribution, go to a :class:`GapStore` for the measured complete requests only (the
only ones a summary pools): in memory up to :data:`GAPS_IN_MEMORY` values, then in an anonymous
temporary file. The operating system removes both files when the table is closed or the
process ends, however it ends.

Rows are in the order they were added (completion order during a run), not by request index.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import IO, Any, Final

import numpy as np

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord

__all__ = [
    "COLUMNS",
    "GAPS_IN_MEMORY",
    "NO_COUNT",
    "NO_TIME",
    "OUTCOMES",
    "SOURCES",
    "GapStore",
    "RecordTable",
]

NO_TIME: Final = int(np.iinfo(np.int64).min)
"""A time column's value where the record has none (no content event, no answer)."""
NO_COUNT: Final = -1
"""A count column's value where the record's count is unknown."""
OUTCOMES: Final = tuple(Outcome)
"""``outcome`` codes: position in this tuple."""
SOURCES: Final = tuple(CountSource)
"""``*_tokens_source`` codes: position in this tuple."""
GAPS_IN_MEMORY: Final = 1 << 19
"""Pooled inter-token gaps kept in memory (4 MiB) before the store moves them to a file."""

_OUTCOME_CODE = {outcome: code for code, outcome in enumerate(OUTCOMES)}
_SOURCE_CODE = {source: code for code, source in enumerate(SOURCES)}
_BLOCK_ROWS = 4096
_READ_ROWS = 1 << 14
_READ_VALUES = 1 << 20

COLUMNS: Final = np.dtype([
    ("index", np.int64),
    ("warmup", np.bool_),
    ("success", np.bool_),
    ("outcome", np.int8),
    ("streamed", np.bool_),
    ("response_streamed", np.int8),
    ("reasoning_streamed", np.bool_),
    ("ignore_eos", np.bool_),
    ("itl_negative", np.bool_),
    ("t_send_ns", np.int64),
    ("t_end_ns", np.int64),
    ("t_first_ns", np.int64),
    ("t_last_ns", np.int64),
    ("t_first_answer_ns", np.int64),
    ("input_tokens", np.int64),
    ("output_tokens", np.int64),
    ("usage_completion_tokens", np.int64),
    ("tokenizer_output_tokens", np.int64),
    ("requested_max_tokens", np.int64),
    ("reasoning_tokens", np.int64),
    ("answer_tokens", np.int64),
    ("usage_reasoning_tokens", np.int64),
    ("content_events", np.int64),
    ("input_tokens_source", np.int8),
    ("output_tokens_source", np.int8),
    ("reasoning_tokens_source", np.int8),
])
"""One row per record: the columns' names and types (see :meth:`RecordTable.column`)."""


def _time(value: int | None) -> int:
    return NO_TIME if value is None else value


def _count(value: int | None) -> int:
    return NO_COUNT if value is None else value


def _row(record: RequestRecord, itl_negative: bool) -> tuple[Any, ...]:
    """The record as a row of :data:`COLUMNS`, in its field order."""
    streamed = record.response_streamed
    return (
        record.index, record.warmup, record.outcome.is_success, _OUTCOME_CODE[record.outcome],
        record.streamed, -1 if streamed is None else int(streamed), bool(record.content_kinds),
        record.ignore_eos, itl_negative, record.t_send_ns, record.t_end_ns,
        _time(record.t_first_ns), _time(record.t_last_ns), _time(record.t_first_answer_ns),
        _count(record.input_tokens), _count(record.output_tokens),
        _count(record.usage_completion_tokens), _count(record.tokenizer_output_tokens),
        _count(record.requested_max_tokens), _count(record.reasoning_tokens),
        _count(record.answer_tokens), _count(record.usage_reasoning_tokens),
        len(record.content_times_ns), _SOURCE_CODE[record.input_tokens_source],
        _SOURCE_CODE[record.output_tokens_source], _SOURCE_CODE[record.reasoning_tokens_source],
    )


def _temporary_file(prefix: str) -> IO[bytes] | None:
    """An anonymous temporary file, or ``None`` when none can be made (no writable directory)."""
    try:
        # Unbuffered, so a failed write leaves nothing pending; held open for the owner's life
        # and closed by its close(): no with-block fits.
        return tempfile.TemporaryFile(prefix=prefix, buffering=0)
    except OSError:
        return None


def _append(handle: IO[bytes], data: bytes) -> bool:
    """Append ``data`` whole, or leave the file as it was and say so (disk full...)."""
    end = handle.seek(0, 2)
    view = memoryview(data)
    try:
        while view:
            view = view[handle.write(view) or 0:]
    except OSError:
        with contextlib.suppress(OSError):
            handle.truncate(end)
        return False
    return True


def _read(handle: IO[bytes], size: int) -> bytes:
    """``size`` bytes from the current position (an unbuffered read may return fewer)."""
    parts = []
    while size:
        part = handle.read(size)
        if not part:
            raise OSError("a temporary file of a record table ended early")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


class GapStore:
    """Inter-token gaps (int64 ns) pooled over requests: in memory, then in a temporary file.

    The file is anonymous (``tempfile.TemporaryFile``: unlinked at creation), so nothing is
    left on disk after :meth:`close`, an exception or a killed process.
    """

    def __init__(self, in_memory: int = GAPS_IN_MEMORY) -> None:
        self._in_memory = in_memory
        self._pending: list[np.ndarray] = []
        self._pending_values = 0
        self._file: IO[bytes] | None = None
        self.count = 0
        """Gaps stored."""
        self.spill_error = False
        """The temporary file could not be written (disk full...): the gaps stay in memory, so
        nothing measured is lost, at 8 bytes a gap."""

    def add(self, gaps: np.ndarray) -> None:
        """Append int64 gaps."""
        if not len(gaps):
            return
        self._pending.append(gaps)
        self._pending_values += len(gaps)
        self.count += len(gaps)
        if self._pending_values > self._in_memory:
            self._spill()

    def _spill(self) -> None:
        data = np.concatenate(self._pending).astype(np.int64, copy=False).tobytes()
        if self._file is None:
            self._file = _temporary_file("tunegate-gaps-")
        if self._file is None or not _append(self._file, data):
            # A full or unwritable temporary directory: the gaps stay in memory, all of them.
            self._in_memory = sys.maxsize
            self.spill_error = True
            return
        self._pending, self._pending_values = [], 0

    @property
    def on_disk(self) -> bool:
        """Whether some gaps are in the temporary file."""
        return self._file is not None

    def chunks(self, values: int = _READ_VALUES) -> Iterator[np.ndarray]:
        """Every gap, in order of addition, as int64 arrays of at most ``values`` each."""
        if self._file is not None:
            self._file.seek(0)
            left = self.count - self._pending_values  # gaps in the file
            while left:  # read() sizes its buffer by the request: ask only for what is there
                take = min(left, values)
                left -= take
                yield np.frombuffer(_read(self._file, take * 8), dtype=np.int64)
        for part in self._pending:
            for start in range(0, len(part), values):
                yield part[start:start + values]

    def array(self) -> np.ndarray:
        """Every gap in one array (for stores small enough to hold: see :attr:`on_disk`)."""
        parts = list(self.chunks())
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def close(self) -> None:
        """Drop the gaps and remove the temporary file."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._pending, self._pending_values, self.count = [], 0, 0


class RecordTable:
    """Append-only rows of a run's records (see the module docstring).

    The rows of the current block (:data:`_BLOCK_ROWS`) are in memory; sealed blocks go to an
    anonymous temporary file, so a run of any length holds one block. :meth:`column` reads one
    column back (8 bytes or fewer per request) for the summary and the gauge, which need one
    figure at a time.

    Args:
        pool_gaps: Keep the measured complete requests' inter-token gaps (:attr:`gaps`) for the
            pooled ITL distribution. Off, the table holds rows only.
    """

    def __init__(self, *, pool_gaps: bool = True) -> None:
        self._rows: list[tuple[Any, ...]] = []
        self._tail: np.ndarray | None = None
        self._file: IO[bytes] | None = None
        self._in_file = 0
        self._held: list[np.ndarray] = []  # sealed blocks the file could not take
        self._length = 0
        self._pool_gaps = pool_gaps
        self.gaps = GapStore()
        """Inter-token gaps of measured complete requests, pooled in order of addition."""
        self.errors: dict[int, str] = {}
        """Row -> error message, for the rows whose record has one."""

    @classmethod
    def from_records(cls, records: Iterable[RequestRecord], *, pool_gaps: bool = True
                     ) -> RecordTable:
        """A table of ``records``, in their order."""
        table = cls(pool_gaps=pool_gaps)
        table.extend(records)
        return table

    def add(self, record: RequestRecord) -> None:
        """Append one record's row (and its gaps). The record is not kept."""
        times = record.content_times_ns
        negative = False
        if len(times) > 1:
            gaps = np.diff(np.fromiter(times, dtype=np.int64, count=len(times)))
            negative = bool((gaps < 0).any())
            if self._pool_gaps and not record.warmup and record.outcome.is_success:
                self.gaps.add(gaps)
        if record.error is not None:
            self.errors[self._length] = record.error
        self._rows.append(_row(record, negative))
        self._length += 1
        self._tail = None
        if len(self._rows) >= _BLOCK_ROWS:
            self._seal()

    def extend(self, records: Iterable[RequestRecord]) -> None:
        """Append every record, in order."""
        for record in records:
            self.add(record)

    def _seal(self) -> None:
        """Move the rows in memory to the file; if it cannot be written (disk full, no
        temporary directory), keep them in memory as a block: nothing measured is lost."""
        block = np.array(self._rows, dtype=COLUMNS)
        self._rows, self._tail = [], None
        if not self._held:  # once a block is held, later ones follow it: the order stays
            if self._file is None:
                self._file = _temporary_file("tunegate-rows-")
            if self._file is not None and _append(self._file, block.tobytes()):
                self._in_file += len(block)
                return
        self._held.append(block)

    def __len__(self) -> int:
        return self._length

    @property
    def on_disk(self) -> bool:
        """Whether some rows are in the temporary file."""
        return self._file is not None

    def blocks(self) -> Iterator[np.ndarray]:
        """Every row, in order of addition, as structured arrays of :data:`COLUMNS`."""
        if self._file is not None:
            self._file.seek(0)
            left = self._in_file
            while left:  # read() sizes its buffer by the request: ask only for what is there
                take = min(left, _READ_ROWS)
                left -= take
                yield np.frombuffer(_read(self._file, take * COLUMNS.itemsize), dtype=COLUMNS)
            self._file.seek(0, 2)
        yield from self._held
        if self._rows:
            if self._tail is None:
                self._tail = np.array(self._rows, dtype=COLUMNS)
            yield self._tail

    def rows(self) -> np.ndarray:
        """Every row as one structured array (read-only): for small tables; the summary and
        the gauge read :meth:`column` instead."""
        parts = list(self.blocks())
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=COLUMNS)
        rows.flags.writeable = False
        return rows

    def column(self, name: str) -> np.ndarray:
        """One column, ``len(self)`` values, read-only (a new array on each call)."""
        out = np.empty(self._length, dtype=COLUMNS[name])
        at = 0
        for block in self.blocks():
            out[at:at + len(block)] = block[name]
            at += len(block)
        out.flags.writeable = False
        return out

    def close(self) -> None:
        """Remove the temporary files (rows and gaps); the table is empty afterwards."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._rows, self._tail, self._length, self._in_file, self._held = [], None, 0, 0, []
        self.errors = {}
        self.gaps.close()

    def __enter__(self) -> RecordTable:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
