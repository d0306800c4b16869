"""``make demo``'s job, end to end: the article replayed, the broken gauges rejected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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
