"""A journal's line format, its hash chain, and the head file that vouches for the chain's end.

One record per line, keys in this order::

    {"seq":1,"epoch":1,"type":"measurement","data":{"round":0,"ttft_ms":41.5},"prev":"5d1e...",
     "crc":"3f0c..."}

- ``seq`` starts at 1 and is contiguous; ``epoch`` is the lease epoch of the writer (``0``
  without a lease) and never decreases along the file.
- ``prev`` (chained journals only, see below) is the previous record's chain hash, or
  :data:`GENESIS` for the first record.
- A record's *chain hash* is the SHA-256 (64 hex digits) of the canonical JSON
  (:func:`~tunegate.tuner.digest.canonical_json`) of ``{"seq", "epoch", "type", "data"}``, plus
  ``"prev"`` when chained; ``crc`` is its first 16 hex digits (64 bits). SHA-256 rather than
  CRC-32 because a journal may grow past the ~77 000 records where a 32-bit check has a 50%
  chance of one undetected collision; 64 bits is plenty for damage and keeps lines short.

Tamper evidence (``Journal.open(..., chained=True)`` in :mod:`tunegate.tuner.journal`, what a
tuning run's ``journal.jsonl`` and ``decisions.jsonl`` use): each record carries the previous
record's chain hash, so changing, removing or inserting a record breaks the link of the record
after it, and the checksum alone no longer vouches for a line rewritten with a recomputed
``crc``. The chain's end, which no link protects, is kept in a small head file beside the
journal (``journal.jsonl`` -> ``journal.head``: ``{"records", "head", "epoch"}``, created with
the journal and overwritten in place after every durable append), so a removed last record or an
emptied file shows. The format follows the file: a journal written before chaining (no ``prev``)
stays unchained when appended to.

Telling a crash from tampering at the end of the file: the head is written only after its record
is complete and on disk, so after a crash it names the last whole record or, when the crash fell
between the record and the head update (or a power cut lost the head's latest page), an earlier
one; never a later one. A cut-short last line is therefore one the head never vouched for, and
is repaired as before; a damaged last line the head *does* vouch for was complete once and
changed afterwards, which :meth:`~tunegate.tuner.journal.Journal.open` refuses (as it refuses a
head naming more records than the file holds, or a hash the chain does not have there). A head
that lags is allowed: records past it still have to continue the chain, which no accident and no
casual edit does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunegate.tuner.digest import canonical_json

__all__ = ["CHAINED_KEYS", "GENESIS", "HEAD_BYTES", "RECORD_KEYS", "ChainHead", "JournalRecord",
           "Replay", "TornTail", "chain_hash", "check_head", "decode_line", "encode_line",
           "encode_record", "head_path", "read_head"]

RECORD_KEYS = {"seq", "epoch", "type", "data", "crc"}
CHAINED_KEYS = RECORD_KEYS | {"prev"}
GENESIS = hashlib.sha256(b"tunegate journal chain 1").hexdigest()
"""The ``prev`` of a chained journal's first record."""
HEAD_BYTES = 256
"""The head file's fixed size (JSON padded with spaces): overwritten in place, one sector."""

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
    """What :func:`read_journal` (or :func:`audit_journal`) found.

    Attributes:
        records: The valid records (:func:`audit_journal`: every line whose checksum holds).
        torn: A cut-short last line, if any.
        valid_bytes: The byte length of the part before it.
        chained: Whether the records carry chain links (``prev``).
        hashes: Each record's chain hash, in order.
        lines: Each record's 1-based line number.
        problems: :func:`audit_journal` only: everything wrong, each naming the file and line.
    """

    records: list[JournalRecord]
    torn: TornTail | None
    valid_bytes: int
    chained: bool = False
    hashes: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChainHead:
    """A chained journal's head file: how many records it vouches for, and the last one's hash."""

    records: int
    head: str
    epoch: int


def chain_hash(seq: int, epoch: int, type_: str, data_json: str, prev: str | None) -> str:
    """The chain hash: SHA-256 of the canonical JSON of the record's fields (sorted keys; the
    text is assembled in that order, the same bytes as ``canonical_json`` would give)."""
    link = "" if prev is None else f'"prev":{canonical_json(prev)},'
    body = (f'{{"data":{data_json},"epoch":{canonical_json(epoch)},{link}'
            f'"seq":{canonical_json(seq)},"type":{canonical_json(type_)}}}')
    return hashlib.sha256(body.encode("ascii")).hexdigest()


