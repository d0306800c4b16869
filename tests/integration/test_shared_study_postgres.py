"""Tuning runs sharing one Optuna study on a real PostgreSQL server (``[search] study =
"postgresql://..."``, the URL without a driver, as people write it).

Specifications, against the session's throwaway server:

- several workers (``tunegate tune`` processes, each its own ``[run] seed``) running at once on
  one study exchange their results: each learns the others' (its ``learn`` events name every
  other run), every ``(run, trial)`` is stored exactly once, and each run's decisions replay;
- eight processes opening the same new study on a fresh database at the same instant (behind a
  barrier) all succeed and end up in one study holding one fingerprint; a run of another
  search is then refused. They race on three fresh databases in turn: without the retry of a
  lost race, every one of four tries here failed;
- a restart of the database between two of a run's operations costs nothing (the pool tests a
  connection before use); the database stopped mid-run and started again costs only the
  operations made while it was down: the run says on its output that they failed, goes on,
  exits 0, and at the end every result it told its proposer is in the study exactly once and
  its journal is whole. The test pauses the run (SIGSTOP) while it stops or starts the server,
  so what the run meets does not depend on how fast this machine is;
- a run measuring something else (another objective) is refused with exit 2 before it writes
  anything, without a traceback.

The module took 28 s here (2 cores; 29 to 39 s for its first two tests with two CPU hogs
beside them): ``python -m pytest -q tests/integration/test_shared_study_postgres.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tunegate.cli import main
from tunegate.errors import ConfigError
from tunegate.testing.postgres import ThrowawayCluster
from tunegate.testing.tune_toml import CHUNKED_PREFILL, MAX_NUM_SEQS, small_tune_config, to_toml
from tunegate.tuner import deciders
from tunegate.tuner.config import load_config
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.journal import audit_journal, read_journal
from tunegate.tuner.shared import fingerprint, open_study

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.postgres]

WAIT_S = 120.0
"""The longest a test waits for a run to reach a point; a hang fails, it never passes."""


def driverless(url: str) -> str:
    """``postgresql+psycopg://...`` -> ``postgresql://...``: what a user writes."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def write_config(path: Path, url: str, *, seed: int = 3, budget: int = 8,
                 objective: str = "output_throughput") -> Path:
    """Two parameters, sharing the study at ``url``; no warm start (the study is the channel
    under test)."""
    config = small_tune_config(run={"budget": budget, "seed": seed},
                               space=[MAX_NUM_SEQS, CHUNKED_PREFILL], search={"study": url},
                               objective={"metric": objective}, report={"plots": False},
                               knowledge={"warm_start": False})
    path.write_text(to_toml(config), encoding="utf-8")
    return path


def tune_argv(config: Path, run_dir: Path, *, quiet: bool = True) -> list[str]:
    argv = [sys.executable, "-m", "tunegate", "tune", "--config", str(config), "--run-dir",
            str(run_dir)]
    return [*argv, "--quiet"] if quiet else argv


def last_state(run_dir: Path) -> dict[str, Any]:
    """The state the run's last journalled transition entered (its summary agrees)."""
    records = read_journal(run_dir / "journal.jsonl").records
    last: dict[str, Any] = [r.data["state"] for r in records if r.type == "transition"][-1]
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == last["state"]
    return last


def told(run_dir: Path) -> list[int]:
    """The trials whose results the run told its proposer."""
    return [e["trial"] for e in last_state(run_dir)["history"] if e["op"] == "tell"]


def stored(url: str) -> Counter[tuple[str, int]]:
    """How often each (run id, trial) is in the study named ``tunegate`` at ``url`` (a URL
    naming its driver: Optuna alone would pick psycopg2)."""
    import optuna

    trials = optuna.load_study(study_name="tunegate", storage=url).get_trials(deepcopy=False)
    return Counter((t.user_attrs["run"], t.user_attrs["trial"]) for t in trials)


def study_row_count(url: str) -> int:
    """Trials in the database (0 while the schema does not exist yet)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text("SELECT count(*) FROM trials")).scalar_one())
    except sqlalchemy.exc.ProgrammingError:  # no table yet
        return 0
    finally:
        engine.dispose()


def wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[str]) -> None:
    """Poll ``condition`` until it holds; fail if the run ends first or it takes too long."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"no {what} in {WAIT_S:g} s"
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _locks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))


