"""Where the knowledge base lives: ``--kb``, else ``TUNEGATE_KB``, else the XDG data directory;
a URL with a password is refused and never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.knowledge.location import default_path, resolve


def test_every_test_runs_with_a_private_knowledge_base(_private_knowledge_base: Path) -> None:
    location = resolve()
    assert location.origin == "TUNEGATE_KB"
    assert location.path == _private_knowledge_base
    home = Path.home().resolve()
    assert home / ".local" not in location.path.resolve().parents


def test_the_default_is_the_xdg_data_home(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    location = resolve(environ=env)
    assert location.origin == "default"
    assert location.path == tmp_path / "data" / "tunegate" / "knowledge.sqlite"
    assert location.url.get_backend_name() == "sqlite"


@pytest.mark.parametrize("data_home", [None, "", "relative/data"])
def test_without_a_usable_xdg_data_home_it_is_under_local_share(tmp_path: Path,
                                                                 data_home: str | None) -> None:
    env = {"HOME": str(tmp_path)} | ({} if data_home is None else {"XDG_DATA_HOME": data_home})
    assert default_path(env) == tmp_path / ".local" / "share" / "tunegate" / "knowledge.sqlite"


def test_the_process_environment_is_what_it_reads_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUNEGATE_KB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert resolve().path == tmp_path / "tunegate" / "knowledge.sqlite"
    monkeypatch.setenv("TUNEGATE_KB", str(tmp_path / "team.sqlite"))
    assert resolve().path == tmp_path / "team.sqlite"


def test_the_flag_wins_over_the_environment(tmp_path: Path) -> None:
    env = {"TUNEGATE_KB": str(tmp_path / "env.sqlite")}
    assert resolve(str(tmp_path / "flag.sqlite"), environ=env).origin == "--kb"
    assert resolve(None, environ=env).path == tmp_path / "env.sqlite"
    assert resolve(None, environ={"TUNEGATE_KB": "", "HOME": str(tmp_path)}).origin == "default"


def test_a_path_may_start_with_a_tilde(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve("~/kb.sqlite").path == tmp_path / "kb.sqlite"
    assert resolve("sqlite:///~/kb.sqlite").path == tmp_path / "kb.sqlite"


def test_a_sqlite_url_names_its_file(tmp_path: Path) -> None:
    location = resolve(f"sqlite:///{tmp_path}/kb.sqlite")
    assert location.path == tmp_path / "kb.sqlite"
    assert location.url.database == str(tmp_path / "kb.sqlite")


def test_a_server_url_has_no_path() -> None:
    location = resolve("postgresql://tuner@db.internal:5432/tunegate?sslmode=require")
    assert location.path is None
    assert location.shown == "postgresql://tuner@db.internal:5432/tunegate?sslmode=require"


@pytest.mark.parametrize("url", [
    "postgresql://tuner:s3cr3t@db/tunegate", "postgresql://tuner@db/tunegate?password=s3cr3t",
    "postgresql://tuner@db/tunegate?PassWord=s3cr3t", "sqlite:////tmp/kb.sqlite?token=s3cr3t",
])
def test_a_url_with_a_password_is_refused_and_the_password_never_shown(url: str) -> None:
    with pytest.raises(ConfigError, match=r"holds a password.*PGPASSWORD") as caught:
        resolve(url)
    assert "s3cr3t" not in str(caught.value)
    with pytest.raises(ConfigError) as from_env:
        resolve(environ={"TUNEGATE_KB": url})
    assert str(from_env.value).startswith("TUNEGATE_KB ") and "s3cr3t" not in str(from_env.value)


@pytest.mark.parametrize(("url", "why"), [
    ("nosuchdb://host/x", "not a database URL"),
    ("sqlite://", "in-memory"), ("sqlite:///:memory:", "in-memory"),
    ("sqlite+aiosqlite:////tmp/kb.sqlite", "asynchronous"),
    ("postgresql+asyncpg://tuner@db/tunegate", "asynchronous"),
])
def test_urls_that_cannot_hold_a_knowledge_base_are_refused(url: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        resolve(url)


def test_resolving_touches_no_file(tmp_path: Path) -> None:
    resolve(str(tmp_path / "deep" / "kb.sqlite"))
    assert os.listdir(tmp_path) == []
