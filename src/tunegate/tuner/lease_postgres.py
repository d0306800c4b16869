"""One tuning run per service across hosts: the lease record in a PostgreSQL table.

The file lease (:mod:`tunegate.tuner.lease`) relies on ``flock``, which two hosts never share.
Here the record is one row per service in ``tunegate_lease``, and every rule is one SQL
statement the database applies atomically (PostgreSQL's ``INSERT ... ON CONFLICT DO UPDATE``
locks the row and evaluates its ``WHERE`` on the newest version, so of two contenders exactly
one sees the condition hold):

- **claim**: insert the row (epoch 1) or, if one exists, replace it with epoch + 1, but only if
  it is the very row the contender judged (same epoch) and that row is released or expired;
- **renew**: move ``expires_at`` forward, only where service, token and epoch are still this
  holder's (a stalled holder that wakes up never extends its successor's lease);
- **fence**: :meth:`~tunegate.tuner.lease_core.ServiceLease.check_epoch` re-reads the row;
- **release**: mark the row released and expired, only if still this holder's.

Every time is the database server's clock (``clock_timestamp()``): hosts whose clocks disagree
still agree on when a lease expires. The rules are the file lease's (takeover only after expiry,
a holder alive on the contender's own host never displaced, renewals by heartbeat); an
unreachable database is handled as :mod:`tunegate.tuner.lease_core` describes (the lease stays
good for one TTL after the last renewal was sent, writes then wait, lost after ``outage_s``).

The table is created on first use, under a transaction-scoped advisory lock so that two hosts
creating it at once do not collide. The URL holds no password: libpq reads ``PGPASSWORD``,
``PGPASSFILE`` or ``~/.pgpass``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from tunegate.database import bound_statements, engine_options, sqlalchemy_url
from tunegate.errors import ConfigError, LeaseError, LeaseLostError
from tunegate.loadgen.redact import mask_url_password
from tunegate.tuner.holder import LeaseRecord, boot_id, process_start_ticks
from tunegate.tuner.lease_core import DEFAULT_OUTAGE_S, ServiceLease, StoreUnavailable

__all__ = ["TABLE", "PostgresLease"]

log = logging.getLogger(__name__)

TABLE = "tunegate_lease"

_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    service     text PRIMARY KEY,
    epoch       bigint NOT NULL,
    token       text NOT NULL,
    host        text NOT NULL,
    pid         integer NOT NULL,
    start_ticks bigint,
    boot_id     text,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    released    boolean NOT NULL DEFAULT false
)"""
_COLUMNS = ("service, epoch, token, host, pid, start_ticks, boot_id, "
            "extract(epoch from acquired_at)::float8 AS acquired_at, "
            "extract(epoch from renewed_at)::float8 AS renewed_at, "
            "extract(epoch from expires_at)::float8 AS expires_at, released, "
            "extract(epoch from expires_at - clock_timestamp())::float8 AS seconds_left")
_READ = f"SELECT {_COLUMNS} FROM {TABLE} WHERE service = :service"
_CLAIM = f"""
INSERT INTO {TABLE} AS held (service, epoch, token, host, pid, start_ticks, boot_id,
                             acquired_at, renewed_at, expires_at, released)
VALUES (:service, 1, :token, :host, :pid, :start_ticks, :boot_id, clock_timestamp(),
        clock_timestamp(), clock_timestamp() + make_interval(secs => :ttl), false)
ON CONFLICT (service) DO UPDATE SET
    epoch = held.epoch + 1, token = excluded.token, host = excluded.host, pid = excluded.pid,
    start_ticks = excluded.start_ticks, boot_id = excluded.boot_id,
    acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at, released = false
WHERE held.epoch = :seen_epoch AND (held.released OR held.expires_at <= clock_timestamp())
RETURNING {_COLUMNS}"""
_RENEW = f"""
UPDATE {TABLE} SET renewed_at = clock_timestamp(),
                   expires_at = clock_timestamp() + make_interval(secs => :ttl)
WHERE service = :service AND token = :token AND epoch = :epoch
RETURNING {_COLUMNS}"""
_RELEASE = f"""
UPDATE {TABLE} SET released = true, renewed_at = clock_timestamp(),
                   expires_at = clock_timestamp()
WHERE service = :service AND token = :token AND epoch = :epoch
RETURNING epoch"""


def _record(row: Mapping[str, Any]) -> LeaseRecord:
    return LeaseRecord(
        service=row["service"], host=row["host"], pid=int(row["pid"]),
        start_ticks=row["start_ticks"], boot_id=row["boot_id"], token=row["token"],
        epoch=int(row["epoch"]), acquired_at=float(row["acquired_at"]),
        renewed_at=float(row["renewed_at"]), expires_at=float(row["expires_at"]),
        released=bool(row["released"]))


