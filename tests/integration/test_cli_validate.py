"""``tunegate validate`` as a user runs it: the issue's "Must show" cases and every exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _validate(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tunegate", "validate", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_the_articles_report_is_rejected_with_exit_3() -> None:
    proc = _validate(FIXTURES / "vllm" / "article_no_stream.json")
    assert proc.returncode == 3, proc.stderr
    assert "ERROR ttft_equals_e2el" in proc.stdout and "mean 9557.6 ms" in proc.stdout
    assert "derived from: ttft_equals_e2el" in proc.stdout
    assert "fix: " in proc.stdout and "evidence: " in proc.stdout


def test_streaming_prefill_slower_than_decode_is_reported() -> None:
    proc = _validate(FIXTURES / "vllm" / "prefill_slower_stream_detailed.json", "--json")
    doc = json.loads(proc.stdout)
    finding = next(f for f in doc["findings"] if f["code"] == "prefill_slower_than_decode")
    assert finding["evidence"]["mean_prefill_tok_s"] == pytest.approx(7.07, rel=1e-3)
    assert finding["evidence"]["mean_decode_tok_s"] == pytest.approx(16.78, rel=1e-3)
    assert finding["derived_from"] == []


def test_healthy_vllm_file_exits_0() -> None:
    proc = _validate(FIXTURES / "vllm" / "healthy_stream_detailed.json")
    assert proc.returncode == 0, proc.stdout
    assert "verdict: valid" in proc.stdout and "ERROR" not in proc.stdout


def test_aiperf_export_of_a_server_ignoring_stream_is_rejected() -> None:
    proc = _validate(FIXTURES / "aiperf" / "ignore_stream" / "profile_export_aiperf.json",
                     "--json")
    assert proc.returncode == 3
    doc = json.loads(proc.stdout)
    assert doc["format"] == "aiperf" and doc["valid"] is False
    assert doc["source_file"].endswith("profile_export_aiperf.json")
    assert doc["findings"][0]["code"] == "ttft_equals_e2el"
    assert {"invalid_metrics", "not_checked", "notes"} <= set(doc)


def test_guidellm_without_streaming_is_rejected() -> None:
    assert _validate(FIXTURES / "guidellm" / "no_stream_benchmarks.json").returncode == 3
    assert _validate(FIXTURES / "guidellm" / "healthy_benchmarks.json").returncode == 0


@pytest.mark.parametrize(("content", "needle"), [
    (None, "no such file"),
    ("{oops", "not valid JSON"),
    ('{"hello": "world"}', "unknown format"),
])
def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path, content: str | None,
                                                 needle: str) -> None:
    path = tmp_path / "result.json"
    if content is not None:
        path.write_text(content)
    proc = _validate(path)
    assert proc.returncode == 2
    assert needle in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_no_argument_is_a_usage_error() -> None:
    proc = _validate()
    assert proc.returncode == 2 and "FILE" in proc.stderr


def test_our_own_simulated_result_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    bench = subprocess.run(
        [sys.executable, "-m", "tunegate", "bench", "--sim", "h100-8b", "--num-requests", "64",
         "--concurrency", "8", "--out", str(out), "--save-detailed", "--quiet"],
        capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr
    doc = json.loads(_validate(out, "--json").stdout)
    assert doc["format"] == "tunegate" and doc["valid"] is True
    assert "server_client_disagree" not in doc["not_checked"]  # the file carries /metrics
    assert "roofline_exceeded" not in doc["not_checked"]
