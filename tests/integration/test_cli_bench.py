"""``tunegate bench`` as a user runs it: files, exit codes, errors, secrets, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.loadgen import kernel_stamps as kernel_stamps_module
from tunegate.loadgen.kernel_stamps import KERNEL_STAMPS
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process

pytestmark = pytest.mark.integration

SECRET = "sk-test-NEVER-PRINT-ME"


def _args(url: str, *extra: str) -> list[str]:
    return ["bench", "--url", url, "--num-requests", "6", "--concurrency", "3",
            "--input-tokens", "16", "--output-tokens", "8", "--no-progress", *extra]


def test_result_file_has_vllm_keys_and_detailed_arrays(loopback, tmp_path: Path, capsys) -> None:
    out = tmp_path / "result.json"
    with loopback(Behaviour(ttft_ms=20, itl_ms=2, tokens=8)) as url:
        code = main(_args(url, "--out", str(out), "--save-detailed", "--goodput", "ttft:1000",
                          "tpot:100", "--percentiles", "50,99.9"))
    assert code == 0
    doc = json.loads(out.read_text())
    for key in ("completed", "failed", "duration", "request_throughput", "output_throughput",
                "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
                "p99.9_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p50_e2el_ms",
                "mean_prefill_tok_s", "mean_decode_tok_s", "request_goodput", "goodput",
                "validation", "input_lens", "output_lens", "ttfts", "itls", "records"):
        assert key in doc, key
    assert doc["completed"] == 6
    assert doc["request_rate"] == "inf" and doc["max_concurrency"] == 3
    assert len(doc["ttfts"]) == 6 and len(doc["itls"][0]) == 7
    assert doc["ttfts"][0] == pytest.approx(0.02, abs=0.01)  # seconds, as vLLM writes them
    assert doc["goodput"]["good_requests"] == 6
    assert "TTFT (ms)" in capsys.readouterr().out


@pytest.mark.parametrize("kernel_stamps", [True, False])
def test_the_result_says_who_timed_the_reads_and_the_console_says_when_the_client_did(
    loopback, tmp_path: Path, capsys, monkeypatch, kernel_stamps: bool
) -> None:
    if kernel_stamps and not KERNEL_STAMPS:
        pytest.skip("the kernel stamps receipts on Linux x86-64 / arm64 only")
    monkeypatch.setattr(kernel_stamps_module, "KERNEL_STAMPS", kernel_stamps)
    out = tmp_path / "result.json"
    with loopback(Behaviour(ttft_ms=20, itl_ms=2, tokens=8)) as url:
        assert main(_args(url, "--out", str(out))) == 0
    assert json.loads(out.read_text())["client"]["kernel_receipts"] == (
        1.0 if kernel_stamps else 0.0)
    said = "100.0% of socket reads were timed when the client got to them"
    assert (said in capsys.readouterr().out) is not kernel_stamps


def test_api_key_is_sent_but_never_written_or_printed(loopback, tmp_path: Path,
                                                      capsys, monkeypatch) -> None:
    monkeypatch.setenv("TUNEGATE_API_KEY", SECRET)
    out = tmp_path / "r.json"
    with loopback(Behaviour(ttft_ms=1, itl_ms=1, tokens=8)) as url:
        assert main(_args(url, "--out", str(out), "--save-detailed")) == 0
        assert main(_args("http://127.0.0.1:9", "--model", "m", "--api-key", SECRET,
                          "--request-timeout", "2")) == 3
        assert main(_args("http://user:pw@127.0.0.1:9", "--model", "m")) == 2
    captured = capsys.readouterr()
    assert SECRET not in out.read_text()
    assert SECRET not in captured.out + captured.err
    assert ":pw@" not in captured.out + captured.err


def test_invalid_gauge_exits_3_and_still_writes_the_result(loopback, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with loopback(Behaviour(ttft_ms=5, itl_ms=1, tokens=8, ignore_stream=True)) as url:
        assert main(_args(url, "--out", str(out), "--quiet")) == 3
    doc = json.loads(out.read_text())
    assert doc["validation"]["findings"][0]["code"] == "ttft_equals_e2el"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-requests", "0"], "--num-requests"),
        (["--goodput", "ttft=5"], "--goodput"),
        (["--percentiles", "50,abc"], "--percentiles"),
        (["--percentiles", "0,100"], "outside (0, 100)"),
        (["--input-tokens", "lognormal:x"], "--input-tokens"),
        (["--url", "localhost:8000"], "http://"),
        (["--url", "http://u:secret@127.0.0.1:8000"], "--api-key"),
        (["--out", "/nonexistent-dir/r.json"], "does not exist"),
        (["--dataset", "jsonl"], "dataset_path"),
        (["--engine-arg", "novalue"], "NAME=VALUE"),
    ],
)
def test_usage_errors_exit_2_with_a_message_not_a_traceback(
    argv: list[str], message: str, capsys
) -> None:
    assert main(["bench", "--model", "m", "--url", "http://127.0.0.1:9", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_unreachable_server_without_model_is_a_usage_error(capsys) -> None:
    assert main(["bench", "--url", "http://127.0.0.1:9", "--num-requests", "1"]) == 2
    assert "pass --model" in capsys.readouterr().err


def test_ctrl_c_writes_what_was_measured(
        tmp_path: Path, interruptible: Callable[..., subprocess.Popen[str]]) -> None:
    out = tmp_path / "partial.json"
    with serve_in_process(Behaviour(ttft_ms=10, itl_ms=50, tokens=60)) as url:
        proc = interruptible(
            [sys.executable, "-m", "tunegate", *_args(url, "--out", str(out),
                                                      "--output-tokens", "60")],
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        time.sleep(2.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    assert doc["outcomes"]["truncated"] == 3  # the three in flight, partial data kept
    assert doc["not_sent"] == 3
    assert "interrupted" in stdout


def test_sigterm_to_the_parent_alone_stops_every_worker(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    with serve_in_process(Behaviour(ttft_ms=10, itl_ms=50, tokens=60)) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tunegate", *_args(url, "--out", str(out),
                                                      "--output-tokens", "60", "--workers", "2",
                                                      "--num-requests", "40")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)  # a tool sending SIGTERM to the parent, not to the group
        time.sleep(4.0)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert proc.returncode == 130, stderr
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True
    assert doc["completed"] < 40
    assert doc["outcomes"]["truncated"] >= 1
