"""What is not a knowledge base (or not one this tunegate can read) is refused in one line
and left byte for byte as it was; a lock held too long is an error, not a hang or a trace."""

from __future__ import annotations

import importlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import InputFileError, UsageError
from tunegate.knowledge import KnowledgeBase

samples: Any = importlib.import_module("tunegate_tests_kb_samples")  # conftest.py


def _refused(path: Path, match: str) -> str:
    """Open ``path`` both ways; both refuse with one line; the file's bytes stay as they were
    and nothing appears beside it."""
    before, beside = path.read_bytes(), sorted(os.listdir(path.parent))
    messages = []
    for create in (True, False):
        with pytest.raises(InputFileError, match=match) as caught:
            KnowledgeBase.open(str(path), create=create)
        messages.append(str(caught.value))
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == beside
    assert all("\n" not in m and str(path) in m for m in messages)
    return messages[0]


def test_a_file_that_is_not_sqlite_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"my tuning notes\n\x00\xff" * 100)
    _refused(path, "is not a SQLite database .*left unchanged")


def test_a_damaged_sqlite_file_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4080))
    _refused(path, "damaged or not a SQLite database")


def test_someone_elses_sqlite_database_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "optuna.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE studies (study_id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO studies VALUES (1, 'mine')")
    db.close()
    message = _refused(path, "not a tunegate knowledge base")
    assert "studies" in message


def test_a_meta_table_that_does_not_name_tunegate_is_foreign(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE tunegate_kb_meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT INTO tunegate_kb_meta VALUES ('application', 'something else')")
    db.close()
    _refused(path, "does not name the application")


def test_a_knowledge_base_from_a_newer_tunegate_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record())
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tunegate_kb_meta SET value = '7' WHERE key = 'schema_version'")
    db.close()
    message = _refused(path, "written by a newer tunegate")
    assert "schema version 7, this one knows up to 1" in message


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a directory"):
        KnowledgeBase.open(str(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    path.write_bytes(b"")
    path.chmod(0)
    with pytest.raises(InputFileError, match="cannot be read"):
        KnowledgeBase.open(str(path))


def test_a_write_blocked_past_the_busy_timeout_fails_as_locked(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path), busy_timeout_s=0.05) as kb:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(InputFileError, match="another process holds it locked"):
                kb.add(samples.record())
            assert kb.list() == []  # WAL: reading goes on while another process writes
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        kb.add(samples.record())
        assert len(kb.list()) == 1


@pytest.mark.parametrize("url", ["postgresql://tuner@127.0.0.1:1/kb",
                                 "postgresql+psycopg://tuner@127.0.0.1:1/kb"])
def test_a_database_server_that_cannot_be_used_is_one_usage_error(url: str) -> None:
    """Without the driver installed: a config error naming it; with it: the refused connection
    (no server listens on port 1). Either way one line, exit 2."""
    with pytest.raises(UsageError) as caught:
        KnowledgeBase.open(url)
    message = str(caught.value)
    assert "\n" not in message and url in message
    assert "driver is not installed" in message or "cannot read it" in message
