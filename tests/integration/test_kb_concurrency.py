"""Several processes on one knowledge base at once: nothing lost, nothing corrupt, every read
sees whole records, and processes that create the same new knowledge base together all
succeed.

Each worker is a fresh interpreter (what ``multiprocessing``'s spawn gives, without pickling
a function from a test module that is imported by path). This file is also the worker
script: ``python test_kb_concurrency.py MODE ...``.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
WRITERS, RECORDS, READERS, CREATORS = 4, 15, 2, 4


def _samples() -> Any:
    path = Path(__file__).parents[1] / "unit" / "knowledge" / "samples.py"
    spec = importlib.util.spec_from_file_location("tunegate_tests_kb_samples_workers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait_for(go: str) -> None:
    while not Path(go).exists():
        time.sleep(0.001)


def _write(kb_path: str, worker: str, go: str) -> None:
    """Record RECORDS runs, each read back at once, and the shared run "shared" each time."""
    from tunegate.knowledge import KnowledgeBase

    samples = _samples()
    _wait_for(go)
    with KnowledgeBase.open(kb_path) as kb:
        for i in range(RECORDS):
            run_id = f"w{worker}-{i:03d}"
            record = samples.record(run_id, recorded_at=f"2024-05-01T12:{i:02d}:00Z")
            kb.add(record)
            assert kb.get(run_id) == record
            kb.add(samples.record("shared", status=f"written-by-{worker}"))


def _read(kb_path: str, go: str, stop: str) -> None:
    """Read every record until told to stop, and once more after; print the counts seen."""
    from tunegate.knowledge import KnowledgeBase

    _wait_for(go)
    seen = []
    with KnowledgeBase.open(kb_path) as kb:
        while True:
            stopping = Path(stop).exists()
            records = kb.records()  # every document whole, or this raises
            seen.append(len([r for r in records if r.id != "shared"]))
            if stopping:
                break
    print(json.dumps(seen))


def _create(kb_path: str, name: str, go: str) -> None:
    from tunegate.knowledge import KnowledgeBase

    samples = _samples()
    _wait_for(go)
    with KnowledgeBase.open(kb_path) as kb:
        kb.add(samples.record(f"creator-{name}"))


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    return out


def _integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        result: str = db.execute("PRAGMA integrity_check").fetchone()[0]
    return result


def test_concurrent_writers_and_readers_lose_nothing(tmp_path: Path) -> None:
    from tunegate.knowledge import KnowledgeBase

    path, go, stop = tmp_path / "kb.sqlite", tmp_path / "go", tmp_path / "stop"
    KnowledgeBase.open(str(path)).close()
    writers = [_spawn("write", str(path), str(n), str(go)) for n in range(WRITERS)]
    readers = [_spawn("read", str(path), str(go), str(stop)) for _ in range(READERS)]
    go.touch()
    for writer in writers:
        _finish(writer)
    stop.touch()
    for reader in readers:
        seen = json.loads(_finish(reader))
        assert seen == sorted(seen)  # a count never goes back: no lost or torn write seen
        assert seen and seen[-1] == WRITERS * RECORDS
    assert _integrity(path) == "ok"
    samples = _samples()
    with KnowledgeBase.open(str(path)) as kb:
        ids = [row.id for row in kb.list()]
        assert sorted(ids) == sorted([f"w{n}-{i:03d}" for n in range(WRITERS)
                                      for i in range(RECORDS)] + ["shared"])
        assert kb.get("w3-007") == samples.record("w3-007", recorded_at="2024-05-01T12:07:00Z")
        assert kb.get("shared").status.startswith("written-by-")  # one row, the last write


def test_processes_creating_the_same_knowledge_base_at_once_all_succeed(tmp_path: Path) -> None:
    from tunegate.knowledge import KnowledgeBase

    path, go = tmp_path / "new" / "dir" / "kb.sqlite", tmp_path / "go"
    creators = [_spawn("create", str(path), str(n), str(go)) for n in range(CREATORS)]
    time.sleep(0.5)  # let every creator reach the start line
    go.touch()
    for creator in creators:
        _finish(creator)
    assert _integrity(path) == "ok"
    with sqlite3.connect(path) as db:
        meta = db.execute("SELECT key, value FROM tunegate_kb_meta ORDER BY key").fetchall()
    assert [key for key, _ in meta] == ["application", "created_at", "created_by",
                                        "schema_version"]
    with KnowledgeBase.open(str(path)) as kb:
        assert sorted(row.id for row in kb.list()) == [f"creator-{n}" for n in range(CREATORS)]


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    {"write": _write, "read": _read, "create": _create}[mode](*rest)
