"""``tunegate kb list | show | diff | forget`` as a user runs them: tables that hold the
fields, JSON that parses, one-line errors with exit 2, nothing created by reading."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.knowledge import KnowledgeBase

_spec = importlib.util.spec_from_file_location(
    "tunegate_tests_kb_samples_cli", Path(__file__).parents[1] / "unit/knowledge/samples.py")
assert _spec is not None and _spec.loader is not None
samples: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(samples)

A = "4f2a9c1be0d84c6fa1b27e93d5c0f811"
B = "4f2a9c1b77e2418e9b6b3d0aa0c5e2f0"
C = "d2c7a0f45e9b4b8c8f1f0e6a7b9c3d21"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """``cli("kb", ...)`` -> (exit code, stdout, stderr); wide, so table cells stay whole."""
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("TUNEGATE_DEBUG", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _cells(line: str) -> list[str]:
    """A table row's cells (``[]`` for anything else)."""
    if not line.startswith("│"):
        return []
    return [cell.strip() for cell in line.strip().strip("│").split("│")]


@pytest.fixture
def kb_path(tmp_path: Path) -> Path:
    """A knowledge base with three runs: A (oldest), B (another engine version), C (newest)."""
    path = tmp_path / "kb.sqlite"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A, recorded_at="2024-05-01T12:00:00Z"))
        kb.add(samples.record(B, recorded_at="2024-05-02T12:00:00Z", status="budget_exhausted",
                              fingerprint=samples.fingerprint({"engine.version": "0.7.0",
                                                               "host.kernel": None})))
        kb.add(samples.record(C, recorded_at="2024-05-03T12:00:00Z",
                              fingerprint=samples.fingerprint({"accelerator.driver": "555.42"})))
    return path


def test_list_shows_every_run_newest_first_with_its_fields(cli: Run, kb_path: Path) -> None:
    code, out, err = cli("kb", "list", "--kb", str(kb_path))
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if any(i[:8] in line for i in (A, B, C))]
    assert [line.split()[1] for line in lines] == [C[:8], B[:9], A[:9]]  # short, yet unique
    newest = lines[0]
    for shown in ("2024-05-03 12:00", "converged", "vllm 0.6.3", "Qwen/Qwen2.5-7B-Instruct",
                  "2 x NVIDIA H100 80GB HBM3", "sha256:5d414", " 4 ", "output_throughput",
                  "1210"):
        assert shown in newest, shown
    assert "budget_exhausted" in lines[1] and "vllm 0.7.0" in lines[1]


def test_list_json_parses_and_holds_the_rows(cli: Run, kb_path: Path) -> None:
    code, out, _ = cli("kb", "list", "--kb", str(kb_path), "--json")
    document = json.loads(out)
    assert code == 0 and document["exists"] is True
    assert [run["id"] for run in document["runs"]] == [C, B, A]
    assert document["runs"][0]["short_id"] == C[:8]
    assert document["runs"][0]["kept_value"] == 1210.0
    assert document["runs"][1]["engine"] == "vllm 0.7.0"


