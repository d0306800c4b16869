"""Several tuning runs sharing one Optuna study (``[search] study``).

Specifications: a run writes every result its proposer was told into the shared study, once per
``(run, trial)``; a later run's model learns them before its first proposal (so it skips the
initial design) and its decisions still replay; two runs at the same time both finish and each
learns the other's results; a crash while proposing resumes to the same proposal decision
however the study grew, and a resumed run (even from a moved directory) keeps its identity;
a run whose numbers are not comparable (another objective) is refused with exit 2 before it
writes anything; a study that fails mid-run costs the run nothing and the end of the run
writes what was skipped; a URL holding a password is refused without echoing it.
All on the ``simulator-virtual`` adapter; a run of 14 proposals took 12-14 s here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.search.storage import StudyStore
from tunegate.testing.tune_toml import CHUNKED_PREFILL, MAX_NUM_SEQS, small_tune_config, to_toml
from tunegate.tuner import deciders
from tunegate.tuner.config import load_config
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.driver import Tuner
from tunegate.tuner.journal import read_journal
from tunegate.tuner.proposal_history import expand
from tunegate.tuner.shared import open_study

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def study_config(url: str, *, seed: int = 3, budget: int = 14,
                 objective: str = "output_throughput") -> dict[str, Any]:
    """Two parameters, sharing the study at ``url``; no warm start, as the study is the channel
    under test (a warm start would learn it first)."""
    return small_tune_config(run={"budget": budget, "seed": seed},
                             space=[MAX_NUM_SEQS, CHUNKED_PREFILL], search={"study": url},
                             objective={"metric": objective}, report={"plots": False},
                             knowledge={"warm_start": False})


def write_config(path: Path, study: Path, *, seed: int = 3, budget: int = 14,
                 objective: str = "output_throughput") -> Path:
    config = study_config(f"sqlite:///{study}", seed=seed, budget=budget, objective=objective)
    path.write_text(to_toml(config), encoding="utf-8")
    return path


def tune(config: Path, run_dir: Path) -> int:
    return main(["tune", "--config", str(config), "--run-dir", str(run_dir), "--quiet"])


def final_state(run_dir: Path) -> dict[str, Any]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    records = read_journal(run_dir / "journal.jsonl").records
    last: dict[str, Any] = [r.data["state"] for r in records if r.type == "transition"][-1]
    assert summary["status"] == last["state"]
    return last


def final_transition(run_dir: Path) -> dict[str, Any]:
    """The state the last journalled transition entered."""
    records = read_journal(run_dir / "journal.jsonl").records
    last: dict[str, Any] = [r.data["state"] for r in records if r.type == "transition"][-1]
    return last


def history(run_dir: Path) -> list[dict[str, Any]]:
    return list(final_state(run_dir)["history"])


def proposals(run_dir: Path) -> list[dict[str, Any]]:
    """The run's proposer decisions, each with its whole search history (a decision records
    the history since the previous one and refers to that one for the rest)."""
    decisions = [r.data for r in read_journal(run_dir / "decisions.jsonl").records]
    inputs = {d["id"]: d["inputs"] for d in decisions}
    return [{**d, "inputs": expand(d["inputs"], inputs.get)} for d in decisions
            if d["component"] == "proposer"]


def stored(study: Path) -> Counter[tuple[str, int]]:
    """How often each (run id, trial) is in the study."""
    import optuna

    trials = optuna.load_study(study_name="tunegate",
                               storage=f"sqlite:///{study}").get_trials(deepcopy=False)
    return Counter((t.user_attrs["run"], t.user_attrs["trial"]) for t in trials)


def run_ids(*run_dirs: Path) -> dict[str, str]:
    """run id -> the run directory's name."""
    return {final_state(d)["run_id"]: d.name for d in run_dirs}


@pytest.fixture(autouse=True)
def _locks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))


def test_a_later_run_learns_the_earlier_runs_results(tmp_path: Path) -> None:
    study = tmp_path / "shared.db"
    config = write_config(tmp_path / "tune.toml", study)
    assert tune(config, tmp_path / "a") == 0
    told_a = [e for e in history(tmp_path / "a") if e["op"] == "tell"]
    assert len(told_a) == 15  # the baseline and 14 proposals
    assert tune(write_config(tmp_path / "b.toml", study, seed=4), tmp_path / "b") == 0

    first = proposals(tmp_path / "b")[0]
    learnt = [e for e in first["inputs"]["history"] if e["op"] == "learn"]
    assert sorted(e["trial"] for e in learnt) == [e["trial"] for e in told_a]
    names = run_ids(tmp_path / "a", tmp_path / "b")
    assert {names[e["run"]] for e in learnt} == {"a"}
    assert first["outputs"]["reason"].startswith("gp-")  # no initial design of its own
    assert replay_decisions(tmp_path / "b" / "decisions.jsonl", deciders.REGISTRY) == []

    counts = stored(study)
    assert set(counts.values()) == {1}  # every (run, trial) once
    assert Counter(names[run] for run, _ in counts) == {"a": 15, "b": 15}
    summary = json.loads((tmp_path / "b" / "summary.json").read_text(encoding="utf-8"))
    assert summary["search"]["shared_study"]["learned"] == 15
    assert "the model learnt 15 result(s) of 1 other run(s)" in (
        tmp_path / "b" / "report.md").read_text(encoding="utf-8")


