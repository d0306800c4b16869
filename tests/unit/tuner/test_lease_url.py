"""``[run] lease``: where the one-run-per-service lease lives.

Specification: unset means a lock file on this host; a PostgreSQL URL (any driver) is accepted;
any other URL is refused with exit 2 naming ``run.lease`` and what to write instead; a URL
holding a password is refused in one line that holds no byte of it, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.testing.tune_toml import small_tune_config, to_toml
from tunegate.tuner.config import load_config


def write(tmp_path: Path, lease: str | None) -> Path:
    run = {"budget": 1} if lease is None else {"budget": 1, "lease": lease}
    path = tmp_path / "tune.toml"
    path.write_text(to_toml(small_tune_config(run=run)), encoding="utf-8")
    return path


def test_unset_means_a_lock_file_on_this_host(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, None)).run.lease is None


@pytest.mark.parametrize("url", ["postgresql://tuner@db-host/tunegate",
                                 "postgres://tuner@db-host:5433/tunegate?sslmode=require",
                                 "postgresql+psycopg2://tuner@db-host/tunegate",
                                 "postgresql://tuner@/tunegate?host=/run/postgresql"])
def test_a_postgresql_url_is_accepted(tmp_path: Path, url: str) -> None:
    assert load_config(write(tmp_path, url)).run.lease == url


@pytest.mark.parametrize("url", ["sqlite:////shared/lease.db", "mysql://tuner@db/tunegate",
                                 "db-host:5432", "/shared/locks"])
def test_anything_else_is_refused_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    code = main(["tune", "--config", str(write(tmp_path, url)), "--run-dir",
                 str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert "run.lease" in err and "expected a PostgreSQL URL" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["postgresql://tuner:Zq9x/W7@db/tunegate",
                                 "postgresql://tuner@db/tunegate?password=Zq9xW7",
                                 "postgresql://tuner@db/tunegate?sslpassword=Zq9xW7"])
def test_a_password_is_refused_without_echoing_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    code = main(["tune", "--config", str(write(tmp_path, url)), "--run-dir",
                 str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 2
    line = captured.err.strip()
    assert "\n" not in line and "run.lease" in line and "holds a password" in line
    assert "Zq9x" not in captured.err + captured.out
    assert not (tmp_path / "run").exists()
