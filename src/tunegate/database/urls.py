"""A database URL as the user writes it, as SQLAlchemy needs it, and how tunegate connects.

``postgresql://user@host/db`` is what people write; SQLAlchemy reads a URL without a driver as
``psycopg2``, which tunegate does not install. tunegate installs psycopg 3, so a PostgreSQL URL
without a driver gets ``+psycopg``; a URL naming its driver (``postgresql+psycopg2://``) is
kept as written.

The engine options make a database outage cost seconds, not hours: a connection is tested
before use (``pool_pre_ping``, so the pool reconnects after the server restarted instead of
failing once per stale connection), connecting gives up after ``connect_timeout``, TCP
keepalives and ``tcp_user_timeout`` notice a peer that vanished without closing (a host that
lost power), and :func:`bound_statements` sets ``statement_timeout`` for every transaction so a
query stuck behind a lock gives up. The timeout is set with ``SET LOCAL`` at the start of each
transaction, not as a startup parameter (``options=-c statement_timeout=...``): PgBouncer, the
usual pooler in front of PostgreSQL, refuses a startup parameter it does not track, and a
``SET LOCAL`` also stays inside the transaction in its transaction-pooling mode. The password
is never in the URL: libpq reads ``PGPASSWORD``, ``PGPASSFILE`` or ``~/.pgpass`` (and
``PGSERVICE``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["bound_statements", "engine_options", "is_postgresql", "sqlalchemy_url"]

_POSTGRES_SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 5
"""How long opening a connection may take before the attempt counts as failed."""


def _scheme(url: str) -> tuple[str, str | None]:
    """``(dialect, driver)`` of ``url``: ``postgresql+psycopg://`` -> ``("postgresql",
    "psycopg")``."""
    scheme = urlsplit(url).scheme.lower()
    dialect, _, driver = scheme.partition("+")
    return dialect, driver or None


def is_postgresql(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (any driver).

    Example:
        >>> is_postgresql("postgres://tuner@db/tunegate"), is_postgresql("sqlite:///x.db")
        (True, False)
    """
    return _scheme(url)[0] in _POSTGRES_SCHEMES


def sqlalchemy_url(url: str) -> str:
    """``url`` with the driver tunegate installs when it names none.

    Example:
        >>> sqlalchemy_url("postgresql://tuner@db:5432/tunegate")
        'postgresql+psycopg://tuner@db:5432/tunegate'
        >>> sqlalchemy_url("postgres://tuner@db/tunegate")
        'postgresql+psycopg://tuner@db/tunegate'
        >>> sqlalchemy_url("postgresql+psycopg2://tuner@db/tunegate")
        'postgresql+psycopg2://tuner@db/tunegate'
        >>> sqlalchemy_url("sqlite:////shared/study.db")
        'sqlite:////shared/study.db'
    """
    dialect, driver = _scheme(url)
    if dialect not in _POSTGRES_SCHEMES or driver is not None:
        return url
    return "postgresql+psycopg" + url[url.index("://"):]


def engine_options(url: str) -> dict[str, Any]:
    """Keyword arguments for ``sqlalchemy.create_engine`` (and Optuna's ``engine_kwargs``).

    Args:
        url: The database URL (after :func:`sqlalchemy_url`).

    Example:
        >>> engine_options("sqlite:///x.db")
        {'pool_pre_ping': True}
        >>> engine_options("postgresql+psycopg://t@db/x")["connect_args"]["connect_timeout"]
        5
    """
    options: dict[str, Any] = {"pool_pre_ping": True}
    dialect, driver = _scheme(url)
    if dialect in _POSTGRES_SCHEMES and driver in ("psycopg", "psycopg2"):
        options["connect_args"] = {
            "connect_timeout": CONNECT_TIMEOUT_S,
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 3,
            "keepalives_count": 3, "tcp_user_timeout": 15_000,
        }
    return options


def bound_statements(engine: Any, timeout_s: float) -> None:
    """Give every statement on ``engine`` (a SQLAlchemy engine) ``timeout_s`` seconds at most:
    ``SET LOCAL statement_timeout`` when each transaction begins. Only PostgreSQL has it; on
    another database this does nothing. A statement cancelled so raises ``OperationalError``
    (``QueryCanceled``), as an outage does."""
    if engine.dialect.name != "postgresql":
        return
    from sqlalchemy import event

    milliseconds = max(1, int(timeout_s * 1000))

    def limit(conn: Any) -> None:
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")

    event.listen(engine, "begin", limit)
