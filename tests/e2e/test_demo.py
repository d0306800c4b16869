"""``make demo``'s job, end to end: the article replayed, the broken gauges rejected, the tuning
run attributed and recorded in the knowledge base."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tunegate.servers.simulator.scenarios import SIMULATOR_VERSION

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_rejects_the_broken_gauges_and_accepts_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "tunegate", "demo", "--out-dir", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    verdicts = {path.stem: json.loads(path.read_text())["validation"]["valid"]
                for path in out.glob("*.json")}
    assert verdicts == {
        "a-no-stream-chunked-off": False,
        "b-stream-chunked-on": True,
        "c-stream-chunked-off": True,
        "http-simulator": True,
        "virtual-simulator": True,
        "server-ignores-stream": False,
    }
    summary = json.loads((out / "tune" / "summary.json").read_text())
    assert summary["status"] == "budget_exhausted"
    assert summary["story"][0].startswith("gauge fixed first: ttft_equals_e2el")
    assert "prefill_slower_than_decode" in summary["story"][1]
    assert summary["history"][1]["verdict"] == "ACCEPT"  # chunked prefill, kept with evidence
    assert summary["kept"]["params"]["enable_chunked_prefill"] is True
    article = json.loads((out / "a-no-stream-chunked-off.json").read_text())
    assert article["completed"] == 1319
    assert article["mean_ttft_ms"] == pytest.approx(9557.6, rel=0.10)
    assert article["validation"]["findings"][0]["code"] == "ttft_equals_e2el"
    # part 4: the tool's own control experiment separates the gauge repair from the engine
    attribution = json.loads((out / "tune" / "attribution.json").read_text())
    by_name = {c["name"]: c for c in attribution["changes"]}
    stream, chunked = by_name["benchmark.stream"], by_name["enable_chunked_prefill"]
    assert (stream["kind"], stream["verdict"]) == ("gauge", "changes the measurement")
    assert (chunked["kind"], chunked["verdict"]) == ("engine", "improves")
    control = json.loads((out / "c-stream-chunked-off.json").read_text())
    fixed = json.loads((out / "b-stream-chunked-on.json").read_text())
    gauge_repair = control["mean_ttft_ms"] / article["mean_ttft_ms"] - 1
    chunked_effect = fixed["mean_ttft_ms"] / control["mean_ttft_ms"] - 1
    assert stream["metrics"]["mean_ttft_ms"]["effect"] == pytest.approx(gauge_repair, abs=0.10)
    assert chunked["metrics"]["mean_ttft_ms"]["effect"] == pytest.approx(chunked_effect,
                                                                          abs=0.10)
    # the gain (engine changes only) holds no gauge repair; a before/after comparison does
    total = attribution["total"]["metrics"]["mean_ttft_ms"]["effect"]
    reported = attribution["reported"]["metrics"]["mean_ttft_ms"]["effect"]
    assert total == pytest.approx(chunked["metrics"]["mean_ttft_ms"]["effect"], abs=1e-9)
    assert reported < total - 0.10

    # the tuning run is in the knowledge base, with its fingerprint
    listed = subprocess.run([sys.executable, "-m", "tunegate", "kb", "list", "--json"],
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)["runs"]
    assert run["run_dir"].endswith(str(out / "tune"))
    assert (run["engine"], run["model"]) == (f"tunegate-simulator {SIMULATOR_VERSION}",
                                             "llama-3.1-70b")
    assert "Ascend" in run["accelerator"]

    # the demo ends by naming the tuning run's HTML report
    report = out / "tune" / "report.html"
    assert proc.stdout.rstrip().splitlines()[-1].endswith(str(report))
    assert report.stat().st_size > 0
