"""``tunegate stats power`` as a user runs it: the number, the budget warning, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tunegate.cli import main


def test_article_example_prints_seven(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.03"]) == 0
    assert capsys.readouterr().out == "7\n"


def test_t_method_and_gate_variants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.03", "--method", "t"]) == 0
    assert capsys.readouterr().out == "9\n"
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.05", "--gate",
                 "--noise-repeats", "10"]) == 0
    assert capsys.readouterr().out == "10\n"


def test_short_budget_warns_with_the_minimum_detectable_effect(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.03", "--budget", "3"]) == 0
    out = capsys.readouterr()
    assert out.out == "7\n"
    assert "minimum detectable effect at 3 repeats is 4.57%" in out.err


def test_json_plan(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "power", "--sigma", "0.02", "--effect", "0.03", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["n"] == 7 and plan["method"] == "z" and plan["feasible"] is True


@pytest.mark.parametrize("argv", [
    ["--sigma", "-0.02", "--effect", "0.03"], ["--sigma", "0.02", "--effect", "0"],
    ["--sigma", "0.02", "--effect", "0.03", "--alpha", "2"],
    ["--sigma", "0.02", "--effect", "0.02", "--gate"]])
def test_bad_values_exit_2_with_a_message_not_a_traceback(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "power", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tunegate stats: error:") and "Traceback" not in err


def test_console_script_end_to_end() -> None:
    done = subprocess.run([sys.executable, "-m", "tunegate", "stats", "power", "--sigma", "0.02",
                           "--effect", "0.03"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "7\n")
    missing = subprocess.run([sys.executable, "-m", "tunegate", "stats", "power", "--sigma",
                              "0.02"], capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "--effect" in missing.stderr
