"""Atomic replacement: old or new content, never a mix; fsync order; no stray temp files."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunegate.files.atomic import atomic_write_bytes, atomic_write_json

WRITER = """
import sys
from tunegate.files.atomic import atomic_write_json
path, start = sys.argv[1], int(sys.argv[2])
pad = "x" * 400_000
n = start
while True:
    atomic_write_json(path, {"n": n, "pad": pad, "check": n * 7})
    n += 1
"""


def test_writes_json_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    atomic_write_json(target, {"status": "running"})
    atomic_write_json(target, {"status": "converged", "kept": [1, 2]})
    assert json.loads(target.read_text()) == {"status": "converged", "kept": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    assert target.stat().st_mode & 0o777 == 0o600  # private by default (run directories)


def test_refuses_nan_and_leaves_old_content(tmp_path: Path) -> None:
    target = tmp_path / "kept.json"
    atomic_write_json(target, {"a": 1})
    with pytest.raises(ValueError):
        atomic_write_json(target, {"a": float("nan")})
    assert json.loads(target.read_text()) == {"a": 1}


def test_failed_rename_keeps_old_content_and_removes_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "kept.json"
    atomic_write_bytes(target, b"old")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.json"]


def test_file_fsynced_before_rename_and_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync-file")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write_bytes(tmp_path / "f", b"data")
    assert events == ["fsync-file", "replace", "fsync-dir"]


def _current_n(path: Path) -> int:
    try:
        return int(json.loads(path.read_text())["n"])
    except FileNotFoundError:
        return -1


def test_kill_9_mid_write_loop_leaves_a_parseable_file(tmp_path: Path) -> None:
    """A writer replacing a 400 kB file in a loop is SIGKILLed 15 times at random moments."""
    target = tmp_path / "summary.json"
    rng = random.Random(20240601)
    last, mid_write = -1, 0
    for _ in range(15):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(last + 1)])
        deadline = time.monotonic() + 10
        while _current_n(target) <= last and time.monotonic() < deadline:
            time.sleep(0.002)  # this writer has replaced the file at least once
        time.sleep(rng.uniform(0.0, 0.04))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        content = json.loads(target.read_text())  # never torn
        assert content["check"] == content["n"] * 7
        assert content["n"] > last  # never an older version after a newer one
        last = content["n"]
        strays = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        mid_write += len(strays)
        for stray in strays:
            stray.unlink()
    print(f"15 kills, {last + 1} writes, {mid_write} kills landed mid-write (temp file left)")
