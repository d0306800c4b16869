"""A tuner repeat carries the server's own figures, and they work as guardrail and SLO metrics.

Everything runs in process on the ``simulator-virtual`` adapter (a tuning run takes about a
second); the real-socket path (a repeat scraping a served engine) is in
``tests/integration/test_server_telemetry.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.servers.adapters import VirtualSimulator
from tunegate.servers.engine import BenchSettings, VirtualEngine
from tunegate.tuner.measure import measure
from tunegate.workload import WorkloadConfig, build_workload

SERVER_KEYS = ("kv_cache_usage_peak", "preemptions", "server_queue_time_mean_ms",
               "server_running_peak", "server_waiting_peak")


def test_a_virtual_repeat_carries_the_server_keys(tmp_path: Path) -> None:
    simulator = VirtualSimulator("fast", seed=1)
    engine = VirtualEngine(simulator, "virtual-test")
    config = simulator.default_config({"max_num_seqs": 4})
    assert engine.start(config, tmp_path / "logs", budget=None).ok
    (tmp_path / "measurements").mkdir()  # the tuner creates it when it opens the run
    workload = build_workload(WorkloadConfig(dataset="synthetic", num_requests=24,
                                             concurrency=8, input_tokens="128",
                                             output_tokens="16"))
    result = measure(engine, config, workload, BenchSettings(), run_dir=tmp_path,
                     name="m0", repeat=0)
    assert all(isinstance(result.summary[key], float) for key in SERVER_KEYS)
    assert result.summary["server_running_peak"] == 4.0  # max_num_seqs caps what runs
    assert result.summary["server_waiting_peak"] >= 1.0  # 8 clients, 4 seats
    assert 0 < result.metric("kv_cache_usage_peak") <= 1  # type: ignore[operator]
    assert result.to_json()["summary"]["kv_cache_usage_peak"] == result.summary[
        "kv_cache_usage_peak"]
    assert result.server_metrics is not None and result.server_metrics["source"] == "simulator"
    stored = json.loads((tmp_path / result.records_file).read_text())
    assert stored["server_metrics"]["derived"] == result.server_metrics["derived"]
    not_checked = dict(result.validation.not_checked)
    assert "server_client_disagree" not in not_checked
    assert "server_client_disagree" not in result.validation.codes()


CONFIG = """
[run]
budget = 2
seed = 3
recheck_every = 0

[server]
adapter = "simulator-virtual"
scenario = "fast"

[workload]
dataset = "synthetic"
num_requests = 16
input_tokens = "64"
output_tokens = "16"
concurrency = 4

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 8

[objective]
metric = "output_throughput"

[[guardrails]]
metric = "kv_cache_usage_peak"
direction = "lower"
tolerance = 0.5

[search]
slos = ["kv_cache_usage_peak <= {limit}"]

[gate]
repeats = 2
initial_repeats = 2
"""


def _tune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: float) -> dict[str, Any]:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    path = tmp_path / f"tune-{limit}.toml"
    path.write_text(CONFIG.format(limit=limit), encoding="utf-8")
    run_dir = tmp_path / f"run-{limit}"
    assert main(["tune", "--config", str(path), "--run-dir", str(run_dir), "--quiet"]) == 0
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return summary


def test_kv_cache_usage_peak_as_guardrail_and_slo(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    met = _tune(tmp_path, monkeypatch, 0.9)
    peak = met["baseline"]["values"]["kv_cache_usage_peak"]
    assert 0 < peak < 0.9  # measured on every repeat, and the guardrail compares it
    assert all(p["meets_slos"] for p in met["pareto"])
    missed = _tune(tmp_path, monkeypatch, peak / 10)  # no config can use that little
    assert missed["pareto"] and not any(p["meets_slos"] for p in missed["pareto"])
    assert all(any("kv_cache_usage_peak" in s for s in p["missed_slos"])
               for p in missed["pareto"])
