"""A chained journal: each record carries the previous one's chain hash, a head file holds the end.

What the chain adds to the checksums: a line rewritten with a valid ``crc`` still breaks the
link of the record after it; records removed from the end, or the whole file emptied, disagree
with the head file; and a damaged last line is told apart from a write cut short by a crash (the
head vouches only for records that were complete and on disk), so ``--resume`` still repairs the
one and refuses the other.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunegate.errors import JournalCorruptError
from tunegate.tuner.digest import digest
from tunegate.tuner.journal import (
    GENESIS,
    Journal,
    audit_journal,
    encode_record,
    head_path,
    read_head,
    read_journal,
)


def _chained(path: Path, n: int) -> list[bytes]:
    with Journal.open(path, chained=True) as journal:
        for i in range(n):
            journal.append("measurement", {"round": i, "ttft_ms": 40.5 + i})
    return path.read_bytes().splitlines(keepends=True)


def _chain_hash(line: bytes) -> str:
    record = json.loads(line)
    return digest({k: record[k] for k in ("seq", "epoch", "type", "data", "prev")})


def _rewritten(line: bytes, **data: object) -> bytes:
    """The line with ``data`` changed and its checksum recomputed (keeping its link)."""
    record = json.loads(line)
    record["data"].update(data)
    return encode_record(record["seq"], record["epoch"], record["type"], record["data"],
                         prev=record["prev"])


def test_each_record_carries_the_previous_records_chain_hash(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    records = [json.loads(line) for line in lines]
    assert list(records[0]) == ["seq", "epoch", "type", "data", "prev", "crc"]
    assert records[0]["prev"] == GENESIS
    assert [r["prev"] for r in records[1:]] == [_chain_hash(lines[0]), _chain_hash(lines[1])]
    assert all(r["crc"] == _chain_hash(line)[:16] for r, line in zip(records, lines, strict=True))
    head = read_head(path)
    assert head is not None and (head.records, head.head) == (3, _chain_hash(lines[2]))
    assert head_path(path).name == "journal.head"
    assert read_journal(path).chained and audit_journal(path).problems == ()


def test_a_cut_short_last_line_is_repaired_not_reported(tmp_path: Path) -> None:
    """A crash mid-write: the head never vouched for the partial line."""
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    partial = encode_record(4, 0, "measurement", {"round": 3}, prev=_chain_hash(lines[2]))
    for cut in (1, len(partial) // 2, len(partial) - 1):
        path.write_bytes(b"".join(lines) + partial[:cut])
        audit = audit_journal(path)
        assert audit.torn is not None and audit.problems == ()
        with Journal.open(path) as journal:
            assert [r.seq for r in journal.records] == [1, 2, 3] and journal.torn is not None
        assert path.read_bytes() == b"".join(lines)


def test_a_head_left_behind_by_a_crash_is_allowed_and_brought_up_to_date(tmp_path: Path) -> None:
    """Killed between a record and its head update: the head names the record before."""
    path = tmp_path / "journal.jsonl"
    _chained(path, 2)
    stale = head_path(path).read_bytes()
    with Journal.open(path) as journal:
        journal.append("measurement", {"round": 2})
    head_path(path).write_bytes(stale)
    assert audit_journal(path).problems == ()
    with Journal.open(path) as journal:
        assert journal.append("measurement", {"round": 3}) == 4
    head = read_head(path)
    assert head is not None and head.records == 4 and audit_journal(path).problems == ()


def test_a_last_line_damaged_after_it_was_written_is_refused(tmp_path: Path) -> None:
    """The same bytes a torn write leaves (a checksum that fails), but the head vouches for
    the line: it was complete, so it was changed afterwards; resume refuses, keeping it."""
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    path.write_bytes(b"".join(lines[:2]) + lines[2].replace(b'"round":2', b'"round":9'))
    damaged = path.read_bytes()
    with pytest.raises(JournalCorruptError, match=r"line 3: damaged .* not cut short by a crash"):
        Journal.open(path)
    assert path.read_bytes() == damaged
    assert any("not cut short by a crash" in p for p in audit_journal(path).problems)


def test_a_record_rewritten_with_a_valid_checksum_breaks_the_next_link(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 4)
    lines[1] = _rewritten(lines[1], ttft_ms=1.0)
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalCorruptError, match=rf"{path}, line 3: its chain link does not "
                                                  "match line 2"):
        read_journal(path)
    with pytest.raises(JournalCorruptError, match="line 3: its chain link"):
        Journal.open(path)


def test_rewriting_every_link_after_a_change_is_caught_by_the_head(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    prev = _chain_hash(lines[0])
    forged = [lines[0]]
    for index, line in enumerate(lines[1:], start=2):
        record = json.loads(line)
        data = {**record["data"], "ttft_ms": 1.0} if index == 2 else record["data"]
        forged.append(encode_record(record["seq"], record["epoch"], record["type"], data,
                                    prev=prev))
        prev = _chain_hash(forged[-1])
    path.write_bytes(b"".join(forged))
    assert read_journal(path).records[1].data["ttft_ms"] == 1.0  # the links themselves hold
    with pytest.raises(JournalCorruptError, match="does not match the chain head in"):
        Journal.open(path)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda lines: lines[:-1], "holds 2 records but .* vouches for 3: records were removed"),
    (lambda lines: [], "holds 0 records but .* vouches for 3"),
], ids=["last-record-removed", "emptied"])
def test_records_removed_from_the_end_are_seen(tmp_path: Path, damage: object,
                                               message: str) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    path.write_bytes(b"".join(damage(lines)))  # type: ignore[operator]
    with pytest.raises(JournalCorruptError, match=message):
        Journal.open(path)
    assert audit_journal(path).problems


def test_a_deleted_head_file_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    _chained(path, 3)
    head_path(path).unlink()
    with pytest.raises(JournalCorruptError, match=r"journal\.head: missing"):
        Journal.open(path)


def test_audit_lists_every_problem_and_keeps_every_readable_record(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 5)
    lines[1] = _rewritten(lines[1], ttft_ms=1.0)
    del lines[3]
    path.write_bytes(b"".join(lines))
    audit = audit_journal(path)
    assert [r.seq for r in audit.records] == [1, 2, 3, 5]
    assert len(audit.problems) == 3, audit.problems
    assert "line 3: its chain link does not match line 2" in audit.problems[0]
    assert "line 4: seq 5, expected 4" in audit.problems[1]
    assert "holds 4 records but" in audit.problems[2]


def test_a_journal_written_before_chaining_stays_unchained(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(encode_record(1, 0, "config", {}) + encode_record(2, 0, "transition", {}))
    with Journal.open(path, chained=True) as journal:
        assert not journal.chained
        journal.append("transition", {})
    assert "prev" not in json.loads(path.read_bytes().splitlines()[-1])
    assert not head_path(path).exists() and audit_journal(path).problems == ()


def test_a_chained_journal_syncs_every_record(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync_every=1"):
        Journal.open(tmp_path / "journal.jsonl", chained=True, fsync_every=0)


def test_an_unchained_line_among_chained_ones_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _chained(path, 3)
    record = json.loads(lines[1])
    lines[1] = encode_record(record["seq"], record["epoch"], record["type"], record["data"])
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalCorruptError, match="line 2: a record without a chain link"):
        read_journal(path)
