"""Fixtures for every test.

``TUNEGATE_KB`` points at a fresh file per test (under pytest's temporary directory, beside
no test's own ``tmp_path``), and at one shared file for module- and session-scoped fixtures,
so nothing a test runs (a tuning run records itself when it finishes; ``tunegate kb`` reads)
ever touches the user's real knowledge base. Child processes inherit it. A test about the
default location removes it explicitly.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunegate.testing.postgres import ThrowawayCluster, find_server_bin

_NUMBER = itertools.count()


@pytest.fixture(scope="session")
def _knowledge_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("knowledge")


@pytest.fixture(scope="session", autouse=True)
def _session_knowledge_base(_knowledge_dir: Path) -> Iterator[Path]:
    """``TUNEGATE_KB`` for what runs outside a test function: module- and session-scoped
    fixtures (a tuning run shared by a module's tests) are set up before any function-scoped
    fixture, so without this they would record into the user's knowledge base."""
    path = _knowledge_dir / "kb-shared-fixtures.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_KB", str(path))
        yield path


@pytest.fixture(autouse=True)
def _private_knowledge_base(_knowledge_dir: Path, monkeypatch: pytest.MonkeyPatch
                            ) -> Iterator[Path]:
    """``TUNEGATE_KB`` = a knowledge base no other test shares (created only if used)."""
    path = _knowledge_dir / f"kb-{next(_NUMBER)}.sqlite"
    monkeypatch.setenv("TUNEGATE_KB", str(path))
    yield path


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[ThrowawayCluster]:
    """One throwaway PostgreSQL server for the session (``scripts/install_postgres.sh``
    installs the server; ``make test`` runs it). Without one, the ``postgres`` tests are
    skipped with the reason, except under CI, where that is a failure."""
    if find_server_bin() is None:
        reason = ("no PostgreSQL server found; run scripts/install_postgres.sh (as root it "
                  "installs Debian's postgresql package) or set TUNEGATE_PG_BIN")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with ThrowawayCluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: ThrowawayCluster) -> str:
    """A fresh, empty database on the session's server, as a SQLAlchemy URL (no password)."""
    if not postgres_cluster.running:  # a test stopped it and failed before restarting it
        postgres_cluster.start()
    return postgres_cluster.create_database(f"t{next(_NUMBER)}")