def encode_line(seq: int, epoch: int, type_: str, data: Mapping[str, Any],
            prev: str | None) -> tuple[bytes, str]:
    if not isinstance(type_, str) or not type_:
        raise ValueError("a journal record needs a non-empty string type")
    if not isinstance(data, Mapping):
        raise TypeError(f"journal data must be a mapping, not {type(data).__name__}")
    data_json = canonical_json(data)
    chain = chain_hash(seq, epoch, type_, data_json, prev)
    link = "" if prev is None else f',"prev":"{prev}"'
    line = (f'{{"seq":{seq},"epoch":{epoch},"type":{json.dumps(type_)},'
            f'"data":{data_json}{link},"crc":"{chain[:16]}"}}\n')
    return line.encode("ascii"), chain


def encode_record(seq: int, epoch: int, type_: str, data: Mapping[str, Any], *,
                  prev: str | None = None) -> bytes:
    """Return one journal line (with its newline) for the given record fields.

    Args:
        prev: The previous record's chain hash (:data:`GENESIS` for the first): a chained
            line. ``None``: an unchained line, the format of journals written before chaining.

    Raises:
        ValueError: ``type_`` is empty or ``data`` holds NaN, infinity or a non-string key.
        TypeError: ``data`` is not a mapping or holds a value JSON cannot represent.
    """
    return encode_line(seq, epoch, type_, data, prev)[0]


def decode_line(raw: bytes) -> tuple[JournalRecord, str | None, str]:
    """A line's record, its ``prev`` link (``None``: unchained) and its chain hash."""
    obj = json.loads(raw)
    if not isinstance(obj, dict) or set(obj) not in (RECORD_KEYS, CHAINED_KEYS):
        raise ValueError(f"expected the keys {sorted(RECORD_KEYS)} (and prev)")
    seq, epoch, type_, data, crc = (obj[k] for k in ("seq", "epoch", "type", "data", "crc"))
    prev = obj.get("prev")
    if not (isinstance(seq, int) and isinstance(epoch, int) and isinstance(type_, str)
            and isinstance(data, dict) and ("prev" not in obj or isinstance(prev, str))):
        raise ValueError("seq and epoch must be integers, type and prev strings, data an object")
    chain = chain_hash(seq, epoch, type_, canonical_json(data), prev)
    if crc != chain[:16]:
        raise ValueError("checksum mismatch")
    return JournalRecord(seq, epoch, type_, data), prev, chain


def head_path(path: str | os.PathLike[str]) -> Path:
    """The head file of a chained journal: ``journal.jsonl`` -> ``journal.head``."""
    return Path(path).with_suffix(".head")


def read_head(path: str | os.PathLike[str]) -> ChainHead | None:
    """The head file of the journal at ``path``; ``None`` when there is none.

    Raises:
        ValueError: The head file is not one tunegate wrote.
    """
    try:
        obj = json.loads(head_path(path).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"unreadable: {exc}") from None
    if not (isinstance(obj, dict) and isinstance(obj.get("records"), int)
            and isinstance(obj.get("head"), str) and isinstance(obj.get("epoch"), int)
            and obj["records"] >= 0):
        raise ValueError("expected the keys file, records, head and epoch")
    return ChainHead(obj["records"], obj["head"], obj["epoch"])


def check_head(path: str | os.PathLike[str], replay: Replay) -> list[str]:
    """Problems between a chained journal (as read) and its head file; ``[]`` when they agree.

    The head may lag the file (a crash between a record and its head update; a power cut
    before the head's page was written back), but never names more records than the file
    holds, nor a cut-short last line, nor another hash (see the module docstring).

    Args:
        path: The journal.
        replay: What :func:`read_journal` or the audit read from it.
    """
    where = head_path(path)
    try:
        head = read_head(path)
    except ValueError as exc:
        return [f"{where}: {exc}; the chain head was damaged or edited"]
    n = len(replay.records)
    if head is None:  # created (durably) with the journal, before its first record
        if n == 0:
            return []
        return [f"{where}: missing, but {path} holds {n} chained records: the head file was "
                f"deleted, so records removed from the end of {Path(path).name} cannot be seen"]
    if head.records > n:
        torn = replay.torn
        if torn is not None and head.records == n + 1:
            return [f"{path}, line {torn.line}: damaged ({torn.reason}) although {where} "
                    "vouches for it: changed after it was written, not cut short by a crash"]
        return [f"{path}: holds {n} records but {where} vouches for {head.records}: records "
                "were removed from its end"]
    expected = replay.hashes[head.records - 1] if head.records else GENESIS
    if head.head != expected:
        line = replay.lines[head.records - 1] if head.records else 0
        return [f"{path}, line {line}: record {head.records} does not match the chain head in "
                f"{where}: the file was rewritten after it was written"]
    return []
