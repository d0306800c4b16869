"""``tunegate sim``: exit codes and messages."""

from __future__ import annotations

import json

import pytest

from tunegate.servers.simulator.cli import main


def test_scenarios_lists_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    assert "seed" in capsys.readouterr().out
    assert main(["scenarios", "--json"]) == 0
    assert {row["name"] for row in json.loads(capsys.readouterr().out)} >= {"seed", "fast"}


def test_usage_error_exits_2_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--max-num-seqs", "lots"]) == 2
    err = capsys.readouterr().err
    assert "invalid int value" in err and "Traceback" not in err


def test_invalid_knob_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--scenario", "fast", "--block-size", "7", "--port", "0"]) == 2
    assert "block_size=7 is invalid" in capsys.readouterr().err


def test_unknown_scenario_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--scenario", "nope"]) == 2
    assert "valid values" in capsys.readouterr().err


def test_oom_start_failure_exits_1_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["serve", "--scenario", "h100-8b", "--gpu-memory-utilization", "0.995", "--port", "0"]
    )
    assert code == 1
    assert "out of memory" in capsys.readouterr().err


def test_injected_start_failure_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["serve", "--scenario", "fast", "--fault-start-failure-prob", "1", "--port", "0"]) == 1
    )
    assert "failed to start" in capsys.readouterr().err


def test_start_attempt_is_passed_to_the_start_failure_draw(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "--scenario", "fast", "--fault-start-failure-prob", "1", "--port", "0"]
    assert main([*argv, "--fault-start-attempt", "3"]) == 1
    assert "attempt 3" in capsys.readouterr().err


def test_chunked_prefill_off_with_a_small_budget_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "--scenario", "fast", "--no-enable-chunked-prefill", "--port", "0"]
    assert main([*argv, "--max-num-batched-tokens", "1024"]) == 2
    err = capsys.readouterr().err
    assert "max_num_batched_tokens (1024)" in err and "max_model_len (4096)" in err
