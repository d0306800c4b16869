"""The knowledge base's tables, how a database is recognised as one, and its migrations.

Two tables. ``tunegate_kb_meta`` (key, value) names the application and the schema version;
its shape never changes, because it is how every version of tunegate recognises the database
(and refuses one a newer tunegate wrote). ``tunegate_kb_runs`` holds one row per run: the
record's JSON document (:class:`~tunegate.knowledge.record.RunRecord`, the truth) and columns
derived from it for listing and filtering. Because the document is complete, a migration that
adds a column fills it from the documents; nothing is ever lost by being unlisted. The names
carry a ``tunegate_kb_`` prefix so the tables can share a team's database with others.

Versions: :data:`MIGRATIONS` is the ordered list of steps, the ``n``-th producing version ``n``
from version ``n - 1``. A new database runs them all from version 0 (empty), so creating and
upgrading are one path; :func:`upgrade` runs the missing steps and records the version in the
caller's transaction (one transaction: a failed step leaves the database as it was). A step
defines the tables it creates itself, as they were at its version, never through the current
:data:`RUNS`, which follows the latest version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    inspect,
    select,
)
from sqlalchemy.engine import Connection

from tunegate import __version__
from tunegate.knowledge.checks import utc_now

__all__ = ["APPLICATION", "META", "MIGRATIONS", "RUNS", "Found", "Migration", "inspect_database",
           "latest_version", "upgrade"]

APPLICATION = "tunegate knowledge base"
"""The ``application`` value in the meta table: what makes a database a knowledge base."""
META_TABLE = "tunegate_kb_meta"
RUNS_TABLE = "tunegate_kb_runs"


@dataclass(frozen=True)
class Migration:
    """One schema step.

    Attributes:
        version: The version it produces (one more than the version it starts from).
        summary: What it changes, for people reading the list.
        apply: Does it, inside the caller's transaction.
    """

    version: int
    summary: str
    apply: Callable[[Connection], None]


def _meta_table(metadata: MetaData) -> Table:
    return Table(META_TABLE, metadata,
                 Column("key", String(64), primary_key=True),
                 Column("value", Text, nullable=False))


def _runs_table_v1(metadata: MetaData) -> Table:
    table = Table(RUNS_TABLE, metadata,
                  Column("id", String(200), primary_key=True),
                  Column("kind", String(32), nullable=False),
                  Column("recorded_at", String(32), nullable=False),
                  Column("status", String(64), nullable=False),
                  Column("run_dir", Text, nullable=False),
                  Column("engine", String(200)),
                  Column("model", String(500)),
                  Column("accelerator", String(200)),
                  Column("workload_digest", String(128)),
                  Column("trials", Integer, nullable=False),
                  Column("objective", String(200), nullable=False),
                  Column("kept_value", Float),
                  Column("document", Text, nullable=False))
    Index("ix_tunegate_kb_runs_kind_recorded", table.c.kind, table.c.recorded_at)
    Index("ix_tunegate_kb_runs_workload", table.c.workload_digest)
    Index("ix_tunegate_kb_runs_model", table.c.model)
    return table


def _create_v1(connection: Connection) -> None:
    metadata = MetaData()
    meta = _meta_table(metadata)
    _runs_table_v1(metadata)
    metadata.create_all(connection)
    connection.execute(insert(meta), [
        {"key": "application", "value": APPLICATION},
        {"key": "created_at", "value": utc_now()},
        {"key": "created_by", "value": f"tunegate {__version__}"},
    ])


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the meta table and the runs table (document plus listing columns)",
              _create_v1),
)
"""Every schema step in order; the last one's version is the schema this code writes."""

METADATA = MetaData()
META = _meta_table(METADATA)
RUNS = _runs_table_v1(METADATA)
"""The runs table as the latest version has it (version 1 so far)."""


def latest_version() -> int:
    """The schema version this code writes: the last migration's."""
    return len(MIGRATIONS)


@dataclass(frozen=True)
class Found:
    """What a database holds.

    Attributes:
        kind: ``empty`` (no tables), ``ours`` (a knowledge base), ``foreign`` (anything else).
        version: The knowledge base's schema version (0 unless ``ours``).
        tables: The tables found (for a message about a foreign database).
        why: For ``foreign``: what is missing or wrong.
    """

    kind: Literal["empty", "ours", "foreign"]
    version: int = 0
    tables: tuple[str, ...] = ()
    why: str = ""


def inspect_database(connection: Connection) -> Found:
    """Recognise what ``connection``'s database holds, reading only."""
    tables = tuple(sorted(inspect(connection).get_table_names()))
    if not tables:
        return Found("empty")
    if META_TABLE not in tables:
        return Found("foreign", tables=tables, why=f"no {META_TABLE} table")
    meta = {key: value for key, value in connection.execute(select(META.c.key, META.c.value))}
    if meta.get("application") != APPLICATION:
        return Found("foreign", tables=tables,
                     why=f"{META_TABLE} does not name the application {APPLICATION!r}")
    raw = meta.get("schema_version", "")
    if not raw.isdigit() or int(raw) < 1:
        return Found("foreign", tables=tables, why=f"schema version {raw!r} is not a number")
    return Found("ours", int(raw), tables)


def upgrade(connection: Connection, found: int) -> int:
    """Run the migrations after version ``found``, in order, in ``connection``'s transaction,
    recording each version reached. Returns the version reached (the latest)."""
    for index, migration in enumerate(MIGRATIONS):
        if migration.version != index + 1:
            raise RuntimeError(f"MIGRATIONS[{index}] produces version {migration.version}, "
                               f"expected {index + 1}: the list must be in order")
    for migration in MIGRATIONS[found:]:
        migration.apply(connection)
        connection.execute(delete(META).where(META.c.key == "schema_version"))
        connection.execute(insert(META).values(key="schema_version",
                                               value=str(migration.version)))
    return latest_version()
