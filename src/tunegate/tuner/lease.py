"""One tuning run per service: a lock file, a lease record, a heartbeat, and an epoch fence.

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
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from tunegate.errors import LeaseBusyError, LeaseLostError
from tunegate.files.atomic import atomic_write_bytes, atomic_write_json
from tunegate.tuner.holder import LeaseRecord, RecordStore, holder_liveness, new_record

__all__ = ["Lease", "fenced_write_bytes", "fenced_write_json"]

log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _file_stem(service: str) -> str:
    if service and not _SAFE.search(service) and not service.startswith("."):
        return service
    short = hashlib.sha256(service.encode()).hexdigest()[:8]
    return f"{_SAFE.sub('_', service)[:64]}-{short}"


class Lease:
    """The exclusive right to tune one service, held as a context manager.

    Args:
        directory: Where ``<service>.lock`` and ``<service>.lease/`` live (created if
            missing). Every contender for a service must use the same directory.
        service: The service id (any string; unsafe characters are replaced in file names).
        ttl_s: Lease duration; a holder that does not renew within it may be taken over.
        heartbeat_s: Renewal interval (default ``ttl_s / 3``); must be under ``ttl_s / 2``.
        timeout_s: How long :meth:`acquire` keeps trying (default ``1.5 * ttl_s``, enough to
            outlast a dead holder's lease).
        poll_s: Mean pause between tries (jittered by +-50%).
        host: This machine's name as written in the record (default ``socket.gethostname()``).
        on_lost: Called once, from the heartbeat thread, if the lease is found taken over.
    """

    def __init__(self, directory: str | os.PathLike[str], service: str, *, ttl_s: float = 30.0,
                 heartbeat_s: float | None = None, timeout_s: float | None = None,
                 poll_s: float = 0.05, host: str | None = None,
                 on_lost: Callable[[LeaseLostError], None] | None = None) -> None:
        heartbeat = ttl_s / 3 if heartbeat_s is None else heartbeat_s
        if not ttl_s > 0 or not 0 < heartbeat < ttl_s / 2:
            raise ValueError(f"need ttl_s > 0 and 0 < heartbeat_s < ttl_s/2, got {ttl_s}, "
                             f"{heartbeat}")
        self.directory = Path(directory)
        self.service = service
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat
        self.timeout_s = 1.5 * ttl_s if timeout_s is None else timeout_s
        self.poll_s = poll_s
        self.host = host if host is not None else socket.gethostname()
        self.on_lost = on_lost
        stem = _file_stem(service)
        self.lock_path = self.directory / f"{stem}.lock"
        self.records = RecordStore(self.directory / f"{stem}.lease")
        self._token = uuid.uuid4().hex
        self._fd: int | None = None
        self._record: LeaseRecord | None = None
        self._lost: LeaseLostError | None = None
        self._mutex = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lease (acquired, not released, not lost)."""
        return self._record is not None and self._lost is None

    @property
    def epoch(self) -> int:
        """This tenure's epoch. Raises :class:`LeaseLostError` when not held."""
        return self.check_epoch(reread=False)

    @property
    def record(self) -> LeaseRecord | None:
        """The record this object last wrote, or ``None`` before acquisition."""
        return self._record

    def acquire(self, timeout_s: float | None = None) -> Lease:
        """Take the lease, retrying until ``timeout_s`` (default: the constructor's).

        Returns:
            ``self``, holding the lease, with the heartbeat running.

        Raises:
            LeaseBusyError: The timeout passed; the message names the holder (host, pid, since
                when, expiry) and why it could not be taken over.
        """
        if self._record is not None:
            raise RuntimeError("this Lease object was already acquired; create a new one")
        self.directory.mkdir(parents=True, exist_ok=True)
        wait = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while True:
            reason = self._try_acquire()
            if reason is None:
                return self
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LeaseBusyError(
                    f"service {self.service!r} is leased: {reason}. Waited {wait:.1f} s for "
                    f"{self.lock_path}. Wait for that run to finish, or stop it; a crashed "
                    "holder's lease is taken over once it expires."
                )
            time.sleep(min(remaining, self.poll_s * random.uniform(0.5, 1.5)))

    def _try_acquire(self) -> str | None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            record = self.records.current()
            who = record.describe() if record else "a process that has not written its record"
            return f"held by {who}, which still holds the lock (alive)"
        try:
            reason, record = self._claim(fd)
        except BaseException:
            os.close(fd)
            raise
        if record is None:
            os.close(fd)  # closing the descriptor drops the flock
            return reason
        self._fd, self._record = fd, record
        log.info("lease on %r acquired, epoch %d", self.service, record.epoch)
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat, daemon=True,
                                        name=f"lease-heartbeat-{self.service}")
        self._thread.start()
        return None

    def _claim(self, fd: int) -> tuple[str, LeaseRecord | None]:
        try:
            same_file = os.fstat(fd).st_ino == os.stat(self.lock_path).st_ino
        except FileNotFoundError:
            same_file = False
        if not same_file:
            return "the lock file was replaced while locking", None
        previous = self.records.current()
        now = time.time()
        refusal = self._refusal(previous, now)
        if refusal is not None:
            return refusal, None
        epoch = previous.epoch + 1 if previous else 1
        record = new_record(self.service, self.host, self._token, epoch, now, self.ttl_s)
        if not self.records.claim(record):
            return f"a rival claimed epoch {epoch} first", None
        self.records.prune()
        return "", record

    def _refusal(self, previous: LeaseRecord | None, now: float) -> str | None:
        if previous is None or previous.released:
            return None
        liveness = holder_liveness(previous, host=self.host)
        if liveness == "alive":
            return f"held by {previous.describe()}, whose process is alive (never displaced)"
        if now < previous.expires_at:
            return (f"held by {previous.describe()}, holder {liveness}; it can be taken over "
                    f"in {previous.expires_at - now:.1f} s when the lease expires")
        return None

    def renew(self) -> LeaseRecord:
        """Extend the lease by ``ttl_s`` from now (the heartbeat calls this).

        Raises:
            LeaseLostError: Another holder has taken over.
        """
        with self._mutex:
            self.check_epoch()
            assert self._record is not None
            record = self._record.renewed(time.time(), self.ttl_s)
            self.records.update(record)
            self._record = record
            return record

    def check_epoch(self, *, reread: bool = True) -> int:
        """Return this tenure's epoch if it is still current; the fence before a durable write.

        Args:
            reread: Re-read the record from disk (default). ``False`` only checks local state.

        Raises:
            LeaseLostError: Never acquired, released, or taken over by another holder; the
                message names the new holder.
        """
        with self._mutex:
            if self._lost is not None:
                raise self._lost
            if self._record is None:
                raise LeaseLostError(f"the lease on {self.service!r} is not held; acquire it "
                                     "before writing")
            if reread:
                current = self.records.current()
                mine = self._record
                if current is None or current.token != mine.token or current.epoch != mine.epoch:
                    who = current.describe() if current else "nobody (record removed)"
                    self._mark_lost(LeaseLostError(
                        f"lease on {self.service!r} lost: epoch {mine.epoch} is stale, now held "
                        f"by {who}; refusing durable writes from this run"))
                    assert self._lost is not None
                    raise self._lost
            return self._record.epoch

    def _mark_lost(self, error: LeaseLostError) -> None:
        first = self._lost is None
        self._lost = error
        if first:
            log.error("%s", error)
            self._stop.set()
            if self.on_lost is not None:
                self.on_lost(error)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.renew()
            except LeaseLostError:
                return
            except OSError as exc:  # a full disk must not kill the thread; expiry will tell
                log.warning("lease heartbeat for %r failed: %s", self.service, exc)

    def release(self) -> None:
        """Give the lease back (marks the record released, keeps its epoch). Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._mutex:
            if self._fd is None:
                return
            try:
                if self._lost is None and self._record is not None:
                    current = self.records.current()
                    if current is not None and current.token == self._record.token:
                        done = replace(current.renewed(time.time(), 0.0), released=True)
                        self.records.update(done)
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
                self._fd = None
                if self._lost is None:
                    self._lost = LeaseLostError(f"the lease on {self.service!r} was released")

    def __enter__(self) -> Lease:
        return self.acquire() if self._record is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def fenced_write_bytes(lease: Lease, path: str | os.PathLike[str], data: bytes) -> int:
    """Atomically replace ``path`` with ``data`` if ``lease`` is still current.

    Returns:
        The epoch the write was made under.

    Raises:
        LeaseLostError: Another holder took over; nothing is written.
    """
    epoch = lease.check_epoch()
    atomic_write_bytes(path, data)
    return epoch


def fenced_write_json(lease: Lease, path: str | os.PathLike[str], obj: Any, *,
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
