"""What every lease backend shares: acquisition with retries, the heartbeat, fencing, release.

A :class:`ServiceLease` is the exclusive right to tune one service. Its rules do not depend on
where the record lives (see :mod:`tunegate.tuner.lease` for files on one host and
:mod:`tunegate.tuner.lease_postgres` for a database several hosts share):

- one holder at a time; a new holder takes the next **epoch**;
- a holder is taken over only once its lease has expired (or it released it), and a holder
  alive on the contender's own host is never displaced;
- a heartbeat thread renews the lease every ``heartbeat_s``;
- **fencing**: every durable write first calls :meth:`ServiceLease.check_epoch`, which re-reads
  the record and raises :class:`~tunegate.errors.LeaseLostError` once another holder took over.

A backend whose store can be unreachable for a while (a database) raises
:class:`StoreUnavailable` from its reads; the lease then stays usable while it is provably
still this holder's (until ``ttl_s`` after the last renewal was *sent*: no rival can take it
over before it expires), then holds every write until the store answers again, and counts as
lost after ``outage_s`` without an answer. When the store answers and the record is still
this holder's, nobody else held the service meanwhile (a takeover would have raised the
epoch), so the run goes on as if nothing happened.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import NoReturn

from tunegate.errors import LeaseBusyError, LeaseError, LeaseLostError
from tunegate.tuner.holder import LeaseRecord, holder_liveness

__all__ = ["DEFAULT_OUTAGE_S", "LeaseUnavailableError", "ServiceLease", "StoreUnavailable",
           "denial_line"]

log = logging.getLogger(__name__)

DEFAULT_OUTAGE_S = 300.0
"""How long a holder waits for an unreachable store before it counts its lease as lost."""


class StoreUnavailable(Exception):
    """The lease store did not answer (a backend raises it; never reaches users)."""


class LeaseUnavailableError(LeaseBusyError):
    """The lease could not be taken because its store did not answer (not another holder)."""


def denial_line(exc: LeaseBusyError) -> str:
    """What the tuner says when the lease is refused."""
    if isinstance(exc, LeaseUnavailableError):
        return f"the service's lease could not be taken: {exc}"
    return f"another tuning run holds this service: {exc}"


class ServiceLease(ABC):
    """The shared half of a lease backend, used as a context manager.

    Args:
        service: The service id.
        where: Where the record lives, for messages (a directory, a masked URL).
        ttl_s: Lease duration; a holder that does not renew within it may be taken over.
        heartbeat_s: Renewal interval (default ``ttl_s / 3``); must be under ``ttl_s / 2``.
        timeout_s: How long :meth:`acquire` keeps trying (default ``1.5 * ttl_s``, enough to
            outlast a dead holder's lease).
        poll_s: Mean pause between tries (jittered by +-50%).
        host: This machine's name as written in the record (default ``socket.gethostname()``).
        on_lost: Called once, from the heartbeat thread, if the lease is found taken over.
        outage_s: How long an unreachable store is waited for before the lease counts as lost.
    """

    def __init__(self, service: str, where: str, *, ttl_s: float = 30.0,
                 heartbeat_s: float | None = None, timeout_s: float | None = None,
                 poll_s: float = 0.05, host: str | None = None,
                 on_lost: Callable[[LeaseLostError], None] | None = None,
                 outage_s: float = DEFAULT_OUTAGE_S) -> None:
        heartbeat = ttl_s / 3 if heartbeat_s is None else heartbeat_s
        if not ttl_s > 0 or not 0 < heartbeat < ttl_s / 2:
            raise ValueError(f"need ttl_s > 0 and 0 < heartbeat_s < ttl_s/2, got {ttl_s}, "
                             f"{heartbeat}")
        self.service = service
        self.where = where
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat
        self.timeout_s = 1.5 * ttl_s if timeout_s is None else timeout_s
        self.poll_s = poll_s
        self.host = host if host is not None else socket.gethostname()
        self.on_lost = on_lost
        self.outage_s = outage_s
        self._record: LeaseRecord | None = None
        self._lost: LeaseLostError | None = None
        self._mutex = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._safe_until = 0.0  # monotonic: the lease is surely ours until then
        self._unreachable_since: float | None = None
        self._released = False

    # -- what a backend provides --------------------------------------------------------------

    @abstractmethod
    def _try_claim(self) -> tuple[str, LeaseRecord | None]:
        """One attempt: ``("", record)`` when claimed, else ``(why not, None)``. May raise
        :class:`StoreUnavailable`."""

    @abstractmethod
    def _read_current(self) -> LeaseRecord | None:
        """The current record. May raise :class:`StoreUnavailable`."""

    @abstractmethod
    def _write_renewal(self, record: LeaseRecord) -> LeaseRecord | None:
        """Renew ``record`` (still this holder's); the renewed record, or ``None`` when another
        holder took over. May raise :class:`StoreUnavailable`."""

    @abstractmethod
    def _write_release(self, record: LeaseRecord) -> None:
        """Mark ``record`` released if it is still this holder's."""

    @abstractmethod
    def _after_release(self) -> None:
        """Free what the backend held for the tenure (a lock file descriptor, connections)."""

    # -- the shared rules ---------------------------------------------------------------------

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

    def refusal(self, previous: LeaseRecord | None, seconds_left: float) -> str | None:
        """Why ``previous`` may not be taken over now (``None``: it may).

        Args:
            previous: The current record, or ``None``.
            seconds_left: Until ``previous`` expires, by the store's clock.
        """
        if previous is None or previous.released:
            return None
        liveness = holder_liveness(previous, host=self.host)
        if liveness == "alive":
            return f"held by {previous.describe()}, whose process is alive (never displaced)"
        if seconds_left > 0:
            return (f"held by {previous.describe()}, holder {liveness}; it can be taken over "
                    f"in {seconds_left:.1f} s when the lease expires")
        return None

    def acquire(self, timeout_s: float | None = None) -> ServiceLease:
        """Take the lease, retrying until ``timeout_s`` (default: the constructor's).

        Returns:
            ``self``, holding the lease, with the heartbeat running.

        Raises:
            LeaseBusyError: The timeout passed; the message names the holder (host, pid, since
                when, expiry) and why it could not be taken over.
            LeaseUnavailableError: The timeout passed without the store answering.
        """
        if self._record is not None:
            raise RuntimeError("this lease object was already acquired; create a new one")
        wait = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while True:
            sent = time.monotonic()
            unavailable: StoreUnavailable | None = None
            try:
                reason, record = self._try_claim()
            except StoreUnavailable as exc:
                unavailable, reason, record = exc, str(exc), None
            if record is not None:
                self._started(record, sent)
                return self
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if unavailable is not None:
                    raise LeaseUnavailableError(
                        f"the lease store for {self.service!r} did not answer for {wait:.1f} s "
                        f"({reason}); check that {self.where} is reachable")
                raise LeaseBusyError(
                    f"service {self.service!r} is leased: {reason}. Waited {wait:.1f} s for "
                    f"{self.where}. Wait for that run to finish, or stop it; a crashed "
                    "holder's lease is taken over once it expires.")
            time.sleep(min(remaining, self.poll_s * random.uniform(0.5, 1.5)))

    def _started(self, record: LeaseRecord, sent: float) -> None:
        self._record = record
        self._safe_until = sent + self.ttl_s
        log.info("lease on %r acquired, epoch %d", self.service, record.epoch)
        self._stop.clear()
        self._thread = threading.Thread(target=self._heartbeat, daemon=True,
                                        name=f"lease-heartbeat-{self.service}")
        self._thread.start()

    def renew(self) -> LeaseRecord:
        """Extend the lease by ``ttl_s`` from now (the heartbeat calls this).

        Raises:
            LeaseLostError: Another holder has taken over, or the store stayed unreachable
                for ``outage_s``.
        """
        with self._mutex:
            self.check_epoch(reread=False)
            assert self._record is not None
            sent = time.monotonic()
            try:
                record = self._write_renewal(self._record)
            except StoreUnavailable as exc:
                self._unreachable(exc)
                return self._record
            self._reachable()
            if record is None:
                self._lose_to(self._read_or_none())
            self._record, self._safe_until = record, sent + self.ttl_s
            return record

    def check_epoch(self, *, reread: bool = True) -> int:
        """Return this tenure's epoch if it is still current; the fence before a durable write.

        Args:
            reread: Re-read the record from the store (default). ``False`` only checks local
                state.

        Raises:
            LeaseLostError: Never acquired, released, taken over by another holder (the message
                names the new holder), or the store unreachable for ``outage_s``.
        """
        with self._mutex:
            if self._lost is not None:
                raise self._lost
            if self._record is None:
                raise LeaseLostError(f"the lease on {self.service!r} is not held; acquire it "
                                     "before writing")
            if reread:
                current = self._read_waiting()
                mine = self._record
                if current is None or current.token != mine.token or current.epoch != mine.epoch:
                    self._lose_to(current)
                if time.monotonic() >= self._safe_until:  # the store is back after a long
                    self.renew()                           # outage: renew before a rival can
            return self._record.epoch

    def _read_waiting(self) -> LeaseRecord | None:
        """The current record; while the store does not answer, ``self._record`` as long as
        the lease is surely still ours, then retries until the store answers or ``outage_s``
        has passed (the caller's write waits)."""
        while True:
            try:
                current = self._read_current()
            except StoreUnavailable as exc:
                if time.monotonic() < self._safe_until:
                    self._unreachable(exc)
                    return self._record
                self._unreachable(exc)  # raises once outage_s has passed
                time.sleep(min(1.0, self.heartbeat_s))
                continue
            self._reachable()
            return current

    def _read_or_none(self) -> LeaseRecord | None:
        try:
            return self._read_current()
        except StoreUnavailable:
            return None

    def _unreachable(self, exc: StoreUnavailable) -> None:
        now = time.monotonic()
        if self._unreachable_since is None:
            self._unreachable_since = now
            log.warning("lease store for %r unreachable (%s); the lease is surely held for "
                        "%.1f s more", self.service, exc, max(0.0, self._safe_until - now))
        if now - self._unreachable_since >= self.outage_s:
            self._mark_lost(LeaseLostError(
                f"lease on {self.service!r} lost: {self.where} did not answer for "
                f"{now - self._unreachable_since:.0f} s ({exc}); another host may hold the "
                "service now, so this run writes nothing more (resume it with --resume)"))
            assert self._lost is not None
            raise self._lost

    def _reachable(self) -> None:
        if self._unreachable_since is not None:
            log.warning("lease store for %r answers again after %.1f s", self.service,
                        time.monotonic() - self._unreachable_since)
            self._unreachable_since = None

    def _lose_to(self, current: LeaseRecord | None) -> NoReturn:
        assert self._record is not None
        who = current.describe() if current else "nobody (record removed)"
        self._mark_lost(LeaseLostError(
            f"lease on {self.service!r} lost: epoch {self._record.epoch} is stale, now held "
            f"by {who}; refusing durable writes from this run"))
        assert self._lost is not None
        raise self._lost

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
            except (OSError, LeaseError) as exc:  # a full disk, a refusing database: the
                # thread must go on; expiry, or the next fenced write, will tell
                log.warning("lease heartbeat for %r failed: %s", self.service, exc)

    def release(self) -> None:
        """Give the lease back (marks the record released, keeps its epoch). Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._mutex:
            if self._record is None:  # never acquired: only free the backend's resources
                self._after_release()
                return
            if self._released:
                return
            try:
                if self._lost is None:
                    self._write_release(self._record)
            except StoreUnavailable as exc:  # it expires by itself
                log.warning("releasing the lease on %r failed (%s); it expires in at most "
                            "%.0f s", self.service, exc, self.ttl_s)
            finally:
                self._released = True
                self._after_release()
                if self._lost is None:
                    self._lost = LeaseLostError(f"the lease on {self.service!r} was released")

    def __enter__(self) -> ServiceLease:
        return self.acquire() if self._record is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
