"""Lease across real processes: 8 contenders, takeover after kill -9, fencing after a stall.

Every specification runs on both backends: lock files on this host (``file``) and a table in a
real PostgreSQL server (``postgres``, the lease several hosts share; a throwaway cluster, see
``tests/conftest.py``). A contender is named by where its lease lives: a directory or a URL.
This file is also the worker script: ``python test_lease_contention.py MODE WHERE ...``.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import LeaseBusyError, LeaseLostError
from tunegate.tuner.holder import LeaseRecord
from tunegate.tuner.journal import Journal, read_journal
from tunegate.tuner.lease import Lease
from tunegate.tuner.lease_core import ServiceLease
from tunegate.tuner.lease_postgres import PostgresLease

pytestmark = pytest.mark.integration
SERVICE = "sim-seed"
WORKERS, ROUNDS = 8, 5


def lease_at(where: str | Path, **options: Any) -> ServiceLease:
    """The lease of SERVICE in a directory (file backend) or a PostgreSQL database (URL)."""
    if str(where).startswith("postgresql"):
        return PostgresLease(str(where), SERVICE, **options)
    return Lease(where, SERVICE, **options)


def current_record(where: str | Path) -> LeaseRecord | None:
    """The record a contender would judge now."""
    lease = lease_at(where)
    try:
        return lease._read_current()
    finally:
        lease.release()


@pytest.fixture(params=["file", pytest.param("postgres", marks=pytest.mark.postgres)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the contenders' lease lives: a directory, or a fresh PostgreSQL database."""
    if request.param == "file":
        return str(tmp_path / "locks")
    url: str = request.getfixturevalue("postgres_url")
    return url


def _contend(where: str, log_path: str, go: str, use_lease: str) -> None:
    """Take the lease ROUNDS times, logging (t_acquire, t_release, pid, epoch) from inside."""
    import random

    rng = random.Random(os.getpid())
    while not os.path.exists(go):
        time.sleep(0.001)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for _ in range(ROUNDS):
        lease = lease_at(where, ttl_s=2.0, heartbeat_s=0.5, poll_s=0.01)
        if use_lease == "yes":
            lease.acquire(timeout_s=60)
        t_acquire = time.monotonic_ns()
        time.sleep(rng.uniform(0.002, 0.01))  # the critical section
        t_release = time.monotonic_ns()
        epoch = lease.epoch if use_lease == "yes" else 0
        os.write(log, (json.dumps([t_acquire, t_release, os.getpid(), epoch]) + "\n").encode())
        lease.release()
        time.sleep(rng.uniform(0, 0.005))


def _hold(where: str, host: str, ttl: str, seconds: str, journal_path: str) -> None:
    """Hold the lease and append to a journal every 20 ms; exit 3 when a write is refused."""
    lease = lease_at(where, ttl_s=float(ttl), heartbeat_s=float(ttl) / 5, host=host or None)
    lease.acquire(timeout_s=10)
    record = lease.record
    assert record is not None
    print(json.dumps({"epoch": lease.epoch, "expires_at": record.expires_at}), flush=True)
    journal = Journal.open(journal_path, lease=lease) if journal_path else None
    end = time.monotonic() + float(seconds)
    try:
        while time.monotonic() < end:
            if journal is not None:
                journal.append("measurement", {"pid": os.getpid()})
            time.sleep(0.02)
    except LeaseLostError as exc:
        print(json.dumps({"refused": str(exc)}), flush=True)
        sys.exit(3)
    letting_go = time.time()  # before the release: the successor may win as soon as it runs
    lease.release()
    print(json.dumps({"letting_go_at": letting_go}), flush=True)


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)


def _run_contention(tmp_path: Path, where: str, use_lease: str) -> list[list[int]]:
    log, go = tmp_path / "holders.log", tmp_path / "go"
    procs = [_spawn("contend", where, str(log), str(go), use_lease)
             for _ in range(WORKERS)]
    time.sleep(0.5)  # let every worker reach the start line
    go.touch()
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    return sorted(json.loads(line) for line in log.read_text().splitlines())


