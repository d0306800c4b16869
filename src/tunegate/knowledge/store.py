"""The knowledge base: every finished run's record, in SQLite or any SQLAlchemy database.

:meth:`KnowledgeBase.open` checks what is there before it writes anything: a new (missing or
zero-byte) file or an empty database becomes a knowledge base; an older schema is migrated in
one transaction; a file that is not SQLite, a database that is not a knowledge base, a schema
newer than this code and a damaged file are each refused with one line (exit 2) and left as
they were. Every write is one transaction, serialised with every other writer (SQLite: WAL
and ``BEGIN IMMEDIATE`` with a busy timeout; PostgreSQL: an advisory lock), so several
processes may record and read at once. Dialect-specific code lives in
:mod:`tunegate.knowledge.dialects`; the SQL here is SQLAlchemy Core only.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "kb.sqlite"
    >>> with KnowledgeBase.open(str(path)) as kb:
    ...     kb.list()
    []
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from tunegate.errors import ConfigError, InputFileError, UsageError
from tunegate.knowledge import dialects, schema
from tunegate.knowledge.location import Location, resolve
from tunegate.knowledge.record import RunRecord
from tunegate.knowledge.rows import ROW_COLUMNS, RunRow, columns
from tunegate.knowledge.schema import RUNS, Found

__all__ = ["KnowledgeBase"]

_MOVE_ASIDE = ("it was left unchanged; name another with --kb or TUNEGATE_KB, or move it "
               "aside")


def _reason(exc: DBAPIError, busy_timeout_s: float) -> str:
    text = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc).__name__
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        return (f"another process holds it locked (waited {busy_timeout_s:g} s); try again "
                "once it finishes")
    if "not a database" in lowered or "malformed" in lowered or "encrypted" in lowered:
        return f"it is damaged or not a SQLite database ({text}); {_MOVE_ASIDE}"
    return text


class KnowledgeBase:
    """The store. Use :meth:`open`; close it (or use it as a context manager)."""

    def __init__(self, location: Location, engine: Engine | None, version: int,
                 busy_timeout_s: float) -> None:
        self.location = location
        self._engine = engine
        self.version = version
        self._busy_timeout_s = busy_timeout_s
        self._closed = False

    @classmethod
    def open(cls, url: str | None = None, *, create: bool = True,
             busy_timeout_s: float = 30.0) -> KnowledgeBase:
        """The knowledge base at ``url`` (a path or SQLAlchemy URL; ``None``: ``TUNEGATE_KB``
        or the default location, :func:`tunegate.knowledge.location.resolve`).

        Args:
            url: Where it is.
            create: Create it when missing (a missing or zero-byte file, an empty database).
                ``False`` opens a missing one as empty without creating anything (the
                read-only commands); :attr:`exists` then says ``False``.
            busy_timeout_s: How long a write waits for another process's write.

        Raises:
            ConfigError: The URL is refused (a password, malformed, no driver installed).
            InputFileError: Not SQLite, not a knowledge base, a newer schema, damaged,
                locked, unreadable; nothing was written to it.
        """
        location = resolve(url)
        if location.path is not None:
            state = dialects.sniff(location.path, location.shown)
            if state != "sqlite" and not create:
                return cls(location, None, 0, busy_timeout_s)
            if state == "missing":
                dialects.create_file(location.path, location.shown)
        try:
            engine = dialects.make_engine(location, busy_timeout_s)
        except ImportError as exc:
            raise ConfigError(f"{location.origin} {location.shown!r}: its database driver is "
                              f"not installed ({exc}); install it (PostgreSQL: "
                              "pip install 'psycopg[binary]', URL postgresql+psycopg://...)"
                              ) from None
        kb = cls(location, engine, 0, busy_timeout_s)
        try:
            kb._prepare(create)
        except BaseException:
            kb.close()
            raise
        return kb

    @property
    def exists(self) -> bool:
        """Whether there is a knowledge base (``False``: opened with ``create=False`` and
        nothing there yet)."""
        return self._engine is not None

    def _absent(self) -> bool:
        """Whether there is nothing to read (opened with ``create=False`` on nothing)."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")
        return self._engine is None

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        try:
            yield
        except DBAPIError as exc:
            raise InputFileError(f"knowledge base {self.location.shown}: cannot {doing}: "
                                 f"{_reason(exc, self._busy_timeout_s)}") from None
        except SQLAlchemyError as exc:
            raise InputFileError(f"knowledge base {self.location.shown}: cannot {doing}: "
                                 f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
                                 ) from None

    @contextmanager
    def _transaction(self, doing: str, *, write: bool = False) -> Iterator[Connection]:
        """One transaction; a write one is serialised with every other writer."""
        if self._absent() or self._engine is None:
            raise RuntimeError(f"{self!r} does not exist (opened with create=False)")
        with self._guard(doing), self._engine.connect() as connection:
            if write:
                connection.execution_options(**{dialects.WRITE: True})
            with connection.begin():
                if write:
                    dialects.lock_for_write(connection)
                yield connection

    def _refuse(self, found: Found) -> None:
        shown = self.location.shown
        if found.kind == "foreign":
            listed = ", ".join(found.tables[:5]) + (", ..." if len(found.tables) > 5 else "")
            raise InputFileError(f"knowledge base {shown}: not a tunegate knowledge base "
                                 f"({found.why}; tables: {listed}); {_MOVE_ASIDE}")
        if found.version > schema.latest_version():
            raise InputFileError(f"knowledge base {shown}: written by a newer tunegate (schema "
                                 f"version {found.version}, this one knows up to "
                                 f"{schema.latest_version()}); upgrade tunegate, or name "
                                 "another knowledge base with --kb or TUNEGATE_KB")

    def _prepare(self, create: bool) -> None:
        assert self._engine is not None
        with self._transaction("read it") as connection:
            found = schema.inspect_database(connection)
        self._refuse(found)
        if found.kind == "empty" and not create:
            self._engine.dispose()
            self._engine = None
            return
        if found.kind == "empty" or found.version < schema.latest_version():
            doing = "create it" if found.kind == "empty" else "upgrade it"
            with self._transaction(doing, write=True) as connection:
                found = schema.inspect_database(connection)  # again, now under the lock
                self._refuse(found)
                if found.kind == "empty" or found.version < schema.latest_version():
                    schema.upgrade(connection, found.version)
        self.version = schema.latest_version()
        dialects.use_wal(self._engine)

    def add(self, record: RunRecord) -> str:
        """Record ``record``, replacing an earlier record of the same run. Returns its id."""
        document = json.dumps(record.to_json(), sort_keys=True, separators=(",", ":"),
                              allow_nan=False)
        with self._transaction(f"record run {record.id}", write=True) as connection:
            connection.execute(delete(RUNS).where(RUNS.c.id == record.id))
            connection.execute(insert(RUNS).values(**columns(record), document=document))
        return record.id

    def list(self, kind: str | None = None) -> builtins.list[RunRow]:
        """Every run (of ``kind``), newest first."""
        if self._absent():
            return []
        query = select(*ROW_COLUMNS).order_by(RUNS.c.recorded_at.desc(), RUNS.c.id.desc())
        if kind is not None:
            query = query.where(RUNS.c.kind == kind)
        with self._transaction("list it") as connection:
            return [RunRow(*row) for row in connection.execute(query)]

    def _lookup(self, connection: Connection, ref: str) -> Row[Any]:
        """The one row whose id is ``ref`` or starts with it."""
        shown = self.location.shown
        if not ref:
            raise UsageError("run id: empty; `tunegate kb list` shows the ids")
        wanted = [*ROW_COLUMNS, RUNS.c.document]
        exact = connection.execute(select(*wanted).where(RUNS.c.id == ref)).first()
        if exact is not None:
            return exact
        rows = connection.execute(select(*wanted).where(RUNS.c.id.startswith(
            ref, autoescape=True)).order_by(RUNS.c.id).limit(4)).all()
        if not rows:
            raise UsageError(f"no run {ref!r} in knowledge base {shown}; `tunegate kb list` "
                             "shows the ids")
        if len(rows) > 1:
            names = ", ".join(row.id for row in rows[:3]) + (", ..." if len(rows) > 3 else "")
            raise UsageError(f"run id {ref!r} is ambiguous in knowledge base {shown}: it "
                             f"starts {names}; give more of it")
        return rows[0]

    def _decode(self, run_id: str, document: str) -> RunRecord:
        try:
            record = RunRecord.from_json(json.loads(document))
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            raise InputFileError(f"knowledge base {self.location.shown}: run {run_id}: {exc} "
                                 "(a damaged row, or written by another tunegate version; "
                                 "`tunegate kb forget` removes it)") from None
        if record.id != run_id:
            raise InputFileError(f"knowledge base {self.location.shown}: run {run_id} holds "
                                 f"the record of run {record.id}; the row is damaged")
        return record

    def get(self, ref: str) -> RunRecord:
        """The run whose id is ``ref`` or starts with ``ref``.

        Raises:
            UsageError: No run, or several runs, match (the message names them).
            InputFileError: The row is damaged.
        """
        if self._absent():
            raise UsageError(f"no run {ref!r}: knowledge base {self.location.shown} does not "
                             "exist yet")
        with self._transaction(f"read run {ref}") as connection:
            row = self._lookup(connection, ref)
        return self._decode(row.id, row.document)

    def forget(self, ref: str) -> RunRow:
        """Remove the run ``ref`` names (an id or its unique prefix) and say which it was.

        Returns its listing row rather than its record, so a damaged row can be forgotten
        too."""
        if self._absent():
            raise UsageError(f"no run {ref!r}: knowledge base {self.location.shown} does not "
                             "exist yet")
        with self._transaction(f"forget run {ref}", write=True) as connection:
            row = self._lookup(connection, ref)
            connection.execute(delete(RUNS).where(RUNS.c.id == row.id))
        return RunRow(*row[:len(ROW_COLUMNS)])

    def records(self, kind: str = "tune", *,
                on_damaged: Callable[[str, str], None] | None = None) -> builtins.list[RunRecord]:
        """Every record of ``kind``, newest first (what a warm start reads).

        Args:
            kind: Which runs.
            on_damaged: Called with ``(run id, reason)`` for each row that cannot be read,
                which is then left out; without it such a row raises
                :class:`~tunegate.errors.InputFileError`.
        """
        if self._absent():
            return []
        query = (select(RUNS.c.id, RUNS.c.document).where(RUNS.c.kind == kind)
                 .order_by(RUNS.c.recorded_at.desc(), RUNS.c.id.desc()))
        with self._transaction("read its runs") as connection:
            rows = connection.execute(query).all()
        out = []
        for run_id, document in rows:
            try:
                out.append(self._decode(run_id, document))
            except InputFileError as exc:
                if on_damaged is None:
                    raise
                on_damaged(run_id, str(exc))
        return out

    def close(self) -> None:
        """Release the connections (the knowledge base stays as it is)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._closed = True

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase({self.location.shown!r})"
