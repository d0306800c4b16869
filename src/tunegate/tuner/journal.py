"""Append-only, checksummed, hash-chained JSONL journal: what a killed run resumes from.

The line format, the chain and the head file are :mod:`tunegate.tuner.journal_chain`.

Durability: :meth:`Journal.append` writes the whole line with one ``write`` on an ``O_APPEND``
descriptor, then ``fdatasync`` (every record by default). A record is *acknowledged* when
``append`` returns; an acknowledged record survives ``kill -9`` and, with fsync on, power loss.

Recovery (:meth:`Journal.open`): only newline-terminated lines count. If the *last* line is
unterminated, unparsable or fails its checksum, it was a write cut short (never acknowledged):
it is reported (:attr:`Journal.torn`, a warning in the log) and truncated away. A bad line
*followed by anything* is corruption, not a crash artefact: :class:`JournalCorruptError` names
the file and line, and the run must stop. So does a ``seq`` gap or repeat, an epoch that goes
down (a writer with a stale lease wrote after a takeover), or a broken chain link.

:func:`audit_journal` reports the same problems without raising (``tunegate replay``).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from tunegate.errors import JournalCorruptError, LeaseBusyError, LeaseLostError
from tunegate.files.atomic import fsync_directory
from tunegate.tuner.digest import normalize
from tunegate.tuner.journal_chain import (
    GENESIS,
    HEAD_BYTES,
    ChainHead,
    JournalRecord,
    Replay,
    TornTail,
    check_head,
    decode_line,
    encode_line,
    encode_record,
    head_path,
    read_head,
)
from tunegate.tuner.lease_core import ServiceLease

__all__ = ["GENESIS", "ChainHead", "Journal", "JournalRecord", "Replay", "TornTail",
           "audit_journal", "check_head", "encode_record", "head_path", "read_head",
           "read_journal"]

log = logging.getLogger(__name__)
_CORRUPT_HINT = ("Stop, keep the directory for inspection, and resume from a copy truncated "
                 "before that line only if you accept the loss")


def read_journal(path: str | os.PathLike[str]) -> Replay:
    """Read and verify a journal without changing it (``tunegate tune --resume`` and reports).

    The chain links are checked; the head file is not (:meth:`Journal.open` and
    :func:`audit_journal` do).

    Args:
        path: The journal file; a missing file reads as empty.

    Returns:
        The valid records, the torn last line if any, and the byte length of the valid part.

    Raises:
        JournalCorruptError: Damage before the last line, a seq gap or repeat, a decreasing
            epoch or a broken chain link; the message names the file and the 1-based line.
    """
    return _scan(path, strict=True)


def audit_journal(path: str | os.PathLike[str]) -> Replay:
    """Verify a journal and its head file, collecting every problem instead of raising.

    ``records`` holds every line whose checksum holds, in or out of the chain, so the decisions
    of a damaged log can still be re-derived; ``problems`` names each fault (file and line),
    including :func:`check_head`'s. A cut-short last line the head never vouched for is a
    crash artefact (``torn``), not a problem. A missing file reads as empty.
    """
    replay = _scan(path, strict=False)
    problems = list(replay.problems)
    if replay.chained or head_path(path).exists():  # an emptied chained journal: no records
        problems += check_head(path, replay)
    return Replay(replay.records, replay.torn, replay.valid_bytes, replay.chained,
                  replay.hashes, replay.lines, tuple(problems))


def _scan(path: str | os.PathLike[str], *, strict: bool) -> Replay:
    try:
        content = Path(path).read_bytes()
    except FileNotFoundError:
        return Replay([], None, 0)
    chunks = content.split(b"\n")
    terminated, tail = chunks[:-1], chunks[-1]
    records: list[JournalRecord] = []
    hashes: list[str] = []
    lines: list[int] = []
    problems: list[str] = []
    chained: bool | None = None
    offset = 0
    follows_bad = False  # the previous line could not be read: its successor's links are moot
    broken_links = 0  # after the first broken link, each later one is counted, not listed
    torn: TornTail | None = None
    for index, raw in enumerate(terminated):
        lineno = index + 1
        try:
            record, prev, chain = decode_line(raw)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            if index == len(terminated) - 1 and not tail:
                torn = TornTail(lineno, offset, len(raw) + 1, str(exc))
                break
            unreadable = (f"{path}, line {lineno}: {exc}, and valid-looking lines follow it; "
                          f"this is corruption, not a cut-short write. {_CORRUPT_HINT}")
            if strict:
                raise JournalCorruptError(unreadable) from exc
            problems.append(unreadable)
            offset += len(raw) + 1
            follows_bad = True
            continue
        if chained is None:
            chained = prev is not None
        problem: str | None = None if follows_bad else _order_problem(
            path, lineno, record, records[-1] if records else None)
        if problem is None and (prev is not None) != chained:
            problem = (f"{path}, line {lineno}: " + (
                "a record without a chain link among chained records: written or rewritten by "
                "something other than tunegate" if chained else
                "a chained record among unchained ones"))
        if problem is None and chained and not follows_bad:
            expected = hashes[-1] if records else GENESIS
            if prev != expected:
                broken_links += 1
                before = f"line {lines[-1]}" if records else "the start of the chain"
                if broken_links == 1 or strict:
                    problem = (f"{path}, line {lineno}: its chain link does not match {before}: "
                               "a record was changed, removed or inserted after it was written")
        if problem is not None:
            if strict:
                raise JournalCorruptError(problem)
            problems.append(problem)
        records.append(record)
        hashes.append(chain)
        lines.append(lineno)
        offset += len(raw) + 1
        follows_bad = False
    if torn is None and tail:
        torn = TornTail(len(terminated) + 1, offset, len(tail), "no final newline (partial write)")
    if broken_links > 1:
        problems.append(f"{path}: {broken_links - 1} more broken chain link(s) after the first "
                        "(records after it were renumbered or rewritten too)")
    return Replay(records, torn, offset, bool(chained), tuple(hashes), tuple(lines),
                  tuple(problems))


def _order_problem(path: str | os.PathLike[str], lineno: int, record: JournalRecord,
                   previous: JournalRecord | None) -> str | None:
    expected = previous.seq + 1 if previous else 1
    if record.seq != expected:
        return (f"{path}, line {lineno}: seq {record.seq}, expected {expected} (a record is "
                "missing or repeated)")
    if previous is not None and record.epoch < previous.epoch:
        return (f"{path}, line {lineno}: epoch {record.epoch} after epoch {previous.epoch}: a "
                "writer with a stale lease wrote after another run took over")
    return None


class Journal:
    """An open journal: the replayed records plus an appender. Use :meth:`open`."""

    def __init__(self, path: Path, fd: int, replay: Replay, *, lease: ServiceLease | None,
                 epoch: int | None, fsync_every: int, chained: bool) -> None:
        self.path = path
        self.records: list[JournalRecord] = list(replay.records)
        self.torn = replay.torn
        self.chained = chained
        """Whether records carry chain links and the head file is kept (the file's format)."""
        self._prev = replay.hashes[-1] if replay.hashes else GENESIS
        self._fd: int | None = fd
        self._size = replay.valid_bytes
        self._lease = lease
        self._epoch = epoch
        self._fsync_every = fsync_every
        self._unsynced = 0
        self._broken = False
        self._head_fd: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, lease: ServiceLease | None = None,
             epoch: int | None = None, fsync_every: int = 1, chained: bool = False) -> Journal:
        """Open (creating if needed) a journal for appending, after replaying and repairing it.

        Args:
            path: The journal file.
            lease: When given, every append is fenced by it and stamped with its epoch.
            epoch: The epoch stamped on records when no lease is given; ``None`` (default)
                continues the file's last epoch (0 for a new file).
            fsync_every: ``fdatasync`` after every N-th record (1, the default: every record;
                0: only at :meth:`sync` and :meth:`close`). A chained journal needs 1: its head
                file must never name a record that is not on disk.
            chained: A new (empty) file gets chain links and a head file (see the module
                docstring). An existing file keeps its own format whatever this says.

        Raises:
            JournalCorruptError: See :func:`read_journal`; and, for a chained journal, a head
                file that does not match it (:func:`check_head`): records removed, rewritten,
                or a last line damaged after it was written.
            LeaseBusyError: Another open :class:`Journal` (any process) writes this file.
            LeaseLostError: The lease is lost, or the file already holds a newer epoch.
            ValueError: A chained journal with ``fsync_every`` other than 1.
        """
        target = Path(path)
        created = not target.exists()
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        journal: Journal | None = None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaseBusyError(f"journal {target} is open for writing elsewhere") from None
            if created:
                fsync_directory(target.parent if str(target.parent) else ".")
            replay = read_journal(target)
            is_chained = replay.chained if replay.records else (
                chained or head_path(target).exists())
            if is_chained:
                if fsync_every != 1:
                    raise ValueError(f"{target}: a chained journal syncs every record "
                                     "(fsync_every=1)")
                problems = check_head(target, replay)
                if problems:  # checked before the torn tail is cut: it may be the evidence
                    raise JournalCorruptError(f"{problems[0]}. Stop and keep the directory for "
                                              "inspection; tunegate replay lists every problem")
            if replay.torn is not None:
                log.warning("%s: dropped a torn last record at line %d (%d bytes): %s", target,
                            replay.torn.line, replay.torn.length, replay.torn.reason)
                os.ftruncate(fd, replay.valid_bytes)
                os.fsync(fd)
            journal = cls(target, fd, replay, lease=lease, epoch=epoch, fsync_every=fsync_every,
                          chained=is_chained)
            journal._current_epoch()
            if is_chained:
                journal._open_head()
        except BaseException:
            if journal is not None and journal._head_fd is not None:
                os.close(journal._head_fd)
            os.close(fd)
            raise
        return journal

    def _open_head(self) -> None:
        """Open (creating, durably, before any record) the head file, and bring it up to date:
        after a crash it may lag the file."""
        path = head_path(self.path)
        created = not path.exists()
        self._head_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        last = self.records[-1] if self.records else None
        self._write_head(last.seq if last else 0, self._prev, last.epoch if last else 0)
        os.fsync(self._head_fd)
        if created:
            fsync_directory(path.parent)

    def _write_head(self, records: int, head: str, epoch: int) -> None:
        """Overwrite the head file in place, after the record it names is on disk.

        One ``pwrite`` of :data:`HEAD_BYTES` at offset 0: the file never changes size, so a
        crash leaves the old head or the new one, never a mix (a single sector), and no
        ``fsync`` is needed per record: a head that lags after a power cut is allowed
        (:func:`check_head`), one ahead of the file is impossible.
        """
        assert self._head_fd is not None
        text = json.dumps({"records": records, "head": head, "epoch": epoch})
        os.pwrite(self._head_fd, (text.ljust(HEAD_BYTES - 1) + "\n").encode("ascii"), 0)

    @property
    def next_seq(self) -> int:
        """The seq the next :meth:`append` will get."""
        return self.records[-1].seq + 1 if self.records else 1

    def _current_epoch(self) -> int:
        last = self.records[-1].epoch if self.records else 0
        if self._lease is not None:
            epoch = self._lease.check_epoch()
        else:
            epoch = last if self._epoch is None else self._epoch
        if epoch < last:
            raise LeaseLostError(f"{self.path} already holds records of epoch {last}; this "
                                 f"writer's epoch {epoch} is stale, refusing to append")
        return epoch

    def append(self, type_: str, data: Mapping[str, Any]) -> int:
        """Append one record durably and return its seq (acknowledged once this returns).

        Raises:
            LeaseLostError: The attached lease was taken over (nothing is written).
            JournalCorruptError: The file changed behind this writer, or an earlier write
                failed half-way and could not be undone.
            OSError: The write or fsync failed (a partial line is removed first).
        """
        with self._lock:
            if self._fd is None or self._broken:
                raise JournalCorruptError(f"{self.path} is closed or in an unknown state after "
                                          "a failed write; reopen it to recover")
            epoch = self._current_epoch()
            seq = self.next_seq
            line, chain = encode_line(seq, epoch, type_, data, self._prev if self.chained else None)
            size = os.fstat(self._fd).st_size
            if size != self._size:
                self._broken = True
                raise JournalCorruptError(f"{self.path} is {size} bytes, this writer wrote "
                                          f"{self._size}: another process wrote to it")
            try:
                written = 0
                while written < len(line):
                    written += os.write(self._fd, line[written:])
                self._unsynced += 1
                if self._fsync_every and self._unsynced >= self._fsync_every:
                    os.fdatasync(self._fd)
                    self._unsynced = 0
                if self.chained:
                    self._write_head(seq, chain, epoch)
            except BaseException:
                try:
                    os.ftruncate(self._fd, self._size)
                except OSError:
                    self._broken = True
                raise
            self._size += len(line)
            self._prev = chain
            self.records.append(JournalRecord(seq, epoch, type_, _as_dict(data)))
            return seq

    def sync(self) -> None:
        """Flush every appended record to disk now."""
        with self._lock:
            if self._fd is not None and self._unsynced:
                os.fdatasync(self._fd)
                self._unsynced = 0

    def close(self) -> None:
        """Sync and close; idempotent."""
        self.sync()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._head_fd is not None:
                os.fsync(self._head_fd)
                os.close(self._head_fd)
                self._head_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _as_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    value = normalize(data)
    assert isinstance(value, dict)
    return value
