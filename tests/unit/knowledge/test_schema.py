"""Schema versions: a new knowledge base runs every migration from version 0; an older one
runs the missing ones, in order, in one transaction, and keeps its rows."""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

from tunegate.errors import InputFileError
from tunegate.knowledge import KnowledgeBase, schema
from tunegate.knowledge.schema import MIGRATIONS, Migration

samples: Any = importlib.import_module("tunegate_tests_kb_samples")  # conftest.py


def _meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT key, value FROM tunegate_kb_meta").fetchall())


def _columns(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute("PRAGMA table_info(tunegate_kb_runs)")]


def test_the_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert schema.latest_version() == len(MIGRATIONS)


def test_a_new_knowledge_base_names_itself_and_its_version(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    KnowledgeBase.open(str(path)).close()
    meta = _meta(path)
    assert meta["application"] == "tunegate knowledge base"
    assert meta["schema_version"] == str(schema.latest_version())
    assert meta["created_by"].startswith("tunegate ")


def _add_model_digest(connection: Connection) -> None:
    """A plausible version 2: a listing column filled from the documents."""
    connection.execute(text("ALTER TABLE tunegate_kb_runs ADD COLUMN model_digest VARCHAR(128)"))
    connection.execute(text(
        "UPDATE tunegate_kb_runs SET model_digest = "
        "json_extract(document, '$.fingerprint.fields.\"model.digest\".value')"))


def test_an_older_knowledge_base_is_upgraded_and_keeps_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:  # written by "the previous release"
        kb.add(samples.record("run-a"))
        kb.add(samples.record("run-b", recorded_at="2024-06-01T00:00:00Z"))
    monkeypatch.setattr(schema, "MIGRATIONS", (
        *MIGRATIONS, Migration(2, "model digest column", _add_model_digest)))
    with KnowledgeBase.open(str(path), create=False) as kb:
        assert kb.version == 2
        assert [row.id for row in kb.list()] == ["run-b", "run-a"]
        assert kb.get("run-a") == samples.record("run-a")
    assert _meta(path)["schema_version"] == "2"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT DISTINCT model_digest FROM tunegate_kb_runs").fetchall() == [
            ("sha256:9f1c2e",)]


def _half_done(connection: Connection) -> None:
    connection.execute(text("ALTER TABLE tunegate_kb_runs ADD COLUMN half VARCHAR(8)"))
    connection.execute(text("UPDATE no_such_table SET x = 1"))


def test_a_failed_migration_leaves_the_knowledge_base_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record("run-a"))
    columns = _columns(path)
    monkeypatch.setattr(schema, "MIGRATIONS", (
        *MIGRATIONS, Migration(2, "adds a column, then fails", _half_done)))
    with pytest.raises(InputFileError, match="cannot upgrade it: no such table"):
        KnowledgeBase.open(str(path))
    assert _meta(path)["schema_version"] == "1"
    assert _columns(path) == columns
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS)
    with KnowledgeBase.open(str(path)) as kb:
        assert [row.id for row in kb.list()] == ["run-a"]


def test_a_migration_list_out_of_order_is_a_bug_caught_before_any_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "MIGRATIONS", (
        *MIGRATIONS, Migration(3, "skips version 2", _add_model_digest)))
    with pytest.raises(RuntimeError, match=r"MIGRATIONS\[1\] produces version 3"):
        KnowledgeBase.open(str(tmp_path / "kb.sqlite"))
