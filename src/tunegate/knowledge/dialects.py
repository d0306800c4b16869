"""What differs between database kinds, kept here so the store's SQL stays portable.

SQLite (the default, one file per user):

* The file is checked before SQLite ever opens it (:func:`sniff`): a non-empty file that
  does not start with SQLite's magic header is refused without being touched (SQLite itself
  would refuse it too, but only after the path was handed to it). A missing file is created
  private (``0600``, its new parent directory ``0700``) and a zero-byte one counts as new.
* Every transaction begins explicitly (the ``sqlite3`` module's implicit transactions are
  switched off): a read with ``BEGIN``, a write with ``BEGIN IMMEDIATE``, which takes the
  write lock at once, so two writers queue on the busy timeout instead of one of them failing
  when a read lock cannot be upgraded.
* WAL journal mode (readers never wait for the writer) is switched on only once the database
  is known to be a knowledge base: setting it rewrites the file's header, and a foreign
  database must stay byte for byte as it was.

PostgreSQL: every write transaction takes one transaction-level advisory lock first, so
creating the tables, migrating them and replacing a run are serialised across processes as
``BEGIN IMMEDIATE`` serialises them in SQLite. Other databases get no lock: their concurrent
first creation is not covered.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import zlib
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine

from tunegate.errors import InputFileError
from tunegate.knowledge.location import Location

__all__ = ["SQLITE_MAGIC", "create_file", "lock_for_write", "make_engine", "sniff", "use_wal"]

log = logging.getLogger(__name__)

SQLITE_MAGIC = b"SQLite format 3\x00"
WRITE = "tunegate_kb_write"
"""The execution option that makes a SQLite transaction begin ``IMMEDIATE``."""
_ADVISORY_KEY = zlib.crc32(b"tunegate knowledge base")
"""PostgreSQL's advisory lock id for the knowledge base's writers (any stable integer)."""

FileState = Literal["missing", "empty", "sqlite"]


def sniff(path: Path, shown: str) -> FileState:
    """What is at ``path``: nothing, an empty file, or a file starting like SQLite's.

    Raises:
        InputFileError: A directory, an unreadable file, or one that is not SQLite.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return "missing"
    except IsADirectoryError:
        raise InputFileError(f"knowledge base {shown}: is a directory; name a file such as "
                             f"{path / 'knowledge.sqlite'}") from None
    except OSError as exc:
        raise InputFileError(f"knowledge base {shown}: cannot be read ({exc.strerror})") from None
    if not head:
        return "empty"
    if head != SQLITE_MAGIC:
        raise InputFileError(f"knowledge base {shown}: is not a SQLite database (it was left "
                             "unchanged); name another file with --kb or TUNEGATE_KB, or move "
                             "this one aside")
    return "sqlite"


def create_file(path: Path, shown: str) -> None:
    """An empty private file at ``path`` (its parent directories too), unless one appeared."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process created it first: it is checked like any existing file
    except OSError as exc:
        raise InputFileError(f"knowledge base {shown}: cannot be created ({exc.strerror}: "
                             f"{exc.filename})") from None
    os.close(descriptor)


def _sqlite_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(WRITE, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # no implicit BEGIN/COMMIT: see _sqlite_begin


def make_engine(location: Location, busy_timeout_s: float) -> Engine:
    """An engine for ``location``; for SQLite, with explicit transactions and the busy
    timeout (how long a write waits for another writer before it fails as locked)."""
    if location.url.get_backend_name() != "sqlite":
        return create_engine(location.url, pool_pre_ping=True)
    engine = create_engine(location.url, connect_args={"timeout": busy_timeout_s})
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def lock_for_write(connection: Connection) -> None:
    """Serialise this write transaction with every other writer of the knowledge base.

    Call it first in a write transaction; :data:`WRITE` must be set on ``connection``
    (SQLite's lock is the ``BEGIN IMMEDIATE`` that option selects)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ADVISORY_KEY})


def use_wal(engine: Engine) -> None:
    """Switch a SQLite knowledge base to WAL mode (it persists in the file); nothing for other
    databases. A failure (another process holds the database) leaves the rollback journal,
    which works too, only with readers waiting for writers."""
    if engine.dialect.name != "sqlite":
        return
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        mode = cursor.execute("PRAGMA journal_mode").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            cursor.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as exc:  # another process holds the file past the timeout
        log.warning("knowledge base: WAL mode not set (%s); using the rollback journal", exc)
    finally:
        with contextlib.suppress(Exception):
            raw.close()
