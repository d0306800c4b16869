"""``tunegate tune`` usage errors and ``tunegate replay`` on finished and tampered runs.

Usage errors exit 2 with one clear line naming the problem (the file, the TOML line, the field,
the flag), never a traceback. ``tunegate replay RUN_DIR`` re-derives every recorded decision:
0 on a finished run, non-zero once a decision's output was rewritten, even with the journal
line's checksum made valid again (:func:`tunegate.tuner.journal.encode_record`).
Everything runs in process on the ``simulator-virtual`` adapter (a run takes well under 1 s).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.testing.tune_toml import small_tune_config, to_toml
from tunegate.tuner.decisions import digest
from tunegate.tuner.journal import encode_record

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> Run:
    """``cli("tune", ...)`` -> (exit code, stdout, stderr), leases under ``tmp_path``."""
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("TUNEGATE_DEBUG", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, " ".join(out.split()), " ".join(err.split())

    return run


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Three proposals of ``max_num_seqs`` (seed 3) after a baseline of 2 repeats."""
    path = tmp_path / "tune.toml"
    path.write_text(to_toml(small_tune_config()), encoding="utf-8")
    return path


@pytest.fixture
def finished(cli: Run, config: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    code, _, err = cli("tune", "--config", str(config), "--run-dir", str(run_dir), "--quiet")
    assert code == 0, err
    return run_dir


def no_traceback(err: str) -> bool:
    return "Traceback" not in err and "internal error" not in err


# ---- usage errors ------------------------------------------------------------------------
def test_a_missing_config_file(cli: Run, tmp_path: Path) -> None:
    code, _, err = cli("tune", "--config", str(tmp_path / "nope.toml"))
    assert code == 2 and no_traceback(err)
    assert "nope.toml: no such file" in err


def test_invalid_toml_names_the_line(cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nbudget = 3\nseed = = 4\n', encoding="utf-8")
    code, _, err = cli("tune", "--config", str(bad))
    assert code == 2 and no_traceback(err)
    assert "bad.toml: invalid TOML" in err and "line 3" in err


def renamed(table: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``table`` with the key ``old`` spelt ``new``, in its place."""
    return {new if key == old else key: value for key, value in table.items()}


@pytest.mark.parametrize(("change", "named"), [
    (lambda c: c | {"run": renamed(c["run"], "budget", "budgett")}, ["budgett"]),
    (lambda c: c | {"run": c["run"] | {"budget": 0}}, ["budget"]),
    (lambda c: c | {"search": {"early_stopping": True, "eta": 1}}, ["search.eta", "(got 1)"]),
], ids=["unknown-field", "invalid-value", "invalid-search-setting"])
def test_a_bad_field_is_named(cli: Run, tmp_path: Path,
                              change: Callable[[dict[str, Any]], dict[str, Any]],
                              named: list[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(to_toml(change(small_tune_config())), encoding="utf-8")
    code, _, err = cli("tune", "--config", str(bad))
    assert code == 2 and no_traceback(err)
    assert all(text in err for text in named), err


def test_a_bad_slo_and_too_many_objectives_are_named(cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    slos = ["p99_ttft_ms <= 3000", "p99_ttft_ms = 1"]
    bad.write_text(to_toml(small_tune_config(search={"slos": slos})), encoding="utf-8")
    code, _, err = cli("tune", "--config", str(bad))
    assert code == 2 and no_traceback(err)
    assert "search.slos.1: SLO 'p99_ttft_ms = 1'" in err
    many = [f"{m}:lower" for m in ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms",
                                   "mean_e2el_ms")]
    bad.write_text(to_toml(small_tune_config(search={"objectives": many})), encoding="utf-8")
    code, _, err = cli("tune", "--config", str(bad))
    assert code == 2 and no_traceback(err)
    assert "search.objectives: 6 objectives" in err and "at most 5" in err


def test_resume_of_a_directory_without_a_journal(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = cli("tune", "--resume", str(tmp_path / "empty"))
    assert code == 2 and no_traceback(err)
    assert "no journal.jsonl" in err


def test_resume_with_config_is_refused(cli: Run, finished: Path, config: Path) -> None:
    code, _, err = cli("tune", "--resume", str(finished), "--config", str(config))
    assert code == 2 and no_traceback(err)
    assert "--resume RUN_DIR takes the config from the run" in err


def test_run_dir_of_an_existing_run_is_refused(cli: Run, finished: Path, config: Path) -> None:
    code, _, err = cli("tune", "--config", str(config), "--run-dir", str(finished))
    assert code == 2 and no_traceback(err)
    assert f"--resume {finished}" in err


def test_an_unknown_flag_is_an_argparse_error(cli: Run) -> None:
    with pytest.raises(SystemExit) as exc:
        cli("tune", "--bogus")
    assert exc.value.code == 2


def test_a_run_killed_before_its_config_record_can_be_continued(
        cli: Run, config: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "journal.jsonl").write_bytes(b"")  # what Journal.open leaves before the append
    resumed, _, _ = cli("tune", "--resume", str(run_dir), "--quiet")
    restarted, _, _ = cli("tune", "--config", str(config), "--run-dir", str(run_dir), "--quiet")
    assert 0 in (resumed, restarted)


def test_the_command_adapters_name_option_passes_through(tmp_path: Path) -> None:
    from tunegate.servers.engine import ProcessEngine
    from tunegate.tuner.config import load_config
    from tunegate.tuner.driver import Tuner

    path = tmp_path / "tune.toml"
    options = {"argv": ["my-server", "--port", "{port}"], "name": "my-engine"}
    config = small_tune_config(server={"adapter": "command", "options": options})
    path.write_text(to_toml(config), encoding="utf-8")
    engine = Tuner(load_config(path), tmp_path / "run").ctx.engine
    assert isinstance(engine, ProcessEngine) and engine.deployable.name == "my-engine"


# ---- replay ------------------------------------------------------------------------------
def rewrite_decision(run_dir: Path, kind: str, change: Callable[[dict[str, Any]], None],
                     *, rehash: bool = True) -> str:
    """Rewrite the first ``kind`` decision's outputs; keep the line's checksum valid."""
    path = run_dir / "decisions.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    for i, line in enumerate(lines):
        record = json.loads(line)
        data = record["data"]
        if data["kind"] == kind:
            change(data["outputs"])
            if rehash:
                data["output_hash"] = digest(data["outputs"])
            lines[i] = encode_record(record["seq"], record["epoch"], record["type"], data)
            path.write_bytes(b"".join(lines))
            return str(data["id"])
    raise AssertionError(f"no {kind} decision in {path}")


def test_replay_passes_on_a_finished_run(cli: Run, finished: Path) -> None:
    code, out, err = cli("replay", str(finished))
    assert code == 0, out + err
    assert "0 mismatches" in out


@pytest.mark.parametrize(("kind", "change"), [
    ("gate_verdict", lambda o: o.update(decision="ACCEPT" if o["decision"] != "ACCEPT"
                                        else "REJECT")),
    ("proposal", lambda o: o["config"].update(max_num_seqs=o["config"]["max_num_seqs"] + 1)),
    ("baseline", lambda o: o.update(unanswered=["made_up"]) if "unanswered" in o
     else o.update(n=o.get("n", 0) + 1)),
], ids=["gate-verdict", "proposal", "baseline-plan"])
def test_replay_fails_after_a_decision_is_tampered_with(
        cli: Run, finished: Path, kind: str, change: Callable[[dict[str, Any]], None]) -> None:
    decision = rewrite_decision(finished, kind, change)
    code, out, err = cli("replay", str(finished))
    assert code != 0
    assert f"mismatch {decision}" in out, out + err


def test_replay_reports_a_hash_mismatch_as_a_mismatch(cli: Run, finished: Path) -> None:
    decision = rewrite_decision(finished, "gate_verdict",
                                lambda o: o.update(decision="ACCEPT"), rehash=False)
    code, out, err = cli("replay", str(finished))
    assert code != 0
    assert no_traceback(err) and decision in out + err
