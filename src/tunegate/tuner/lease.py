"""One tuning run per service on one host: a lock file, a lease record, a heartbeat, and an
epoch fence. The default backend; the rules every backend shares (acquisition, heartbeat,
fencing) are :class:`~tunegate.tuner.lease_core.ServiceLease`'s, and
:mod:`tunegate.tuner.lease_postgres` keeps the same record in a database several hosts share.

Two layers, because each covers the other's blind spot (files in ``directory``):

- **flock**: the holder keeps an exclusive ``fcntl.flock`` on ``<service>.lock`` for its whole
  tenure (tried non-blocking, retried until a timeout). The kernel drops it when the process
  dies, however it dies, so on one host two live holders are impossible.
- **lease record** ``<service>.lease/<epoch>.json`` (see :mod:`tunegate.tuner.holder`): who holds it
  (host, pid, process start time, boot id), since when, until when, and the **epoch**, an
  integer that grows by one with every new holder. A heartbeat thread renews ``expires_at``.

Taking over, in order: a locked lock file is never taken (its holder is alive). With the lock
free, a record that is absent or released is taken at once. Otherwise its holder is checked:
alive on this host (same pid *and* start time) is never displaced; dead (process gone, a
recycled pid, a reboot) or unknown (another host) is taken over only once the record has
expired, and the epoch increments. So a live, renewing holder keeps its lease forever, and a
crashed one costs its successors at most one TTL.

Fencing: every durable write goes through :meth:`Lease.check_epoch` (or :func:`fenced_write_json`),
which re-reads the record and raises :class:`~tunegate.errors.LeaseLostError` when another holder
(a different token or epoch) has taken over, e.g. after this process stalled past its TTL on a
filesystem whose locks other hosts do not see. The check and the write are two steps; the journal
also stamps every line with the epoch, so a late write is visible afterwards.

Example:
    >>> import tempfile
    >>> with Lease(tempfile.mkdtemp(), "sim-seed", ttl_s=5.0) as lease:
    ...     lease.check_epoch()
    1
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tunegate.errors import LeaseLostError
from tunegate.files.atomic import atomic_write_bytes, atomic_write_json
from tunegate.tuner.holder import LeaseRecord, RecordStore, new_record
from tunegate.tuner.lease_core import ServiceLease

__all__ = ["Lease", "fenced_write_bytes", "fenced_write_json"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _file_stem(service: str) -> str:
    if service and not _SAFE.search(service) and not service.startswith("."):
        return service
    short = hashlib.sha256(service.encode()).hexdigest()[:8]
    return f"{_SAFE.sub('_', service)[:64]}-{short}"


class Lease(ServiceLease):
    """The exclusive right to tune one service on this host, held as a context manager.

    Args:
        directory: Where ``<service>.lock`` and ``<service>.lease/`` live (created if
            missing). Every contender for a service must use the same directory.
        service: The service id (any string; unsafe characters are replaced in file names).
        **options: ``ttl_s``, ``heartbeat_s``, ``timeout_s``, ``poll_s``, ``host``,
            ``on_lost`` (see :class:`~tunegate.tuner.lease_core.ServiceLease`).
    """

    def __init__(self, directory: str | os.PathLike[str], service: str, *, ttl_s: float = 30.0,
                 heartbeat_s: float | None = None, timeout_s: float | None = None,
                 poll_s: float = 0.05, host: str | None = None,
                 on_lost: Callable[[LeaseLostError], None] | None = None) -> None:
        self.directory = Path(directory)
        stem = _file_stem(service)
        self.lock_path = self.directory / f"{stem}.lock"
        super().__init__(service, str(self.lock_path), ttl_s=ttl_s, heartbeat_s=heartbeat_s,
                         timeout_s=timeout_s, poll_s=poll_s, host=host, on_lost=on_lost)
        self.records = RecordStore(self.directory / f"{stem}.lease")
        self._token = uuid.uuid4().hex
        self._fd: int | None = None

    def acquire(self, timeout_s: float | None = None) -> Lease:
        """Take the lease (see :meth:`ServiceLease.acquire`); creates the directory."""
        self.directory.mkdir(parents=True, exist_ok=True)
        super().acquire(timeout_s)
        return self

    def _try_claim(self) -> tuple[str, LeaseRecord | None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            record = self.records.current()
            who = record.describe() if record else "a process that has not written its record"
            return f"held by {who}, which still holds the lock (alive)", None
        try:
            reason, record = self._claim(fd)
        except BaseException:
            os.close(fd)
            raise
        if record is None:
            os.close(fd)  # closing the descriptor drops the flock
            return reason, None
        self._fd = fd
        return "", record

    def _claim(self, fd: int) -> tuple[str, LeaseRecord | None]:
        try:
            same_file = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
        except FileNotFoundError:
            same_file = False
        if not same_file:
            return "the lock file was replaced while locking", None
        previous = self.records.current()
        now = time.time()
        refusal = self.refusal(previous, previous.expires_at - now if previous else 0.0)
        if refusal is not None:
            return refusal, None
        epoch = previous.epoch + 1 if previous else 1
        record = new_record(self.service, self.host, self._token, epoch, now, self.ttl_s)
        if not self.records.claim(record):
            return f"a rival claimed epoch {epoch} first", None
        self.records.prune()
        return "", record

    def _read_current(self) -> LeaseRecord | None:
        return self.records.current()

    def _write_renewal(self, record: LeaseRecord) -> LeaseRecord | None:
        current = self.records.current()
        if current is None or current.token != record.token or current.epoch != record.epoch:
            return None
        renewed = record.renewed(time.time(), self.ttl_s)
        self.records.update(renewed)
        return renewed

    def _write_release(self, record: LeaseRecord) -> None:
        current = self.records.current()
        if current is not None and current.token == record.token:
            self.records.update(replace(current.renewed(time.time(), 0.0), released=True))

    def _after_release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def fenced_write_bytes(lease: ServiceLease, path: str | os.PathLike[str], data: bytes) -> int:
    """Atomically replace ``path`` with ``data`` if ``lease`` is still current.

    Returns:
        The epoch the write was made under.

    Raises:
        LeaseLostError: Another holder took over; nothing is written.
    """
    epoch = lease.check_epoch()
    atomic_write_bytes(path, data)
    return epoch


def fenced_write_json(lease: ServiceLease, path: str | os.PathLike[str], obj: Any, *,
                      indent: int | None = 2) -> int:
    """Atomically replace ``path`` with ``obj`` as JSON if ``lease`` is still current.

    Returns:
        The epoch the write was made under.

    Raises:
        LeaseLostError: Another holder took over; nothing is written.
    """
    epoch = lease.check_epoch()
    atomic_write_json(path, obj, indent=indent)
    return epoch
