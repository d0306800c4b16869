"""The lease on PostgreSQL (``[run] lease = "postgresql://..."``) when the database misbehaves,
and a whole tuning run holding it.

Specifications, against a real (throwaway) server:

- the database down for less than a TTL costs the holder nothing: every fenced write passes
  (no rival can take an unexpired lease over), the epoch stays, renewals resume after;
- down for longer, a write waits for the database and then goes on, because the record is
  still this holder's (nobody held the service meanwhile);
- down past ``outage_s``, the lease is lost with a message naming the database, and the write
  is refused;
- a database that never answers refuses the lease with :class:`LeaseUnavailableError` (not
  "another run holds it"), naming the URL and what did not answer; ``tunegate tune`` then
  exits 5 before writing a journal;
- a tuning run on the simulator holds its service through the database: it finishes, stamps
  every journal line with epoch 1 and releases the row; a second run on the same service while
  it holds it is refused (exit 5) naming the holder; a run resumed after ``kill -9`` takes the
  service over once the dead run's lease expires; a run goes on through a database restart
  shorter than its lease, writing its journal meanwhile.

The server is shared by the session: a test that stops it starts it again in ``finally``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.errors import LeaseLostError
from tunegate.testing.postgres import ThrowawayCluster
from tunegate.testing.tune_toml import small_tune_config, to_toml
from tunegate.tuner.holder import LeaseRecord
from tunegate.tuner.journal import Journal, read_journal
from tunegate.tuner.lease_core import LeaseUnavailableError, denial_line
from tunegate.tuner.lease_postgres import PostgresLease

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def held_row(cluster: ThrowawayCluster, url: str) -> list[tuple[object, ...]]:
    """The lease table's rows: (service, epoch, released)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sqlalchemy.text(
                "SELECT service, epoch, released FROM tunegate_lease ORDER BY service"))]
    finally:
        engine.dispose()


def current(url: str, service: str) -> LeaseRecord | None:
    """The lease row of ``service`` as a contender reads it."""
    reader = PostgresLease(url, service)
    try:
        return reader._read_current()
    finally:
        reader.release()


def test_an_outage_shorter_than_the_ttl_costs_the_holder_nothing(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path) -> None:
    lease = PostgresLease(postgres_url, "svc", ttl_s=6.0, heartbeat_s=0.5).acquire()
    journal = Journal.open(tmp_path / "journal.jsonl", lease=lease)
    try:
        postgres_cluster.stop()
        try:
            time.sleep(1.2)  # two heartbeats fail
            for round_ in range(3):
                journal.append("measurement", {"round": round_})
            assert lease.held
        finally:
            postgres_cluster.start()
        renewed_before = lease.record.renewed_at if lease.record else 0.0
        deadline = time.monotonic() + 5
        while lease.record is not None and lease.record.renewed_at == renewed_before \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lease.record is not None and lease.record.renewed_at > renewed_before
        assert lease.check_epoch() == 1
    finally:
        journal.close()
        lease.release()
    assert {r.epoch for r in read_journal(tmp_path / "journal.jsonl").records} == {1}


def test_a_longer_outage_holds_writes_until_the_database_answers(
        postgres_cluster: ThrowawayCluster, postgres_url: str) -> None:
    lease = PostgresLease(postgres_url, "svc", ttl_s=1.5, heartbeat_s=0.5).acquire()
    down_s = 3.0
    try:
        postgres_cluster.stop()
        stopped = time.monotonic()
        restart = threading.Timer(down_s, postgres_cluster.start)
        restart.start()
        try:
            time.sleep(1.6)  # past the TTL: the lease is no longer surely this holder's
            assert lease.check_epoch() == 1  # waited for the database, then confirmed
            waited = time.monotonic() - stopped
        finally:
            restart.join()
        assert waited >= down_s  # the write could not pass while nobody could confirm it
        assert lease.held
    finally:
        lease.release()


def test_an_outage_past_outage_s_loses_the_lease(
        postgres_cluster: ThrowawayCluster, postgres_url: str) -> None:
    lost: list[LeaseLostError] = []
    lease = PostgresLease(postgres_url, "svc", ttl_s=1.0, heartbeat_s=0.2, outage_s=2.0,
                          on_lost=lost.append).acquire()
    try:
        postgres_cluster.stop()
        try:
            with pytest.raises(LeaseLostError, match=r"did not answer for \d+ s") as refused:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    lease.check_epoch()
                    time.sleep(0.1)
        finally:
            postgres_cluster.start()
        assert "lease database postgresql+psycopg://tunegate@" in str(refused.value)
        assert lost and not lease.held
    finally:
        lease.release()


