"""Database URLs as users write them, and the engine options that keep an outage short.

Specification: a driverless PostgreSQL URL (``postgresql://``, ``postgres://``) gets the driver
tunegate installs (psycopg 3); one naming its driver, and any other database, is kept as
written; PostgreSQL engines test a connection before use, give up connecting after a few
seconds and notice a vanished peer, and :func:`bound_statements` cancels a statement that runs
past its limit (against a real server); the module's examples hold.
"""

from __future__ import annotations

import doctest

import pytest

import tunegate.database.urls as urls
from tunegate.database import bound_statements, engine_options, is_postgresql, sqlalchemy_url


def test_the_modules_examples_hold() -> None:
    result = doctest.testmod(urls)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("written", "used"), [
    ("postgresql://tuner@db/tunegate", "postgresql+psycopg://tuner@db/tunegate"),
    ("POSTGRES://tuner@db/tunegate", "postgresql+psycopg://tuner@db/tunegate"),
    ("postgresql://tuner@/tunegate?host=/run/postgresql",
     "postgresql+psycopg://tuner@/tunegate?host=/run/postgresql"),
    ("postgresql+psycopg2://tuner@db/tunegate", "postgresql+psycopg2://tuner@db/tunegate"),
    ("sqlite:////shared/study.db", "sqlite:////shared/study.db"),
    ("mysql+pymysql://tuner@db/tunegate", "mysql+pymysql://tuner@db/tunegate"),
])
def test_a_driverless_postgresql_url_gets_psycopg(written: str, used: str) -> None:
    assert sqlalchemy_url(written) == used
    assert is_postgresql(written) == used.startswith("postgresql")


def test_postgresql_engines_bound_every_wait() -> None:
    options = engine_options("postgresql+psycopg://tuner@db/tunegate")
    args = options["connect_args"]
    assert options["pool_pre_ping"] is True
    assert args["connect_timeout"] > 0 and args["keepalives"] == 1
    assert args["tcp_user_timeout"] > 0
    assert "options" not in args  # a startup parameter PgBouncer would refuse
    assert "connect_args" not in engine_options("sqlite:///x.db")


@pytest.mark.postgres
def test_a_statement_past_its_limit_is_cancelled(postgres_url: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(postgres_url, **engine_options(postgres_url))
    bound_statements(engine, 0.3)
    try:
        with engine.begin() as conn:
            assert conn.execute(sqlalchemy.text("SHOW statement_timeout")).scalar() == "300ms"
        with pytest.raises(sqlalchemy.exc.OperationalError, match="statement timeout"), \
                engine.begin() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_sleep(2)"))
    finally:
        engine.dispose()
