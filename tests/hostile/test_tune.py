"""`tunegate tune` (and `manual`, `restart`, `rollback`, `replay`) on hostile configs and paths.

Each row is one broken config: exit 2 and one line naming the file, the field and the value,
before anything is measured or written (no run directory appears). The rows restate the
reports that filed them: a typo'd objective that looped in BASELINE forever, absurd repeat
counts and budgets, a constraint no config can meet, a parameter with no starting value,
non-finite numbers, files that are not UTF-8 TOML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

BASE = """
[run]
budget = 3
seed = 1

[server]
adapter = "simulator-virtual"
scenario = "fast"

[workload]
dataset = "synthetic"
num_requests = 8
input_tokens = "64"
output_tokens = "16"
concurrency = 4

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 8
high = 128
default = 16

[objective]
metric = "output_throughput"

[gate]
repeats = 2
initial_repeats = 2
"""

# (id, text to replace in BASE, its replacement, fragments the one error line must hold)
ROWS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("objective typo", 'metric = "output_throughput"', 'metric = "output_throughpt"',
     ("objective.metric", "output_throughpt", "did you mean")),
    ("goodput without SLOs", 'metric = "output_throughput"', 'metric = "request_goodput"',
     ("request_goodput",)),
    ("guardrail on an unknown metric", "[gate]",
     '[[guardrails]]\nmetric = "p99_nonsense_ms"\ndirection = "lower"\ntolerance = 0.1\n\n[gate]',
     ("guardrails", "p99_nonsense_ms")),
    ("SLO on an unknown metric", "[gate]", '[search]\nslos = ["p99_nonsense_ms <= 10"]\n\n[gate]',
     ("slos", "p99_nonsense_ms")),
    ("budget 0", "budget = 3", "budget = 0", ("budget",)),
    ("budget -1", "budget = 3", "budget = -1", ("budget",)),
    ("budget 100000", "budget = 3", "budget = 100000", ("budget", "1000")),
    ("repeats 0", "repeats = 2\ninitial", "repeats = 0\ninitial", ("repeats",)),
    ("repeats 1", "repeats = 2\ninitial", "repeats = 1\ninitial", ("repeats",)),
    ("repeats -1", "repeats = 2\ninitial", "repeats = -1\ninitial", ("repeats",)),
    ("repeats 100000", "repeats = 2\ninitial", "repeats = 100000\ninitial", ("repeats", "1000")),
    ("initial_repeats 100000", "initial_repeats = 2", "initial_repeats = 100000",
     ("initial_repeats",)),
    ("repeats above max_repeats", "repeats = 2\ninitial_repeats = 2",
     "repeats = 20\ninitial_repeats = 2\nmax_repeats = 10", ("repeats", "max_repeats")),
    ("infinite bound", "high = 128", "high = inf", ("high",)),
    ("NaN bound", "low = 8", "low = nan", ("low",)),
    ("no starting value", "default = 16\n", "", ("max_num_seqs", "starting value")),
]


def _config(tmp_path: Path, old: str, new: str) -> Path:
    assert old in BASE, old
    path = tmp_path / "tune.toml"
    path.write_text(BASE.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(("old", "new", "fragments"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_a_broken_config_is_one_line_and_writes_nothing(
        tmp_path: Path, cli: Any, old: str, new: str, fragments: tuple[str, ...]) -> None:
    config, run_dir = _config(tmp_path, old, new), tmp_path / "run"
    cli.refuses(["tune", "--config", str(config), "--run-dir", str(run_dir), "--quiet"],
                *fragments)
    assert not run_dir.exists()


def test_a_constraint_no_config_can_meet_is_refused(tmp_path: Path, cli: Any) -> None:
    # max_num_seqs is searched in [8, 128]: >= 1000 made repairs run trials out of bounds.
    config = tmp_path / "tune.toml"
    config.write_text('constraints = ["max_num_seqs >= 1000"]\n' + BASE, encoding="utf-8")
    cli.refuses(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")],
                "max_num_seqs >= 1000", "no config")


@pytest.mark.parametrize("flag", ["0", "-1", "100000", "inf", "nan", "ten"])
def test_budget_flag_is_bounded_without_a_pydantic_dump(tmp_path: Path, cli: Any,
                                                        flag: str) -> None:
    config = _config(tmp_path, "budget = 3", "budget = 3")
    out = cli.refuses(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run"),
                       "--budget", flag], "--budget")
    assert "validation error" not in out.err and "pydantic" not in out.err


@pytest.mark.parametrize("command", [["tune", "--config"], ["manual", "--config"],
                                     ["restart", "--config"]])
@pytest.mark.parametrize(("name", "data", "fragment"), [
    ("latin1.toml", b'[run]\nbudget = 3\n# caf\xe9\n', "UTF-8"),
    ("nested.toml", b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "tune.toml"),
    ("not_toml.toml", b"{this is not toml\n", "tune.toml"),
], ids=["not_utf8", "deeply_nested", "not_toml"])
def test_an_unreadable_config_is_one_line(tmp_path: Path, cli: Any, command: list[str],
                                          name: str, data: bytes, fragment: str) -> None:
    path = tmp_path / "tune.toml"
    path.write_bytes(data)
    cli.refuses([*command, str(path)], str(path))


def test_a_run_directory_that_is_a_file(tmp_path: Path, cli: Any) -> None:
    config = _config(tmp_path, "budget = 3", "budget = 3")
    taken = tmp_path / "run"
    taken.write_text("not a directory")
    cli.refuses(["tune", "--config", str(config), "--run-dir", str(taken), "--quiet"],
                str(taken))


@pytest.mark.parametrize("command", ["replay", "rollback"])
def test_replay_and_rollback_of_something_that_is_no_run(tmp_path: Path, cli: Any,
                                                         command: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    outcome = cli.run([command, str(empty)])
    assert outcome.code in (1, 2), outcome.err
    assert "Traceback" not in outcome.err and "internal error" not in outcome.err
    assert str(empty) in outcome.err


def test_a_mistyped_secret_is_named_but_never_echoed(tmp_path: Path, cli: Any) -> None:
    # A token given as a number: the error names the field, not the token.
    config = _config(tmp_path, '[server]\n', '[server]\nenv = { HF_TOKEN = 123456789 }\n')
    out = cli.refuses(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")],
                      "server.env.HF_TOKEN")
    assert "123456789" not in out.err + out.out


def test_a_restart_log_directory_that_is_a_file(tmp_path: Path, cli: Any) -> None:
    taken = tmp_path / "logs"
    taken.write_text("not a directory")
    cli.refuses(["restart", "--log-dir", str(taken)], "--log-dir", str(taken))
