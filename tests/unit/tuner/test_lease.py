"""Lease semantics in one process (flock conflicts between two open files, as between processes)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tunegate.errors import LeaseBusyError, LeaseError, LeaseLostError
from tunegate.tuner.holder import (
    LeaseRecord,
    holder_liveness,
    new_record,
    process_start_ticks,
    read_record,
)
from tunegate.tuner.journal import Journal, read_journal
from tunegate.tuner.lease import Lease, fenced_write_json


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _record(**changes: object) -> LeaseRecord:
    base = new_record("svc", socket.gethostname(), "t" * 32, 1, time.time(), 30.0)
    return replace(base, **changes)  # type: ignore[arg-type]


def test_acquire_release_and_epoch_increments(tmp_path: Path) -> None:
    with Lease(tmp_path, "svc", ttl_s=5) as first:
        assert first.held and first.epoch == 1 == first.check_epoch()
    assert not first.held
    with pytest.raises(LeaseLostError, match="released"):
        first.check_epoch()
    with Lease(tmp_path, "svc", ttl_s=5) as second:
        assert second.epoch == 2
    record = second.records.current()
    assert record is not None and record.released and record.epoch == 2
    assert read_record(second.records.path(1)) is not None  # the history stays
    second.release()  # idempotent


def test_busy_lease_times_out_naming_the_holder(tmp_path: Path) -> None:
    with Lease(tmp_path, "svc", ttl_s=5):
        started = time.monotonic()
        with pytest.raises(LeaseBusyError) as info:
            Lease(tmp_path, "svc", ttl_s=5).acquire(timeout_s=0.3)
        assert 0.3 <= time.monotonic() - started < 2.0
    message = str(info.value)
    assert f"pid {os.getpid()}" in message and socket.gethostname() in message
    assert "holding since" in message and "still holds the lock" in message


def test_renewing_holder_is_never_displaced_after_its_ttl(tmp_path: Path) -> None:
    with Lease(tmp_path, "svc", ttl_s=0.4, heartbeat_s=0.1) as holder:
        first = holder.record
        time.sleep(1.2)  # three TTLs
        with pytest.raises(LeaseBusyError):
            Lease(tmp_path, "svc", ttl_s=0.4, heartbeat_s=0.1).acquire(timeout_s=0.5)
        assert holder.check_epoch() == 1
        assert holder.record is not None and first is not None
        assert holder.record.expires_at > first.expires_at + 0.5


def test_live_holder_kept_even_if_its_lock_file_is_replaced(tmp_path: Path) -> None:
    with Lease(tmp_path, "svc", ttl_s=0.4, heartbeat_s=0.1) as holder:
        holder.lock_path.unlink()  # e.g. a clean-up job; the next contender locks a new inode
        with pytest.raises(LeaseBusyError, match="alive"):
            Lease(tmp_path, "svc", ttl_s=0.4).acquire(timeout_s=0.6)
        assert holder.check_epoch() == 1


def test_dead_holder_taken_over_only_after_expiry(tmp_path: Path) -> None:
    lease = Lease(tmp_path, "svc", ttl_s=5)
    expires = time.time() + 0.6
    dead = _record(pid=_dead_pid(), epoch=7, expires_at=expires)
    assert lease.records.claim(dead)
    with pytest.raises(LeaseBusyError, match="holder dead; it can be taken over in"):
        Lease(tmp_path, "svc", ttl_s=5).acquire(timeout_s=0.2)
    with lease.acquire(timeout_s=3):
        assert time.time() >= expires
        assert lease.epoch == 8


def test_stale_epoch_write_refused_after_takeover(tmp_path: Path) -> None:
    """A holder on a host whose lock others cannot see stalls past its TTL and is replaced."""
    lost: list[LeaseLostError] = []
    stalled = Lease(tmp_path, "svc", ttl_s=0.3, heartbeat_s=0.1, host="node-a",
                    on_lost=lost.append)
    stalled.acquire()
    journal = Journal.open(tmp_path / "journal.jsonl", lease=stalled)
    assert journal.append("measurement", {"round": 0}) == 1
    stalled._stop.set()  # the stall: no more renewals
    assert stalled._thread is not None
    stalled._thread.join()
    stalled.lock_path.unlink()  # the other host does not see this host's flock
    with Lease(tmp_path, "svc", ttl_s=5, host="node-b").acquire(timeout_s=3) as successor:
        assert successor.epoch == 2
        with pytest.raises(LeaseLostError, match=r"epoch 1 is stale.*node-b"):
            stalled.check_epoch()
        assert len(lost) == 1
        with pytest.raises(LeaseLostError):
            fenced_write_json(stalled, tmp_path / "summary.json", {"status": "kept"})
        assert not (tmp_path / "summary.json").exists()
        with pytest.raises(LeaseLostError):
            journal.append("measurement", {"round": 1})
        with pytest.raises(LeaseLostError):
            stalled.renew()
        assert fenced_write_json(successor, tmp_path / "summary.json", {"ok": 1}) == 2
    journal.close()
    assert [r.seq for r in read_journal(tmp_path / "journal.jsonl").records] == [1]
    stalled.release()


def test_heartbeat_notices_takeover(tmp_path: Path) -> None:
    lost: list[LeaseLostError] = []
    lease = Lease(tmp_path, "svc", ttl_s=2, heartbeat_s=0.05, on_lost=lost.append).acquire()
    record = lease.records.current()
    assert record is not None
    taken = replace(record, token="x" * 32, epoch=record.epoch + 1)
    assert lease.records.claim(taken)
    assert not lease.records.claim(taken)  # an epoch is claimed once
    deadline = time.monotonic() + 2
    while not lost and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lost and not lease.held
    lease.release()
    assert lease.records.current() == taken  # a lost lease never overwrites the winner
    assert read_record(lease.records.path(1)) == lease.record  # nor marks itself released


def test_liveness_checks_pid_start_time_host_and_zombies() -> None:
    assert holder_liveness(_record()) == "alive"
    ticks = process_start_ticks(os.getpid())
    assert ticks is not None
    assert holder_liveness(_record(start_ticks=ticks + 1)) == "dead"  # recycled pid
    assert holder_liveness(_record(pid=_dead_pid())) == "dead"
    assert holder_liveness(_record(boot_id="another-boot")) == "dead"
    assert holder_liveness(_record(host="elsewhere")) == "unknown"
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 5
    while process_start_ticks(zombie.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process_start_ticks(zombie.pid) is None  # exited, not yet reaped
    zombie.wait()


def test_unreadable_record_and_bad_settings(tmp_path: Path) -> None:
    tmp_path.joinpath("svc.lease").mkdir()
    tmp_path.joinpath("svc.lease", "0000000001.json").write_text("{not json")
    with pytest.raises(LeaseError, match="unreadable"):
        Lease(tmp_path, "svc").acquire(timeout_s=0.1)
    with pytest.raises(ValueError):
        Lease(tmp_path, "svc", ttl_s=1, heartbeat_s=0.9)


def test_service_names_become_safe_file_names(tmp_path: Path) -> None:
    lease = Lease(tmp_path, "vllm@10.0.0.1:8000/../x")
    assert lease.lock_path.parent == tmp_path
    assert "/" not in lease.lock_path.name and lease.lock_path.name.endswith(".lock")
    assert Lease(tmp_path, "sim-seed").lock_path.name == "sim-seed.lock"