class PostgresLease(ServiceLease):
    """The lease of ``service`` in the PostgreSQL database at ``url``.

    Args:
        url: A PostgreSQL URL without a password (``postgresql://tuner@db-host/tunegate``).
        service: The service id.
        **options: ``ttl_s``, ``heartbeat_s``, ``timeout_s``, ``poll_s``, ``host``,
            ``on_lost``, ``outage_s`` (see :class:`~tunegate.tuner.lease_core.ServiceLease`).

    Raises:
        ConfigError: The PostgreSQL driver (psycopg) is not installed.
    """

    def __init__(self, url: str, service: str, *, ttl_s: float = 30.0,
                 heartbeat_s: float | None = None, timeout_s: float | None = None,
                 poll_s: float = 0.05, host: str | None = None,
                 on_lost: Callable[[LeaseLostError], None] | None = None,
                 outage_s: float = DEFAULT_OUTAGE_S) -> None:
        super().__init__(service, f"the lease database {mask_url_password(url)}", ttl_s=ttl_s,
                         heartbeat_s=heartbeat_s, timeout_s=timeout_s, poll_s=poll_s,
                         host=host, on_lost=on_lost, outage_s=outage_s)
        import sqlalchemy

        self._sql = sqlalchemy
        target = sqlalchemy_url(url)
        try:
            self._engine = sqlalchemy.create_engine(target, pool_size=2, max_overflow=2,
                                                    **engine_options(target))
        except ModuleNotFoundError as exc:
            raise ConfigError(f"run.lease: the PostgreSQL driver is missing ({exc}); "
                              "pip install 'tunegate[postgres]'") from None
        # a statement may take a third of the TTL: a stuck one must not outlive the lease
        bound_statements(self._engine, max(1.0, ttl_s / 3))
        self._token = uuid.uuid4().hex
        self._table_ready = False

    def _execute(self, sql: str, **params: Any) -> Mapping[str, Any] | None:
        """Run one statement in its own transaction; its first row, or ``None``.

        Raises:
            StoreUnavailable: The database did not answer (down, unreachable, timed out).
            LeaseError: It answered with a refusal (no such database, no permission).
        """
        errors = self._sql.exc
        try:
            with self._engine.begin() as conn:
                if not self._table_ready:
                    conn.execute(self._sql.text("SELECT pg_advisory_xact_lock(hashtext(:t))"),
                                 {"t": TABLE})
                    conn.execute(self._sql.text(_CREATE))
                row = conn.execute(self._sql.text(sql), params).mappings().first()
        except (errors.OperationalError, errors.InterfaceError, errors.TimeoutError) as exc:
            raise StoreUnavailable(_first_line(exc)) from None
        except errors.DBAPIError as exc:
            raise LeaseError(f"{self.where} refused the lease's statement: "
                             f"{_first_line(exc)}") from None
        self._table_ready = True
        return None if row is None else dict(row)

    def _read_current(self) -> LeaseRecord | None:
        row = self._execute(_READ, service=self.service)
        return None if row is None else _record(row)

    def _try_claim(self) -> tuple[str, LeaseRecord | None]:
        row = self._execute(_READ, service=self.service)
        previous = None if row is None else _record(row)
        seconds_left = 0.0 if row is None else float(row["seconds_left"])
        refusal = self.refusal(previous, seconds_left)
        if refusal is not None:
            return refusal, None
        claimed = self._execute(
            _CLAIM, service=self.service, token=self._token, host=self.host,
            pid=os.getpid(), start_ticks=process_start_ticks(os.getpid()), boot_id=boot_id(),
            ttl=self.ttl_s, seen_epoch=previous.epoch if previous else 0)
        if claimed is None:
            epoch = previous.epoch + 1 if previous else 1
            return f"a rival claimed epoch {epoch} first", None
        return "", _record(claimed)

    def _write_renewal(self, record: LeaseRecord) -> LeaseRecord | None:
        row = self._execute(_RENEW, service=self.service, token=record.token,
                            epoch=record.epoch, ttl=self.ttl_s)
        return None if row is None else _record(row)

    def _write_release(self, record: LeaseRecord) -> None:
        self._execute(_RELEASE, service=self.service, token=record.token, epoch=record.epoch)

    def _after_release(self) -> None:
        self._engine.dispose()


def _first_line(exc: BaseException) -> str:
    """A database error's first line (SQLAlchemy appends the SQL and a link)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