def _overlaps(intervals: list[list[int]]) -> int:
    """Count tenures that start before the previous one (by start time) has ended."""
    return sum(1 for prev, cur in itertools.pairwise(intervals) if cur[0] < prev[1])


def test_eight_contenders_exactly_one_holder_at_any_instant(tmp_path: Path, where: str) -> None:
    intervals = _run_contention(tmp_path, where, "yes")
    assert len(intervals) == WORKERS * ROUNDS
    assert len({pid for _, _, pid, _ in intervals}) == WORKERS
    assert _overlaps(intervals) == 0
    assert [epoch for *_, epoch in intervals] == list(range(1, WORKERS * ROUNDS + 1))
    print(f"{len(intervals)} tenures by {WORKERS} processes, 0 overlaps")


def test_overlap_detector_catches_unleased_contenders(tmp_path: Path) -> None:
    """The control: the same workers without the lease do overlap, so the check above can fail."""
    intervals = _run_contention(tmp_path, str(tmp_path / "locks"), "no")
    assert _overlaps(intervals) > 0


def test_takeover_after_kill_9_only_after_expiry(where: str) -> None:
    # A TTL of 3 s: the busy check right after the kill must come before the dead holder's
    # expiry even when a loaded machine delays it by a second (1 s failed so on a busy CI run).
    holder = _spawn("hold", where, "", "3.0", "60", "")
    assert holder.stdout is not None
    first = json.loads(holder.stdout.readline())
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with pytest.raises(LeaseBusyError, match=rf"pid {holder.pid} .*holder dead"):
        lease_at(where, ttl_s=5).acquire(timeout_s=0.1)
    dead = current_record(where)
    assert dead is not None and dead.pid == holder.pid
    with lease_at(where, ttl_s=5).acquire(timeout_s=10) as successor:
        assert time.time() >= dead.expires_at  # not a moment before the dead holder's expiry
        assert successor.epoch == first["epoch"] + 1


def test_live_holder_never_displaced_past_its_ttl(where: str) -> None:
    holder = _spawn("hold", where, "", "0.5", "2.0", "")
    assert holder.stdout is not None
    first = json.loads(holder.stdout.readline())
    time.sleep(0.8)  # past the first TTL: only renewals keep it
    with pytest.raises(LeaseBusyError, match=rf"pid {holder.pid} .*(still holds the lock|"
                       "process is alive)"):
        lease_at(where, ttl_s=5).acquire(timeout_s=0.6)
    with lease_at(where, ttl_s=5).acquire(timeout_s=10) as successor:
        acquired = time.time()
        letting_go = json.loads(holder.stdout.readline())["letting_go_at"]
        assert acquired >= letting_go and successor.epoch == first["epoch"] + 1
    assert holder.wait(timeout=5) == 0


def test_stalled_holder_is_fenced_after_takeover(tmp_path: Path, where: str) -> None:
    """SIGSTOP past the TTL of a holder on another host (node-a; on the file backend its lock
    is removed, as another host would not see it): the successor wins, and the stalled
    process, resumed, has its next journal write refused."""
    journal = tmp_path / "journal.jsonl"
    holder = _spawn("hold", where, "node-a", "0.5", "30", str(journal))
    assert holder.stdout is not None
    json.loads(holder.stdout.readline())
    time.sleep(0.1)
    holder.send_signal(signal.SIGSTOP)
    if not where.startswith("postgresql"):
        (Path(where) / f"{SERVICE}.lock").unlink()
    try:
        with lease_at(where, ttl_s=5, host="node-b").acquire(timeout_s=5) as successor:
            assert successor.epoch == 2
            holder.send_signal(signal.SIGCONT)
            assert holder.wait(timeout=10) == 3
            out = holder.stdout.read()
            assert "epoch 1 is stale" in out and "node-b" in out
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait()
    records = read_journal(journal).records
    assert records and {r.epoch for r in records} == {1}


if __name__ == "__main__":
    if sys.argv[1] == "contend":
        _contend(*sys.argv[2:6])
    else:
        _hold(*sys.argv[2:7])
