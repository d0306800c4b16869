"""The study mirror on PostgreSQL: which storage it builds, which errors it retries, and what
it says when the database fails.

Specifications: a ``postgresql://`` URL without a driver reaches Optuna with psycopg 3 and
tunegate's engine options (a connection tested before use, a connect timeout); opening the
study retries exactly the errors of a lost creation race (PostgreSQL's unique violation,
duplicate table, duplicate object; SQLite's unique violation and lock) and raises anything else
at once; a database failure during ``sync``/``others`` is a :class:`StudyError` of one line
naming the driver's error, not Optuna's "invalid data" wrapper; against a real server, a
refusal never shows a password given in the URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.search import storage
from tunegate.search.objectives import Objective
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.search.storage import StudyError, StudyStore, error_text

SPACE = SearchSpace.of([Param("seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8, high=512)])
OBJECTIVES = [Objective("throughput")]
TRIAL = {"trial": 0, "params": {"seqs": 64}, "values": {"throughput": 2.0}, "value": 2.0}


class Captured(Exception):
    """What the fake storage raises once it has seen its arguments."""


class DriverError(Exception):
    """A DBAPI error carrying a SQLSTATE the way psycopg 3 does."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def test_a_driverless_postgresql_url_gets_psycopg_and_a_tested_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna.storages

    seen: list[tuple[str, dict[str, Any]]] = []

    def fake(url: str, engine_kwargs: dict[str, Any]) -> Any:
        seen.append((url, engine_kwargs))
        raise Captured()

    monkeypatch.setattr(optuna.storages, "RDBStorage", fake)
    with pytest.raises(Captured):
        StudyStore(tmp_path, SPACE, OBJECTIVES, url="postgresql://tuner@db:5432/tunegate")
    assert len(seen) == 1  # not a lost race: not retried
    url, options = seen[0]
    assert url == "postgresql+psycopg://tuner@db:5432/tunegate"
    assert options["pool_pre_ping"] is True
    assert options["connect_args"]["connect_timeout"] == 5


def _sqlalchemy_error(kind: str, sqlstate: str | None, message: str = "x") -> Exception:
    from sqlalchemy import exc

    cls: type[exc.DBAPIError] = getattr(exc, kind)
    return cls("CREATE TABLE studies", {}, DriverError(message, sqlstate))


@pytest.mark.parametrize(("kind", "sqlstate", "retried"), [
    ("IntegrityError", "23505", True),    # unique violation: pg_type, alembic_version
    ("ProgrammingError", "42P07", True),  # duplicate table
    ("ProgrammingError", "42710", True),  # duplicate object (the enum type)
    ("IntegrityError", "23502", False),   # not null: a bug, not a race
    ("ProgrammingError", "42501", False),  # insufficient privilege
    ("OperationalError", "08006", False),  # the server went away: retrying only delays
])
def test_only_a_lost_creation_race_is_retried_on_postgresql(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, sqlstate: str,
        retried: bool) -> None:
    import optuna

    real_storage = storage.open_storage
    # a PostgreSQL URL, served by SQLite here: what is tested is the retry decision
    monkeypatch.setattr(storage, "open_storage",
                        lambda url: real_storage(f"sqlite:///{tmp_path / 'study.db'}"))
    real = optuna.create_study
    calls: list[str] = []

    def racing(**kwargs: Any) -> Any:
        calls.append(kwargs["study_name"])
        if len(calls) == 1:
            raise _sqlalchemy_error(kind, sqlstate)
        return real(**kwargs)

    monkeypatch.setattr(optuna, "create_study", racing)
    url = "postgresql://tuner@db/tunegate"
    if retried:
        assert StudyStore(tmp_path, SPACE, OBJECTIVES, url=url).sync([TRIAL]) == 1
        assert len(calls) == 2
    else:
        with pytest.raises(Exception, match="CREATE TABLE"):
            StudyStore(tmp_path, SPACE, OBJECTIVES, url=url)
        assert len(calls) == 1


def test_a_locked_sqlite_file_is_retried(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    real = optuna.create_study
    calls: list[int] = []

    def locked(**kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise _sqlalchemy_error("OperationalError", None, "database is locked")
        return real(**kwargs)

    monkeypatch.setattr(optuna, "create_study", locked)
    StudyStore(tmp_path, SPACE, OBJECTIVES)
    assert len(calls) == 2


def test_a_database_failure_reads_as_one_line(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from optuna.exceptions import StorageInternalError

    store = StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f1")
    cause = _sqlalchemy_error("OperationalError", "08006",
                              "connection is bad: no such socket\n\tIs the server running?")

    def down(**kwargs: Any) -> Any:
        raise StorageInternalError("An exception is raised during the commit. This typically "
                                   "happens due to invalid data in the commit") from cause

    monkeypatch.setattr(store.study, "get_trials", down)
    for action in (lambda: store.sync([TRIAL], run="a"), lambda: store.others("a")):
        with pytest.raises(StudyError) as raised:
            action()
        assert str(raised.value) == "DriverError: connection is bad: no such socket"
    assert error_text(ValueError("")) == "ValueError"


def test_a_read_cut_by_a_shutdown_names_the_shutdown() -> None:
    from optuna.exceptions import StorageInternalError
    from sqlalchemy.exc import PendingRollbackError

    shutdown = _sqlalchemy_error("OperationalError", "57P01",
                                 "terminating connection due to administrator command")
    # the next query of the transaction the shutdown broke, as in Optuna's reads
    pending = PendingRollbackError("Can't reconnect until invalid transaction is rolled back",
                                   None, None)
    pending.__context__ = shutdown
    wrapped = StorageInternalError("An exception is raised during the commit")
    wrapped.__cause__ = pending
    assert error_text(wrapped) == (
        "DriverError: terminating connection due to administrator command")


@pytest.mark.integration
@pytest.mark.postgres
def test_a_refusal_never_shows_the_password(postgres_url: str, tmp_path: Path) -> None:
    url = postgres_url.replace("postgresql+psycopg://", "postgresql://") + "&password=s3cret"
    StudyStore(tmp_path, SPACE, OBJECTIVES, url=url, fingerprint="f1")  # trust: ignored
    refusals = []
    with pytest.raises(ConfigError, match="different search") as other_search:
        StudyStore(tmp_path, SPACE, OBJECTIVES, url=url, fingerprint="f2")
    refusals.append(str(other_search.value))
    with pytest.raises(ConfigError, match="optimises") as other_direction:
        StudyStore(tmp_path, SPACE, [Objective("throughput", "lower")], url=url)
    refusals.append(str(other_direction.value))
    for message in refusals:
        assert "s3cret" not in message and "password=***" in message
