"""A ``[search] study`` URL holding a password (issue 13, "Data loss and security").

Specification: a password in the URL's user part or under any secret-named query key (in any
case, percent-encoded, ``sslpassword``, ``pwd``, ``pass``, ``secret``, ``token``...) is refused
with exit 2 and one line naming ``search.study``; the line holds no byte of the password and
nothing is written. A URL without one (``passfile`` names a file, not a secret) is accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.tuner.config import load_config

CONFIG = """
[workload]
dataset = "synthetic"
num_requests = 4
input_tokens = "16"
output_tokens = "4"
concurrency = 1

[search]
study = "{url}"
"""

REFUSED = [
    "postgresql://tuner@db/tunegate?PassWord=Zq9xW7",
    "postgresql://tuner@db/tunegate?PASSWORD=Zq9xW7",
    "postgresql://tuner@db/tunegate?Pwd=Zq9xW7",
    "postgresql://tuner@db/tunegate?sslmode=require&PASSWD=Zq9xW7",
    "postgresql://tuner@db/tunegate?pass=Zq9xW7",
    "postgresql://tuner@db/tunegate?sslpassword=Zq9xW7",
    "postgresql://tuner@db/tunegate?secret=Zq9xW7",
    "postgresql://tuner@db/tunegate?Token=Zq9xW7",
    "postgresql://tuner@db/tunegate?pass%77ord=Zq9xW7",
    "postgresql://tuner@db/tunegate?password=Zq9x#W7",
    "postgresql://tuner:Zq9x/W7@db/tunegate",
    "postgresql://Tuner:Zq9x@W7@db/tunegate",
]


@pytest.mark.parametrize("url", REFUSED)
def test_a_study_url_with_a_password_is_refused_in_one_line_without_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str) -> None:
    config = tmp_path / "tune.toml"
    config.write_text(CONFIG.format(url=url), encoding="utf-8")
    code = main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")])
    captured = capsys.readouterr()
    assert code == 2
    line = captured.err.strip()
    assert "\n" not in line and "search.study" in line and "holds a password" in line
    assert "Zq9x" not in captured.err + captured.out and "W7" not in captured.err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("url", ["sqlite:////shared/tunegate.db",
                                 "postgresql://tuner@db:5432/tunegate?sslmode=require",
                                 "postgresql://tuner@db/tunegate?passfile=/home/t/.pgpass"])
def test_a_study_url_without_a_password_is_accepted_unchanged(tmp_path: Path, url: str) -> None:
    config = tmp_path / "tune.toml"
    config.write_text(CONFIG.format(url=url), encoding="utf-8")
    assert load_config(config).search.study == url