def test_workers_at_once_learn_each_others_results(postgres_url: str, tmp_path: Path) -> None:
    url = driverless(postgres_url)
    names = ("a", "b", "c")
    procs = {name: subprocess.Popen(
        tune_argv(write_config(tmp_path / f"{name}.toml", url, seed=3 + i), tmp_path / name),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i, name in enumerate(names)}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"run {name}: {out[-2000:]}"
    run_of = {last_state(tmp_path / name)["run_id"]: name for name in names}
    for name in names:
        learnt = [e for e in last_state(tmp_path / name)["history"] if e["op"] == "learn"]
        assert {run_of[e["run"]] for e in learnt} == set(names) - {name}
        assert replay_decisions(tmp_path / name / "decisions.jsonl", deciders.REGISTRY) == []
    counts = stored(postgres_url)
    assert set(counts.values()) == {1}  # every (run, trial) once
    assert Counter(run_of[run] for run, _ in counts) == dict.fromkeys(names, 9)  # 1 + budget
    for name in names:
        assert sorted(t for run, t in counts if run_of[run] == name) == sorted(
            told(tmp_path / name))


OPENER = """
import json, sys, time
from pathlib import Path
import alembic.command, alembic.migration, alembic.script, optuna, optuna.storages
import sqlalchemy.dialects.postgresql.psycopg  # imported now, so that they open at once
from tunegate.tuner.config import load_config
from tunegate.tuner.shared import open_study
me, barriers, run_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
opened = []
for k, path in enumerate(sys.argv[4:]):
    config = load_config(Path(path))
    (barriers / f"ready-{k}-{me}").touch()
    while not (barriers / f"go-{k}").exists():
        time.sleep(0.001)
    store = open_study(config, run_dir)
    opened.append({"study": store.study._study_id, "fingerprint": store.fingerprint})
print(json.dumps(opened))
"""
OPENERS, ROUNDS = 8, 3
"""Eight processes race on each of three fresh databases: a round in which the scheduler
happens to serialise them (about a third of rounds on 2 cores) tests nothing, three all
doing so is rare."""


def test_eight_processes_opening_a_new_study_at_once_share_one(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path) -> None:
    import optuna

    database = urlsplit(postgres_url).path.lstrip("/")  # fresh for this test
    urls = [postgres_url, *(postgres_cluster.create_database(f"{database}r{k}")
                            for k in range(1, ROUNDS))]
    configs = [write_config(tmp_path / f"a{k}.toml", driverless(url))
               for k, url in enumerate(urls)]
    barriers = tmp_path / "barriers"
    barriers.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(i), str(barriers),
                               str(tmp_path), *map(str, configs)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(OPENERS)]
    try:
        for k in range(ROUNDS):
            deadline = time.monotonic() + WAIT_S
            while not all((barriers / f"ready-{k}-{i}").exists() for i in range(OPENERS)):
                dead = [p for p in procs if p.poll() is not None]
                assert not dead, f"an opener failed: {dead[0].communicate()[1][-2000:]}"
                assert time.monotonic() < deadline, "the openers did not get ready"
                time.sleep(0.02)
            (barriers / f"go-{k}").touch()  # all eight open the study now
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=WAIT_S)
            assert proc.returncode == 0, err[-2000:]
            results.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    expected = fingerprint(load_config(configs[0]))
    for k, url in enumerate(urls):
        assert len({opened[k]["study"] for opened in results}) == 1
        assert {opened[k]["fingerprint"] for opened in results} == {expected}
        assert optuna.get_all_study_names(storage=url) == ["tunegate"]
        assert optuna.load_study(study_name="tunegate", storage=url).user_attrs == {
            "fingerprint": expected}
    # the control: a run of another search is refused by that study
    other = write_config(tmp_path / "b.toml", driverless(urls[0]),
                         objective="request_throughput")
    with pytest.raises(ConfigError, match="holds trials of a different search"):
        open_study(load_config(other), tmp_path)