def test_two_runs_at_once_both_finish_and_learn_from_each_other(tmp_path: Path) -> None:
    study = tmp_path / "shared.db"
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")}
    procs = {}
    for name, seed in (("a", 3), ("b", 4)):
        config = write_config(tmp_path / f"{name}.toml", study, seed=seed)
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tunegate", "tune", "--config", str(config), "--run-dir",
             str(tmp_path / name), "--quiet"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"run {name}: {out[-2000:]}"
        assert "shared study" not in out, out[-2000:]  # no database error on the way
    names = run_ids(tmp_path / "a", tmp_path / "b")
    for name, other in (("a", "b"), ("b", "a")):
        learnt = [e for e in history(tmp_path / name) if e["op"] == "learn"]
        assert learnt and {names[e["run"]] for e in learnt} == {other}
        assert replay_decisions(tmp_path / name / "decisions.jsonl", deciders.REGISTRY) == []
    counts = stored(study)
    assert set(counts.values()) == {1}
    assert Counter(names[run] for run, _ in counts) == {"a": 15, "b": 15}


def test_a_run_measuring_something_else_is_refused_before_it_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = tmp_path / "shared.db"
    assert tune(write_config(tmp_path / "a.toml", study, budget=1), tmp_path / "a") == 0
    other = write_config(tmp_path / "b.toml", study, budget=1, objective="request_throughput")
    capsys.readouterr()
    assert tune(other, tmp_path / "b") == 2
    err = capsys.readouterr().err
    assert "search.study" in err and "holds trials of a different search" in err
    assert "Traceback" not in err
    assert not (tmp_path / "b").exists()  # refused before anything was written


def test_a_failing_study_costs_the_run_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    study = tmp_path / "shared.db"
    real_sync = StudyStore.sync
    calls = {"n": 0}

    def flaky(self: StudyStore, trials: Any, *, run: str | None = None) -> int:
        calls["n"] += 1
        if calls["n"] <= 2:  # the baseline's and trial 1's writes fail
            raise OSError("disk I/O error (injected)")
        return real_sync(self, trials, run=run)

    real_others = StudyStore.others

    def unreadable(self: StudyStore, run: str) -> list[dict[str, Any]]:
        calls["reads"] += 1
        if calls["reads"] == 1:
            raise OSError("database is locked (injected)")
        return real_others(self, run)

    calls["reads"] = 0
    monkeypatch.setattr(StudyStore, "sync", flaky)
    monkeypatch.setattr(StudyStore, "others", unreadable)
    code = main(["tune", "--config", str(write_config(tmp_path / "a.toml", study, budget=3)),
                 "--run-dir", str(tmp_path / "a")])
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert code == 0
    assert "shared study: writing trial 0 failed (OSError: disk I/O error (injected))" in out
    assert "shared study: reading the other runs' results failed (OSError: database is " \
        "locked (injected))" in out and calls["reads"] == 3  # one read per proposal
    # the final sync wrote what the failures skipped: every told trial, once
    told = [e["trial"] for e in history(tmp_path / "a") if e["op"] == "tell"]
    assert sorted(trial for _, trial in stored(study)) == sorted(told)


@pytest.mark.parametrize("url", ["postgresql://tuner:s3cret@db/tunegate",
                                 "postgresql://tuner:s3@cret@db/tunegate",
                                 "postgresql://tuner@db/tunegate?password=s3cret"])
def test_a_study_url_with_a_password_is_refused_without_echoing_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    config = tmp_path / "tune.toml"
    config.write_text(to_toml(study_config(url, budget=1)), encoding="utf-8")
    assert tune(config, tmp_path / "a") == 2
    err = capsys.readouterr().err
    assert "search.study" in err and "password" in err and "s3" not in err


class Crash(BaseException):
    """kill -9 at a chosen point (nothing in the tuner catches a BaseException)."""


def test_a_crash_while_proposing_resumes_to_the_same_decision(tmp_path: Path) -> None:
    study = tmp_path / "shared.db"
    config = write_config(tmp_path / "a.toml", study, budget=3)

    def say(line: str) -> None:
        # PROPOSE says the proposal once its decision is recorded, before the transition
        if line.startswith("trial 2 (") and not crashed:
            crashed.append(line)
            raise Crash()

    crashed: list[str] = []
    with pytest.raises(Crash):
        Tuner(load_config(config), tmp_path / "a", say=say).run()
    made = [d for d in proposals(tmp_path / "a") if d["outputs"]["trial"] == 2]
    assert len(made) == 1  # recorded, then killed before the transition
    assert final_transition(tmp_path / "a")["state"] == "propose"
    crashed_id = made[0]["id"]
    # meanwhile another run of the same search writes a result, and the run is moved
    store = open_study(load_config(config), tmp_path)
    store.sync([{"trial": 0, "params": {"max_num_seqs": 20, "enable_chunked_prefill": False},
                 "values": {"output_throughput": 600.0}, "value": 600.0}], run="other")
    (tmp_path / "a").rename(tmp_path / "moved")
    assert main(["tune", "--resume", str(tmp_path / "moved"), "--quiet"]) == 0

    made = [d for d in proposals(tmp_path / "moved") if d["outputs"]["trial"] == 2]
    assert [d["id"] for d in made] == [crashed_id]  # the resume decided on the data it had
    assert not any(e["op"] == "learn" and e["run"] == "other"
                   for e in made[0]["inputs"]["history"])
    learnt = [e for e in history(tmp_path / "moved") if e["op"] == "learn"]
    assert [(e["run"], e["trial"]) for e in learnt] == [("other", 0)]  # at the next proposal
    run_id = final_state(tmp_path / "moved")["run_id"]
    counts = stored(study)
    assert set(counts.values()) == {1} and {run for run, _ in counts} == {run_id, "other"}
    assert replay_decisions(tmp_path / "moved" / "decisions.jsonl", deciders.REGISTRY) == []
