"""Who holds a lease, and whether that process still lives: the lease record and its checks.

Each tenure writes its own record, ``<service>.lease/<epoch>.json`` (ten digits), beside the lock
file; the highest epoch present is the current one::

    {"service": "sim-seed", "host": "node-a", "pid": 4242, "start_ticks": 1234567,
     "boot_id": "0c9e...", "token": "5f1d...", "epoch": 3, "acquired_at": 1760000000.0,
     "renewed_at": 1760000010.0, "expires_at": 1760000040.0, "released": false}

Times are Unix seconds (``time.time()``): several processes, possibly on several hosts, read
them. A pid alone does not identify a process (pids are recycled), so the record also keeps the
process start time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and the kernel's boot
id; the ``token`` tells two leases of one process apart.

One file per epoch is what makes the records race-free without a lock all hosts share: a new
epoch is *claimed* by ``link(2)``-ing a complete temporary file to its name, which fails if a
rival claimed it first (an atomic create-if-absent); renewals only ever replace the holder's own
file. A stalled holder that wakes up and renews can therefore never overwrite its successor.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from tunegate.errors import LeaseError
from tunegate.files.atomic import atomic_write_json, fsync_directory

__all__ = [
    "LeaseRecord",
    "Liveness",
    "RecordStore",
    "boot_id",
    "holder_liveness",
    "process_start_ticks",
    "read_record",
]

Liveness = Literal["alive", "dead", "unknown"]


def process_start_ticks(pid: int) -> int | None:
    """Return when process ``pid`` started (clock ticks since boot), or ``None`` if it is gone.

    Reads field 22 of ``/proc/<pid>/stat``. The command name (field 2) may hold spaces and
    parentheses, so fields are counted after its *last* ``)``. A zombie (``Z``) or dead (``X``)
    process counts as gone: it has exited, only its parent has not reaped it yet.

    Args:
        pid: The process id.

    Returns:
        The start time in ticks, or ``None`` when there is no such running process.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    # fields[0] is field 3 (state); field 22 (starttime) is fields[19].
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def boot_id() -> str | None:
    """Return this kernel's boot id (changes at every reboot), or ``None`` where unavailable."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class LeaseRecord:
    """One holder's claim on a service, as stored in ``<service>.lease.json``."""

    service: str
    host: str
    pid: int
    start_ticks: int | None
    boot_id: str | None
    token: str
    epoch: int
    acquired_at: float
    renewed_at: float
    expires_at: float
    released: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the record as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LeaseRecord:
        """Build a record from its JSON dict.

        Raises:
            KeyError: A field is missing.
            TypeError: A field has the wrong type.
        """
        record = cls(**{name: data[name] for name in cls.__dataclass_fields__})
        if not isinstance(record.epoch, int) or not isinstance(record.pid, int):
            raise TypeError("epoch and pid must be integers")
        return record

    def renewed(self, now: float, ttl_s: float) -> LeaseRecord:
        """Return this record renewed at ``now`` for ``ttl_s`` more seconds."""
        return replace(self, renewed_at=now, expires_at=now + ttl_s)

    def describe(self) -> str:
        """Name the holder for humans: host, pid, since when, and the lease's expiry."""
        return (
            f"pid {self.pid} on host {self.host!r} (epoch {self.epoch}, holding since "
            f"{_iso(self.acquired_at)}, last renewed {_iso(self.renewed_at)}, "
            f"lease expires {_iso(self.expires_at)})"
        )


def read_record(path: Path) -> LeaseRecord | None:
    """Read a lease record; ``None`` when the file does not exist.

    Args:
        path: The ``.lease.json`` file.

    Raises:
        LeaseError: The file exists but is not a lease record. It is written atomically, so this
            means someone edited it; the epoch history is then unknown and nothing is assumed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return LeaseRecord.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise LeaseError(
            f"lease record {path} is unreadable ({exc}); if no tuning run is active for this "
            "service, remove the file and try again"
        ) from exc


def holder_liveness(record: LeaseRecord, *, host: str | None = None) -> Liveness:
    """Say whether a record's holder process still runs, as far as this machine can tell.

    Args:
        record: The lease record.
        host: This machine's name (default ``socket.gethostname()``).

    Returns:
        ``"alive"`` when the holder is on this host, in this boot, and a process with its pid
        and start time runs; ``"dead"`` when it is on this host and the process is gone, a
        zombie, or a different process with a recycled pid (start time differs), or the machine
        rebooted since; ``"unknown"`` for a holder on another host.
    """
    if record.host != (host if host is not None else socket.gethostname()):
        return "unknown"
    current_boot = boot_id()
    if record.boot_id and current_boot and record.boot_id != current_boot:
        return "dead"
    ticks = process_start_ticks(record.pid)
    if ticks is None:
        return "dead"
    if record.start_ticks is not None and ticks != record.start_ticks:
        return "dead"
    return "alive"


def new_record(service: str, host: str, token: str, epoch: int, now: float,
               ttl_s: float) -> LeaseRecord:
    """Return a fresh record for this process holding ``service`` from ``now``."""
    pid = os.getpid()
    return LeaseRecord(
        service=service, host=host, pid=pid, start_ticks=process_start_ticks(pid),
        boot_id=boot_id(), token=token, epoch=epoch, acquired_at=now, renewed_at=now,
        expires_at=now + ttl_s,
    )


class RecordStore:
    """The directory of per-epoch lease records for one service.

    Args:
        directory: ``<service>.lease``; created on first claim.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, epoch: int) -> Path:
        """Return the record file of ``epoch``."""
        return self.directory / f"{epoch:010d}.json"

    def _epochs(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def current(self) -> LeaseRecord | None:
        """Return the record with the highest epoch, or ``None`` if there is none.

        Raises:
            LeaseError: That record is unreadable, or disagrees with its file name.
        """
        for _ in range(10):  # a record pruned between listing and reading: list again
            epochs = self._epochs()
            if not epochs:
                return None
            path = self.path(epochs[-1])
            record = read_record(path)
            if record is None:
                continue
            if record.epoch != epochs[-1]:
                raise LeaseError(f"lease record {path} says epoch {record.epoch}; remove it if "
                                 "no tuning run is active for this service")
            return record
        raise LeaseError(f"lease records in {self.directory} keep changing; is it shared?")

    def claim(self, record: LeaseRecord) -> bool:
        """Create ``record``'s epoch file if no rival has; ``False`` if one has.

        The content is written and fsynced under a temporary name first, so a reader never sees
        a partial record; ``link`` then publishes it only if the name is still free.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".claim.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record.to_json(), handle, indent=2)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, self.path(record.epoch))
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        fsync_directory(self.directory)
        return True

    def update(self, record: LeaseRecord) -> None:
        """Atomically replace the record of ``record.epoch`` (renewal, release)."""
        atomic_write_json(self.path(record.epoch), record.to_json())

    def prune(self, keep: int = 3) -> None:
        """Remove all but the ``keep`` newest records (older ones only serve forensics)."""
        for epoch in self._epochs()[:-keep]:
            with contextlib.suppress(OSError):
                self.path(epoch).unlink()