def busy_connections(url: str) -> int:
    """Connections to ``url``'s database (other than this one) inside a transaction or a
    statement: a client in the middle of a study operation."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state <> 'idle'")).scalar_one())
    finally:
        engine.dispose()


@contextlib.contextmanager
def paused(proc: subprocess.Popen[str], url: str) -> Iterator[None]:
    """The run stands still (SIGSTOP) inside the block, between two of its study operations:
    stopped while its connection is inside a transaction, it goes on until it is not (an
    operation the server dies under fails, as it should, but would tell nothing here)."""
    deadline = time.monotonic() + WAIT_S
    proc.send_signal(signal.SIGSTOP)
    try:
        while busy_connections(url):
            assert time.monotonic() < deadline, "the run never left its transaction"
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.005)
            proc.send_signal(signal.SIGSTOP)
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def test_a_database_restarted_mid_run_loses_nothing(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path) -> None:
    url = driverless(postgres_url)
    config = write_config(tmp_path / "a.toml", url, budget=10)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}  # one line per message
    proc = subprocess.Popen(tune_argv(config, tmp_path / "a", quiet=False), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    output: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    failed: list[str] = []
    try:
        wait_for(lambda: study_row_count(postgres_url) >= 2, "trials in the study", proc)
        with paused(proc, postgres_url):  # a restart between two of its operations
            postgres_cluster.restart()
            written = study_row_count(postgres_url)
        wait_for(lambda: study_row_count(postgres_url) >= written + 2,
                 "writes after the restart", proc)
        with paused(proc, postgres_url):  # then an outage the run meets
            postgres_cluster.stop()
        deadline = time.monotonic() + WAIT_S
        while not failed:
            assert time.monotonic() < deadline, "the run never met the outage"
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                assert proc.poll() is None, "the run ended without meeting the outage"
                continue
            if line.startswith("shared study:") and " failed (" in line:
                failed.append(line)
        proc.send_signal(signal.SIGSTOP)  # the server is down: no operation is under way
        try:
            postgres_cluster.start()
        finally:
            proc.send_signal(signal.SIGCONT)
    finally:
        if not postgres_cluster.running:  # the session shares the server
            postgres_cluster.start()
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=300) == 0, "".join(output)[-3000:]
    reader.join(timeout=10)
    text = "".join(output)
    assert "Traceback" not in text
    failures = [line for line in text.splitlines() if line.startswith("shared study:")]
    assert failed[0] in text and failures
    for line in failures:  # each while the server was down; none on a connection the restart
        # broke (the pool tests a connection before use), so the first restart cost nothing
        assert " failed (StudyError: OperationalError: " in line, line
        assert "failed: No such file or directory" in line, line
        assert line.endswith("going on without it"), line

    run_dir = tmp_path / "a"
    assert audit_journal(run_dir / "journal.jsonl").problems == ()
    results = told(run_dir)
    assert len(results) == 11  # the journal holds the baseline and all 10 proposals
    counts = stored(postgres_url)
    assert set(counts.values()) == {1}  # nothing written twice
    run_id = last_state(run_dir)["run_id"]
    assert set(counts) == {(run_id, t) for t in results}  # nothing lost, nothing else
    assert replay_decisions(run_dir / "decisions.jsonl", deciders.REGISTRY) == []


def test_a_run_measuring_something_else_is_refused(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = driverless(postgres_url)
    first = open_study(load_config(write_config(tmp_path / "a.toml", url)), tmp_path)
    first.sync([{"trial": 0, "params": {"max_num_seqs": 8, "enable_chunked_prefill": True},
                 "values": {"output_throughput": 500.0}, "value": 500.0}], run="a")
    other = write_config(tmp_path / "b.toml", url, objective="request_throughput")
    capsys.readouterr()
    assert main(["tune", "--config", str(other), "--run-dir", str(tmp_path / "b"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "search.study" in err and "holds trials of a different search" in err
    assert "Traceback" not in err
    assert not (tmp_path / "b").exists()  # refused before anything was written
    assert stored(postgres_url) == {("a", 0): 1}  # and nothing written to the study