def test_a_database_that_never_answers_refuses_the_lease_as_unavailable(
        tmp_path: Path) -> None:
    url = f"postgresql://tuner@/tunegate?host={tmp_path}"  # no server listens there
    with pytest.raises(LeaseUnavailableError) as refused:
        PostgresLease(url, "svc", ttl_s=2.0, poll_s=0.05).acquire(timeout_s=0.5)
    message = denial_line(refused.value)
    assert message.startswith("the service's lease could not be taken")
    assert "did not answer" in message and str(tmp_path) in message


def _tune_config(path: Path, url: str, *, budget: int = 3) -> Path:
    config = small_tune_config(run={"budget": budget, "lease": url},
                               report={"plots": False}, knowledge={"warm_start": False})
    path.write_text(to_toml(config), encoding="utf-8")
    return path


def test_a_tuning_run_holds_its_service_through_the_database(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = _tune_config(tmp_path / "tune.toml", postgres_url)
    assert main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "a"),
                 "--quiet"]) == 0
    records = read_journal(tmp_path / "a" / "journal.jsonl").records
    assert records and {r.epoch for r in records} == {1}
    service = f"virtual-{(tmp_path / 'a').resolve()}"  # a virtual engine per run directory
    assert held_row(postgres_cluster, postgres_url) == [(service, 1, True)]


def test_a_second_run_is_refused_while_the_first_holds_the_service(
        postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _tune_config(tmp_path / "tune.toml", postgres_url)
    service = f"virtual-{(tmp_path / 'b').resolve()}"
    with PostgresLease(postgres_url, service, host="node-a", ttl_s=30.0):
        code = main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "b")])
    out = capsys.readouterr().out
    assert code == 5
    assert "another tuning run holds this service" in " ".join(out.split())
    assert "host 'node-a'" in out


@pytest.mark.slow
def test_a_run_killed_9_resumes_once_its_lease_expires(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path) -> None:
    config = _tune_config(tmp_path / "tune.toml", postgres_url, budget=6)
    run_dir = tmp_path / "a"
    proc = subprocess.Popen([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                             "--run-dir", str(run_dir), "--quiet"],
                            env={**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")})
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
            not journal.exists() or journal.read_text().count('"transition"') < 4):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    service = f"virtual-{run_dir.resolve()}"
    dead = current(postgres_url, service)
    assert dead is not None and dead.epoch == 1 and not dead.released  # still held
    assert main(["tune", "--resume", str(run_dir), "--quiet"]) == 0
    epochs = [r.epoch for r in read_journal(journal).records]
    assert epochs[0] == 1 and epochs[-1] == 2 and sorted(epochs) == epochs
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "budget_exhausted"
    successor = current(postgres_url, service)
    assert successor is not None and successor.epoch == 2 and successor.released
    assert successor.acquired_at >= dead.expires_at  # not a moment before the dead one expired


def test_a_run_whose_lease_database_does_not_answer_is_refused_before_it_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _tune_config(tmp_path / "tune.toml", f"postgresql://tuner@/tunegate?host={tmp_path}")
    code = main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")])
    captured = capsys.readouterr()
    said = " ".join(captured.out.split())
    assert code == 5
    assert "the service's lease could not be taken" in said and "did not answer" in said
    assert "another tuning run" not in said and "Traceback" not in captured.err
    assert not (tmp_path / "run" / "journal.jsonl").exists()


def test_a_run_outlives_a_database_restart_shorter_than_its_lease(
        postgres_cluster: ThrowawayCluster, postgres_url: str, tmp_path: Path) -> None:
    config = _tune_config(tmp_path / "tune.toml", postgres_url, budget=14)
    run_dir = tmp_path / "a"
    proc = subprocess.Popen([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                             "--run-dir", str(run_dir), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    journal = run_dir / "journal.jsonl"

    def lines() -> int:
        return journal.read_text().count("\n") if journal.exists() else 0

    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and lines() < 10:
            time.sleep(0.02)
        before = lines()
        postgres_cluster.stop()
        try:
            time.sleep(1.0)  # journal lines are written meanwhile, fenced by the unexpired lease
            during = lines() - before
        finally:
            postgres_cluster.start()
        restarted = lines()
        assert proc.poll() is None, "the run ended before the database came back"
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-2000:]
    assert during > 0  # the run did not wait for the database
    assert lines() > restarted  # and went on after it came back
    assert {r.epoch for r in read_journal(journal).records} == {1}
    final = current(postgres_url, f"virtual-{run_dir.resolve()}")
    assert final is not None and final.epoch == 1 and final.released
