"""Journal: round trip, torn last line dropped, mid-file corruption stops, order checks."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from tunegate.errors import JournalCorruptError, LeaseBusyError, LeaseLostError
from tunegate.tuner.journal import Journal, JournalRecord, encode_record, read_journal


def _write(path: Path, n: int) -> list[bytes]:
    with Journal.open(path) as journal:
        for i in range(n):
            journal.append("measurement", {"round": i, "ttft_ms": 40.5 + i})
    return path.read_bytes().splitlines(keepends=True)


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, epoch=3) as journal:
        assert journal.next_seq == 1
        assert journal.append("start", {"config": {"max_num_seqs": 64}, "ok": True}) == 1
        assert journal.append("measurement", {"x": [0.1, None, "é"]}) == 2
    reopened = Journal.open(path)
    assert reopened.records == [
        JournalRecord(1, 3, "start", {"config": {"max_num_seqs": 64}, "ok": True}),
        JournalRecord(2, 3, "measurement", {"x": [0.1, None, "é"]}),
    ]
    assert reopened.torn is None and reopened.next_seq == 3
    reopened.close()
    first = json.loads(path.read_bytes().splitlines()[0])
    assert list(first) == ["seq", "epoch", "type", "data", "crc"] and len(first["crc"]) == 16


def test_line_format_is_stable() -> None:
    line = encode_record(1, 1, "measurement", {"round": 0, "ttft_ms": 41.5})
    assert line == (b'{"seq":1,"epoch":1,"type":"measurement","data":{"round":0,"ttft_ms":41.5},'
                    b'"crc":"' + line[-19:-3] + b'"}\n')
    assert line == encode_record(1, 1, "measurement", {"ttft_ms": 41.5, "round": 0})
    assert line != encode_record(1, 2, "measurement", {"round": 0, "ttft_ms": 41.5})


@pytest.mark.parametrize("cut", [1, 10, -2, -1])
def test_torn_last_line_is_dropped_and_truncated(
    tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write(path, 3)
    path.write_bytes(b"".join(lines[:2]) + lines[2][:cut])  # a write cut short by hand
    with caplog.at_level(logging.WARNING), Journal.open(path) as journal:
        assert [r.seq for r in journal.records] == [1, 2]
        assert journal.torn is not None and journal.torn.line == 3
        assert journal.append("measurement", {"round": 2}) == 3
    assert "torn last record at line 3" in caplog.text
    assert len(read_journal(path).records) == 3


def test_last_line_with_bad_checksum_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write(path, 3)
    path.write_bytes(b"".join(lines[:2]) + lines[2].replace(b'"round":2', b'"round":9'))
    replay = read_journal(path)
    assert [r.seq for r in replay.records] == [1, 2]
    assert replay.torn is not None and replay.torn.reason == "checksum mismatch"
    assert path.read_bytes().count(b"\n") == 3  # read_journal never modifies
    Journal.open(path).close()
    assert path.read_bytes() == b"".join(lines[:2])


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: line.replace(b'"round":1', b'"round":7'),  # bit rot: checksum
        lambda line: line[:20] + b"\n",  # invalid JSON
        lambda line: b"\n",  # an empty line
    ],
)
def test_mid_file_corruption_raises_with_file_and_line(tmp_path: Path, damage: object) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write(path, 4)
    lines[1] = damage(lines[1])  # type: ignore[operator]
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalCorruptError, match=rf"{path}, line 2: "):
        Journal.open(path)
    assert path.read_bytes() == b"".join(lines)  # left untouched for inspection


def test_bad_line_followed_by_partial_line_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    lines = _write(path, 3)
    path.write_bytes(lines[0] + b"garbage\n" + lines[2][:10])
    with pytest.raises(JournalCorruptError, match="line 2"):
        read_journal(path)


def test_seq_gap_repeat_and_epoch_regression_are_corruption(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(encode_record(1, 0, "a", {}) + encode_record(3, 0, "a", {}))
    with pytest.raises(JournalCorruptError, match="line 2: seq 3, expected 2"):
        read_journal(path)
    path.write_bytes(encode_record(1, 0, "a", {}) + encode_record(1, 0, "a", {}))
    with pytest.raises(JournalCorruptError, match="seq 1, expected 2"):
        read_journal(path)
    path.write_bytes(encode_record(1, 2, "a", {}) + encode_record(2, 1, "a", {}))
    with pytest.raises(JournalCorruptError, match="epoch 1 after epoch 2"):
        read_journal(path)


def test_stale_writer_epoch_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, epoch=2) as journal:
        journal.append("a", {})
    with pytest.raises(LeaseLostError, match="epoch 1 is stale"):
        Journal.open(path, epoch=1)


def test_second_writer_refused_and_foreign_append_detected(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal.open(path)
    journal.append("a", {})
    with pytest.raises(LeaseBusyError):
        Journal.open(path)
    with path.open("ab") as sneaky:
        sneaky.write(encode_record(2, 0, "a", {}))
    with pytest.raises(JournalCorruptError, match="another process wrote"):
        journal.append("a", {})
    journal.close()


def test_failed_write_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal.open(path)
    journal.append("a", {"i": 0})
    real_write = os.write

    def half_then_fail(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError, match="No space"):
        journal.append("a", {"i": 1})
    monkeypatch.undo()
    assert journal.append("a", {"i": 1}) == 2
    journal.close()
    assert [r.data["i"] for r in read_journal(path).records] == [0, 1]


def test_bad_data_refused_before_writing(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.jsonl") as journal:
        with pytest.raises(ValueError):
            journal.append("a", {"x": float("nan")})
        with pytest.raises(ValueError):
            journal.append("", {})
        with pytest.raises(TypeError):
            journal.append("a", [1, 2])  # type: ignore[arg-type]
        assert journal.append("a", {}) == 1


def test_fsync_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = os.fdatasync
    def fdatasync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with Journal.open(tmp_path / "every.jsonl") as journal:
        for _ in range(3):
            journal.append("a", {})
        assert len(calls) == 3
    calls.clear()
    with Journal.open(tmp_path / "batched.jsonl", fsync_every=0) as journal:
        for _ in range(3):
            journal.append("a", {})
        assert calls == []
    assert len(calls) == 1  # close syncs