def test_list_reads_tunegate_kb_by_default(cli: Run, kb_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEGATE_KB", str(kb_path))
    code, out, _ = cli("kb", "list", "--json")
    assert code == 0 and len(json.loads(out)["runs"]) == 3


def test_an_empty_or_missing_knowledge_base_says_so_and_nothing_is_created(
        cli: Run, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "kb.sqlite"
    code, out, _ = cli("kb", "list", "--kb", str(missing))
    assert code == 0 and "does not exist yet: no run recorded" in out
    assert not missing.parent.exists()
    empty = tmp_path / "empty.sqlite"
    KnowledgeBase.open(str(empty)).close()
    code, out, _ = cli("kb", "list", "--kb", str(empty))
    assert code == 0 and "is empty: no run recorded" in out
    assert json.loads(cli("kb", "list", "--kb", str(missing), "--json")[1])["runs"] == []


def test_show_prints_the_whole_run(cli: Run, kb_path: Path) -> None:
    code, out, err = cli("kb", "show", "d2c7", "--kb", str(kb_path))
    assert (code, err) == (0, "")
    assert f"run {C} (tune)" in out
    driver = next(line for line in out.splitlines() if "accelerator.driver" in line)
    assert "555.42" in driver and "measured" in driver and "probe of" in driver
    assert "objective: output_throughput (higher is better); kept value: 1210" in out
    rows = [cells for cells in map(_cells, out.splitlines()) if cells]
    assert ["max_num_seqs", "256", "512"] in rows  # the configs: baseline, kept
    assert ["1", "accept", "kept", "2", "1210",
            "enable_chunked_prefill=True, max_num_seqs=512"] in rows  # a trial
    assert ["3", "start_failed", "", "0", "-",
            "enable_chunked_prefill=True, max_num_seqs=1024"] in rows
    assert ["2", "output_throughput=900, p99_ttft_ms=700",
            "enable_chunked_prefill=True, max_num_seqs=128"] in rows  # the Pareto set
    fields = [cells[0] for cells in rows if cells[0] in samples.FIELD_VALUES]
    assert fields == list(samples.FIELD_VALUES)  # in the contract's order
    assert "Pareto set (2)" in out


def test_show_json_is_the_record(cli: Run, kb_path: Path) -> None:
    code, out, _ = cli("kb", "show", C, "--kb", str(kb_path), "--json")
    assert code == 0
    assert json.loads(out) == samples.record(
        C, recorded_at="2024-05-03T12:00:00Z",
        fingerprint=samples.fingerprint({"accelerator.driver": "555.42"})).to_json()


def test_diff_shows_both_fingerprints_and_the_verdict(cli: Run, kb_path: Path) -> None:
    code, out, _ = cli("kb", "diff", A[:9], B[:9], "--kb", str(kb_path))
    assert code == 0
    version = next(line for line in out.splitlines() if "engine.version" in line)
    assert "0.6.3" in version and "0.7.0" in version and "invalidates" in version
    kernel = next(line for line in out.splitlines() if "host.kernel" in line)
    assert "unknown" in kernel and "unconfirmed" in kernel
    assert "match: invalid (invalidates: engine.version; unconfirmed: host.kernel)" in out
    code, out, _ = cli("kb", "diff", A[:9], C[:8], "--kb", str(kb_path))
    assert "match: partial (differs: accelerator.driver)" in out


def test_diff_json_parses(cli: Run, kb_path: Path) -> None:
    code, out, _ = cli("kb", "diff", A[:9], C, "--kb", str(kb_path), "--json")
    document = json.loads(out)
    assert code == 0 and document["verdict"] == "partial" and document["invalidating"] == []
    assert len(document["fields"]) == len(samples.FIELD_VALUES)


def test_forget_removes_the_run_and_says_which(cli: Run, kb_path: Path) -> None:
    code, out, _ = cli("kb", "forget", "d2c7", "--kb", str(kb_path))
    assert code == 0
    assert f"forgot run {C} (tune, recorded 2024-05-03 12:00 UTC" in out and "4 trials" in out
    assert [run["id"] for run in json.loads(
        cli("kb", "list", "--kb", str(kb_path), "--json")[1])["runs"]] == [B, A]


@pytest.mark.parametrize(("argv", "message"), [
    (["show", "ffff"], "no run 'ffff' in knowledge base"),
    (["show", "4f2a9c1b"], "run id '4f2a9c1b' is ambiguous"),
    (["diff", A, "ffff"], "no run 'ffff'"),
    (["forget", "4f2a"], "ambiguous"),
])
def test_an_unknown_or_ambiguous_id_exits_2_in_one_line(cli: Run, kb_path: Path,
                                                        argv: list[str], message: str) -> None:
    code, out, err = cli("kb", *argv, "--kb", str(kb_path))
    assert (code, out) == (2, "")
    assert err.startswith("tunegate kb: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_file_that_is_not_a_knowledge_base_exits_2_and_stays_as_it_was(
        cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"not a database\n")
    for action in (["list"], ["show", A], ["forget", A]):
        code, _, err = cli("kb", *action, "--kb", str(path))
        assert code == 2 and "is not a SQLite database" in err and err.count("\n") == 1
    assert path.read_bytes() == b"not a database\n"


def test_a_url_with_a_password_exits_2_without_showing_it(cli: Run) -> None:
    code, _, err = cli("kb", "list", "--kb", "postgresql://tuner:hunter2@db/kb")
    assert code == 2 and "holds a password" in err and "hunter2" not in err


def test_hostile_text_in_a_record_cannot_drive_the_terminal(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    hostile = "evil\x1b[2J[bold]model[/bold]\nnext"
    with KnowledgeBase.open(str(path)) as kb:
        kb.add(samples.record(A, fingerprint=samples.fingerprint({"model.name": hostile})))
    for action in (["list"], ["show", A]):
        code, out, _ = cli("kb", *action, "--kb", str(path))
        assert code == 0 and "\x1b" not in out
        assert "evil\\x1b[2J[bold]model[/bold] next" in out


def test_the_console_script_runs_it() -> None:
    done = subprocess.run([sys.executable, "-m", "tunegate", "kb", "list", "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["exists"] is False  # this test's private TUNEGATE_KB
    usage = subprocess.run([sys.executable, "-m", "tunegate", "kb"], capture_output=True,
                           text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "ACTION" in usage.stderr
