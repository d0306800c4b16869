"""Issue 13, bounds: absurd budgets, repeat counts and non-finite numbers are refused at load.

``[gate] repeats = 100000`` or ``initial_repeats = 100000`` ate memory and time;
``repeats = 0/1/-1`` measured five runs before failing without naming the field; a budget of 0
or -1 ran and reported "budget of -1 proposals spent"; ``repeats > max_repeats`` was accepted;
``inf``/``nan`` bounds raised ``ValueError`` after the run directory was written. Each is now one
line naming the file, the field, the value, and the limit with its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.tuner.config import load_config

BASE = """
[run]
budget = 3

[workload]
dataset = "synthetic"
num_requests = 4
input_tokens = "8"
output_tokens = "4"
concurrency = 1

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 8

[[guardrails]]
metric = "p99_ttft_ms"
direction = "lower"
tolerance = 0.1

[gate]
repeats = 2
initial_repeats = 2
"""


def error(tmp_path: Path, old: str, new: str) -> str:
    assert old in BASE
    path = tmp_path / "tune.toml"
    path.write_text(BASE.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message.removeprefix(str(tmp_path) + "/")


@pytest.mark.parametrize(("value", "says"), [
    ("0", "at least 1 proposal"), ("-1", "at least 1 proposal"),
    ("100000", "at most 1000 proposals"),
])
def test_the_budget_is_bounded_with_the_reason(tmp_path: Path, value: str, says: str) -> None:
    message = error(tmp_path, "budget = 3", f"budget = {value}")
    assert message.startswith(f"tune.toml: run.budget: {says}")
    assert message.endswith(f"(got {value})")


@pytest.mark.parametrize("field", ["repeats", "initial_repeats"])
@pytest.mark.parametrize("value", ["0", "1", "-1"])
def test_fewer_than_two_repeats_are_refused(tmp_path: Path, field: str, value: str) -> None:
    message = error(tmp_path, f"\n{field} = 2", f"\n{field} = {value}")
    assert message == (f"tune.toml: gate.{field}: at least 2 repeats: the gate's t-test needs "
                       f"two repeats per config to see their spread (got {value})")


@pytest.mark.parametrize(("field", "old"), [
    ("repeats", "\nrepeats = 2"), ("initial_repeats", "initial_repeats = 2"),
    ("max_repeats", "initial_repeats = 2"),
])
def test_a_huge_repeat_count_is_refused_with_the_reason(tmp_path: Path, field: str,
                                                        old: str) -> None:
    new = ("initial_repeats = 2\nmax_repeats = 100000" if field == "max_repeats"
           else old.replace("= 2", "= 100000"))
    message = error(tmp_path, old, new)
    assert message.startswith(f"tune.toml: gate.{field}: at most 1000 repeats: power "
                              "analysis asks for 394")
    assert message.endswith("(got 100000)")


@pytest.mark.parametrize("field", ["repeats", "initial_repeats"])
def test_repeats_beyond_max_repeats_are_refused(tmp_path: Path, field: str) -> None:
    message = error(tmp_path, f"\n{field} = 2", f"\n{field} = 20")
    assert message == (f"tune.toml: gate.{field} = 20 exceeds gate.max_repeats = 10; lower it "
                       f"or raise max_repeats (at most 1000)")


@pytest.mark.parametrize(("old", "new", "field"), [
    ("high = 64", "high = inf", "space.0.high"),
    ("low = 2", "low = nan", "space.0.low"),
    ("tolerance = 0.1", "tolerance = inf", "guardrails.0.tolerance"),
    ("budget = 3", "budget = 3\napproval_timeout_s = inf", "run.approval_timeout_s"),
    ("[gate]", "[gate]\nmultiplier = nan", "gate.multiplier"),
])
def test_inf_and_nan_are_refused_before_anything_runs(tmp_path: Path, old: str, new: str,
                                                      field: str) -> None:
    message = error(tmp_path, old, new)
    assert message.startswith(f"tune.toml: {field}: Input should be a finite number")


def test_whole_number_kinds_need_whole_number_bounds(tmp_path: Path) -> None:
    message = error(tmp_path, "high = 64", "high = 64.5")
    assert "parameter 'max_num_seqs': log_int bounds must be whole numbers (got 2.0, 64.5)" \
        in message
