"""The store: what is recorded comes back whole, once per run, newest first, by id or by a
unique start of one; forgetting removes it; read-only opening creates nothing."""

from __future__ import annotations

import importlib
import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import InputFileError, UsageError
from tunegate.knowledge import KnowledgeBase, RunRow

samples: Any = importlib.import_module("tunegate_tests_kb_samples")  # conftest.py

A = "4f2a9c1be0d84c6fa1b27e93d5c0f811"
B = "4f2a9c1b77e2418e9b6b3d0aa0c5e2f0"  # shares A's first 8 characters
C = "d2c7a0f45e9b4b8c8f1f0e6a7b9c3d21"


@pytest.fixture
def kb(tmp_path: Path) -> Any:
    with KnowledgeBase.open(str(tmp_path / "kb.sqlite")) as opened:
        yield opened


def test_a_recorded_run_comes_back_unchanged(kb: KnowledgeBase) -> None:
    record = samples.record(A)
    assert kb.add(record) == A
    assert kb.get(A) == record
    assert kb.records() == [record]


def test_recording_the_same_run_again_replaces_it(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A, status="aborted"))
    kb.add(samples.record(A, status="converged"))
    assert [row.status for row in kb.list()] == ["converged"]
    assert kb.get(A).status == "converged"


def test_the_listing_is_newest_first_with_the_fingerprints_columns(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A, recorded_at="2024-05-01T12:00:00Z"))
    kb.add(samples.record(C, recorded_at="2024-05-03T08:00:00+00:00"))
    kb.add(samples.record(B, recorded_at="2024-05-02T09:30:00Z"))
    rows = kb.list()
    assert [row.id for row in rows] == [C, B, A]
    assert rows[0] == RunRow(
        id=C, kind="tune", recorded_at="2024-05-03T08:00:00.000000Z", status="converged",
        run_dir="/srv/runs/qwen-h100", engine="vllm 0.6.3", model="Qwen/Qwen2.5-7B-Instruct",
        accelerator="2 x NVIDIA H100 80GB HBM3",
        workload_digest="sha256:5d41402abc4b2a76b9719d911017c592", trials=4,
        objective="output_throughput", kept_value=1210.0)
    assert [r.id for r in kb.records()] == [C, B, A]


def test_unknown_fingerprint_fields_list_as_unknown(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A, kept=None, fingerprint=samples.fingerprint(
        {"engine.version": None, "model.name": None, "accelerator.count": 1})))
    row = kb.list()[0]
    assert (row.engine, row.model, row.accelerator, row.kept_value) == (
        "vllm ?", None, "NVIDIA H100 80GB HBM3", None)


def test_the_listing_filters_by_kind(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A))
    kb.add(samples.record(C, kind="soak"))
    assert [row.id for row in kb.list(kind="soak")] == [C]
    assert [row.id for row in kb.list()] == [C, A]  # recorded at the same time: by id
    assert [r.id for r in kb.records("tune")] == [A]


def test_a_unique_start_of_an_id_finds_the_run(kb: KnowledgeBase) -> None:
    for run_id in (A, B, C):
        kb.add(samples.record(run_id))
    assert kb.get("d2c7").id == C
    assert kb.get(A[:9]).id == A
    assert kb.get(A).id == A


def test_an_ambiguous_start_names_the_runs_it_matches(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A))
    kb.add(samples.record(B))
    with pytest.raises(UsageError, match="'4f2a9c1b' is ambiguous.*" + B + ", " + A):
        kb.get("4f2a9c1b")


@pytest.mark.parametrize("ref", ["nope", "4f2a9c1b%", "4f2a_c1b", ""])
def test_an_unknown_id_is_a_usage_error_naming_it(kb: KnowledgeBase, ref: str) -> None:
    kb.add(samples.record(A))
    with pytest.raises(UsageError, match=f"{ref!r}" if ref else "empty"):
        kb.get(ref)


def test_an_id_that_starts_another_is_found_exactly(kb: KnowledgeBase) -> None:
    kb.add(samples.record("run-1"))
    kb.add(samples.record("run-10"))
    assert kb.get("run-1").id == "run-1"


def test_forgetting_removes_the_run_and_says_which(kb: KnowledgeBase) -> None:
    kb.add(samples.record(A))
    kb.add(samples.record(C))
    forgotten = kb.forget("d2c7")
    assert forgotten.id == C and forgotten.trials == 4
    assert [row.id for row in kb.list()] == [A]
    with pytest.raises(UsageError, match="no run 'd2c7'"):
        kb.forget("d2c7")


def _damage(path: Path, run_id: str, document: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tunegate_kb_runs SET document = ? WHERE id = ?", (document, run_id))


def test_a_damaged_row_is_named_and_can_be_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A))
        kb.add(samples.record(C))
    _damage(path, C, '{"format": "tunegate-kb-run/1", "id": 3}')
    with KnowledgeBase.open(str(path)) as kb:
        with pytest.raises(InputFileError, match=f"run {C}: .*missing.*kb forget"):
            kb.get(C)
        with pytest.raises(InputFileError, match=f"run {C}"):
            kb.records()
        seen: list[str] = []
        assert [r.id for r in kb.records(on_damaged=lambda i, why: seen.append(i))] == [A]
        assert seen == [C]
        assert kb.forget(C).id == C
        assert [r.id for r in kb.records()] == [A]


def test_a_row_holding_another_runs_record_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A))
    _damage(path, A, json.dumps(samples.record(C).to_json()))
    with KnowledgeBase.open(str(path)) as kb, pytest.raises(InputFileError, match="damaged"):
        kb.get(A)


def test_a_new_knowledge_base_is_private_with_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A))
        assert kb.exists and kb.version == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_it_uses_wal_so_readers_do_not_wait_for_a_writer(kb: KnowledgeBase) -> None:
    assert kb.location.path is not None
    with sqlite3.connect(kb.location.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_opening_read_only_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "kb.sqlite"
    with KnowledgeBase.open(str(path), create=False) as kb:
        assert not kb.exists
        assert kb.list() == [] and kb.records() == []
        with pytest.raises(UsageError, match="does not exist yet"):
            kb.get(A)
        with pytest.raises(UsageError, match="does not exist yet"):
            kb.forget(A)
    assert not (tmp_path / "missing").exists()


def test_a_zero_byte_file_is_a_new_knowledge_base(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    path.touch()
    with KnowledgeBase.open(str(path), create=False) as kb:
        assert not kb.exists
    assert path.stat().st_size == 0
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A))
        assert [row.id for row in kb.list()] == [A]


def test_without_a_location_it_opens_tunegate_kb(_private_knowledge_base: Path) -> None:
    with KnowledgeBase.open() as kb:
        kb.add(samples.record(A))
    assert _private_knowledge_base.stat().st_size > 0


def test_a_closed_knowledge_base_refuses_use_instead_of_looking_empty(tmp_path: Path) -> None:
    kb = KnowledgeBase.open(str(tmp_path / "kb.sqlite"))
    kb.add(samples.record(A))
    kb.close()
    with pytest.raises(RuntimeError, match="closed"):
        kb.list()
