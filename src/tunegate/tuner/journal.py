"""Append-only, checksummed JSONL journal: what a killed run resumes from.

One record per line, keys in this order::

    {"seq":1,"epoch":1,"type":"measurement","data":{"round":0,"ttft_ms":41.5},"crc":"3f0c..."}

- ``seq`` starts at 1 and is contiguous; ``epoch`` is the lease epoch of the writer (``0``
  without a lease) and never decreases along the file.
- ``crc`` is the first 16 hex digits (64 bits) of the SHA-256 of the canonical JSON
  (:func:`~tunegate.tuner.digest.canonical_json`) of ``{"seq", "epoch", "type", "data"}``.
  SHA-256 rather than CRC-32 because a journal may grow past the ~77 000 records where a 32-bit
  check has a 50% chance of one undetected collision; 64 bits is plenty and keeps lines short.

Durability: :meth:`Journal.append` writes the whole line with one ``write`` on an ``O_APPEND``
descriptor, then ``fdatasync`` (every record by default). A record is *acknowledged* when
``append`` returns; an acknowledged record survives ``kill -9`` and, with fsync on, power loss.

Recovery (:meth:`Journal.open`): only newline-terminated lines count. If the *last* line is
unterminated, unparsable or fails its checksum, it was a write cut short (never acknowledged):
it is reported (:attr:`Journal.torn`, a warning in the log) and truncated away. A bad line
*followed by anything* is corruption, not a crash artefact: :class:`JournalCorruptError` names
the file and line, and the run must stop. So does a ``seq`` gap or repeat, or an epoch that goes
down (a writer with a stale lease wrote after a takeover).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tunegate.errors import JournalCorruptError, LeaseBusyError, LeaseLostError
from tunegate.tuner.atomic import fsync_directory
from tunegate.tuner.digest import canonical_json, normalize
from tunegate.tuner.lease import Lease

__all__ = ["Journal", "JournalRecord", "Replay", "TornTail", "encode_record", "read_journal"]

log = logging.getLogger(__name__)
_KEYS = {"seq", "epoch", "type", "data", "crc"}


@dataclass(frozen=True)
class JournalRecord:
    """One journal entry."""

    seq: int
    epoch: int
    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class TornTail:
    """A cut-short last line found (and, by :meth:`Journal.open`, removed) at recovery."""

    line: int
    offset: int
    length: int
    reason: str


@dataclass(frozen=True)
class Replay:
    """What :func:`read_journal` found: the valid records and any torn last line."""

    records: list[JournalRecord]
    torn: TornTail | None
    valid_bytes: int


def _checksum(seq: int, epoch: int, type_: str, data: Any, *,
              data_json: str | None = None) -> str:
    """The first 16 hex digits of the SHA-256 of the canonical JSON of
    ``{"seq", "epoch", "type", "data"}``; ``data_json``, when given, is ``canonical_json(data)``
    already computed (the text is assembled in sorted key order, the same bytes)."""
    if data_json is None:
        data_json = canonical_json(data)
    body = (f'{{"data":{data_json},"epoch":{canonical_json(epoch)},"seq":{canonical_json(seq)},'
            f'"type":{canonical_json(type_)}}}')
    return hashlib.sha256(body.encode("ascii")).hexdigest()[:16]


def encode_record(seq: int, epoch: int, type_: str, data: Mapping[str, Any]) -> bytes:
    """Return one journal line (with its newline) for the given record fields.

    Raises:
        ValueError: ``type_`` is empty or ``data`` holds NaN, infinity or a non-string key.
        TypeError: ``data`` is not a mapping or holds a value JSON cannot represent.
    """
    if not isinstance(type_, str) or not type_:
        raise ValueError("a journal record needs a non-empty string type")
    if not isinstance(data, Mapping):
        raise TypeError(f"journal data must be a mapping, not {type(data).__name__}")
    data_json = canonical_json(data)
    crc = _checksum(seq, epoch, type_, data, data_json=data_json)
    line = (f'{{"seq":{seq},"epoch":{epoch},"type":{json.dumps(type_)},'
            f'"data":{data_json},"crc":"{crc}"}}\n')
    return line.encode("ascii")


def _decode(raw: bytes) -> JournalRecord:
    obj = json.loads(raw)
    if not isinstance(obj, dict) or set(obj) != _KEYS:
        raise ValueError(f"expected the keys {sorted(_KEYS)}")
    seq, epoch, type_, data, crc = (obj[k] for k in ("seq", "epoch", "type", "data", "crc"))
    if not (isinstance(seq, int) and isinstance(epoch, int) and isinstance(type_, str)
            and isinstance(data, dict)):
        raise ValueError("seq and epoch must be integers, type a string, data an object")
    if crc != _checksum(seq, epoch, type_, data):
        raise ValueError("checksum mismatch")
    return JournalRecord(seq, epoch, type_, data)


def read_journal(path: str | os.PathLike[str]) -> Replay:
    """Read and verify a journal without changing it (``tunegate replay`` and reports use this).

    Args:
        path: The journal file; a missing file reads as empty.

    Returns:
        The valid records, the torn last line if any, and the byte length of the valid part.

    Raises:
        JournalCorruptError: Damage before the last line, a seq gap or repeat, or a decreasing
            epoch; the message names the file and the 1-based line.
    """
    try:
        content = Path(path).read_bytes()
    except FileNotFoundError:
        return Replay([], None, 0)
    chunks = content.split(b"\n")
    terminated, tail = chunks[:-1], chunks[-1]
    records: list[JournalRecord] = []
    offset = 0
    for index, raw in enumerate(terminated):
        lineno = index + 1
        try:
            record = _decode(raw)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            if index == len(terminated) - 1 and not tail:
                return Replay(records, TornTail(lineno, offset, len(raw) + 1, str(exc)), offset)
            raise JournalCorruptError(
                f"{path}, line {lineno}: {exc}, and valid-looking lines follow it; this is "
                "corruption, not a cut-short write. Stop, keep the file for inspection, and "
                "resume from a copy truncated before that line only if you accept the loss"
            ) from exc
        _check_order(path, lineno, record, records[-1] if records else None)
        records.append(record)
        offset += len(raw) + 1
    torn = None
    if tail:
        torn = TornTail(len(terminated) + 1, offset, len(tail), "no final newline (partial write)")
    return Replay(records, torn, offset)


def _check_order(path: str | os.PathLike[str], lineno: int, record: JournalRecord,
                 previous: JournalRecord | None) -> None:
    expected = previous.seq + 1 if previous else 1
    if record.seq != expected:
        raise JournalCorruptError(f"{path}, line {lineno}: seq {record.seq}, expected {expected}"
                                  " (a record is missing or repeated)")
    if previous is not None and record.epoch < previous.epoch:
        raise JournalCorruptError(
            f"{path}, line {lineno}: epoch {record.epoch} after epoch {previous.epoch}: a writer "
            "with a stale lease wrote after another run took over")


class Journal:
    """An open journal: the replayed records plus an appender. Use :meth:`open`."""

    def __init__(self, path: Path, fd: int, replay: Replay, *, lease: Lease | None,
                 epoch: int | None, fsync_every: int) -> None:
        self.path = path
        self.records: list[JournalRecord] = list(replay.records)
        self.torn = replay.torn
        self._fd: int | None = fd
        self._size = replay.valid_bytes
        self._lease = lease
        self._epoch = epoch
        self._fsync_every = fsync_every
        self._unsynced = 0
        self._broken = False
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, lease: Lease | None = None,
             epoch: int | None = None, fsync_every: int = 1) -> Journal:
        """Open (creating if needed) a journal for appending, after replaying and repairing it.

        Args:
            path: The journal file.
            lease: When given, every append is fenced by it and stamped with its epoch.
            epoch: The epoch stamped on records when no lease is given; ``None`` (default)
                continues the file's last epoch (0 for a new file).
            fsync_every: ``fdatasync`` after every N-th record (1, the default: every record;
                0: only at :meth:`sync` and :meth:`close`).

        Raises:
            JournalCorruptError: See :func:`read_journal`.
            LeaseBusyError: Another open :class:`Journal` (any process) writes this file.
            LeaseLostError: The lease is lost, or the file already holds a newer epoch.
        """
        target = Path(path)
        created = not target.exists()
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaseBusyError(f"journal {target} is open for writing elsewhere") from None
            if created:
                fsync_directory(target.parent if str(target.parent) else ".")
            replay = read_journal(target)
            if replay.torn is not None:
                log.warning("%s: dropped a torn last record at line %d (%d bytes): %s", target,
                            replay.torn.line, replay.torn.length, replay.torn.reason)
                os.ftruncate(fd, replay.valid_bytes)
                os.fsync(fd)
            journal = cls(target, fd, replay, lease=lease, epoch=epoch, fsync_every=fsync_every)
            journal._current_epoch()
        except BaseException:
            os.close(fd)
            raise
        return journal

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
            line = encode_record(seq, epoch, type_, data)
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
            except BaseException:
                try:
                    os.ftruncate(self._fd, self._size)
                except OSError:
                    self._broken = True
                raise
            self._size += len(line)
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

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _as_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    value = normalize(data)
    assert isinstance(value, dict)
    return value
