"""Issue 13, runs without end: ``tunegate tune`` stops when a metric it needs is not in the data.

``[objective] metric = "mean_itl_ms"`` with one output token per request passes the config check
(ITL is a real metric) but no repeat can hold it: BASELINE used to wait for the value without
end (3,927 measurements and 179 MB in a minute). Now the first valid baseline repeat without a
metric the config names stops the run: state ``aborted``, exit 2 (the config asks for a figure
this workload cannot produce: a usage error found by measuring), the reason naming the metric,
the field, the repeat and why, in the final console line, ``summary.json`` and ``report.md``.
A candidate whose valid repeat lacks a gated metric (here: the server's ``/metrics`` scrape was
lost, so a guardrail on ``kv_cache_usage_peak`` has no value) is discarded and rolled back (the
gate could not judge it; VERIFY would wait for it forever).

Also here: ``--budget`` bounds and a resumed run whose recorded config is invalid, each one line
and exit 2 before anything is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.servers.adapters import ServerConfig, VirtualSimulator
from tunegate.servers.engine import BenchSettings, EngineRun, VirtualEngine
from tunegate.servers.lifecycle import RestartOutcome, RestartStatus, StartResult
from tunegate.tuner import driver
from tunegate.tuner.config import load_config
from tunegate.tuner.journal import Journal
from tunegate.workload.spec import Workload

pytestmark = [pytest.mark.integration]

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
num_requests = 8
input_tokens = "32"
output_tokens = "OUTPUT"
concurrency = 2

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 8

[objective]
metric = "METRIC"
direction = "DIRECTION"

[[guardrails]]
metric = "p99_ttft_ms"
direction = "lower"
tolerance = 0.5

[gate]
repeats = 2
initial_repeats = 2
"""


def write(tmp_path: Path, metric: str = "output_throughput", direction: str = "higher",
          output: int = 8) -> Path:
    path = tmp_path / "tune.toml"
    path.write_text(CONFIG.replace("METRIC", metric).replace("DIRECTION", direction)
                    .replace("OUTPUT", str(output)), encoding="utf-8")
    return path


def test_an_objective_no_repeat_holds_ends_the_run_with_exit_2(tmp_path: Path) -> None:
    config, run_dir = write(tmp_path, "mean_itl_ms", "lower", output=1), tmp_path / "run"
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                           "--run-dir", str(run_dir), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - t0 < 60
    assert done.returncode == 2, done.stderr
    line = " ".join(done.stderr.split())
    assert "Traceback" not in line
    assert ("tunegate tune: aborted: metric missing: the baseline's repeat "
            "measurements/m0001-baseline.json has no mean_itl_ms ([objective] metric): it needs "
            "streamed requests with at least two output tokens") in line
    measured = sorted(p.name for p in (run_dir / "measurements").iterdir())
    assert measured == ["m0000-preflight.json", "m0001-baseline.json"]
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "aborted" and summary["reason"].startswith("metric missing")
    assert "has no mean_itl_ms" in (run_dir / "report.md").read_text(encoding="utf-8")


def test_a_figure_the_model_never_produces_ends_the_run_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    config = write(tmp_path, "mean_ttfat_ms", "lower")  # the simulator's model does not reason
    code = main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2
    assert "status: aborted (metric missing:" in out
    assert "no mean_ttfat_ms ([objective] metric): no request streamed reasoning" in out


class LostScrapeEngine(VirtualEngine):
    """``simulator-virtual``, except that the server's ``/metrics`` scrape is lost while a
    candidate serves: its repeats are valid but hold none of the server's own figures."""

    def __init__(self, simulator: VirtualSimulator, service_id: str) -> None:
        super().__init__(simulator, service_id)
        self.candidate_serves = False
        self.measured: list[str] = []

    def start(self, config: ServerConfig, log_dir: Path, *,
              budget: float | None) -> StartResult[Any]:
        self.candidate_serves = False  # the baseline
        return super().start(config, log_dir, budget=budget)

    def restart(self, config: ServerConfig, fallback: ServerConfig, log_dir: Path, *,
                budget: float | None) -> RestartOutcome[Any]:
        outcome = super().restart(config, fallback, log_dir, budget=budget)
        self.candidate_serves = outcome.status is RestartStatus.STARTED and config != fallback
        return outcome

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int) -> EngineRun:
        self.measured.append("candidate" if self.candidate_serves else "kept")
        if len(self.measured) > 40:
            raise AssertionError(f"measured without end: {self.measured[-5:]}")
        run = super().measure(config, workload, settings, repeat=repeat)
        return EngineRun(run.records, None) if self.candidate_serves else run


def test_a_candidate_without_a_gated_metric_is_rolled_back_not_measured_forever(
        tmp_path: Path) -> None:
    path = write(tmp_path)  # a guardrail on a figure only the server's /metrics holds
    path.write_text(path.read_text(encoding="utf-8") + '\n[[guardrails]]\n'
                    'metric = "kv_cache_usage_peak"\ndirection = "lower"\ntolerance = 0.5\n',
                    encoding="utf-8")
    config = load_config(path)
    virtual = driver.default_engine(config, tmp_path / "run")
    assert isinstance(virtual, VirtualEngine)
    engine = LostScrapeEngine(virtual.simulator, virtual.service_id)
    tuner = driver.Tuner(config, tmp_path / "run", engine=engine, lock_dir=tmp_path / "locks")
    rs = tuner.run()
    assert rs.state.value == "budget_exhausted"
    assert engine.measured.count("candidate") == 2  # one repeat per trial, then rolled back
    assert [t["verdict"] for t in rs.trials_log] == ["BASELINE", "INVALID", "INVALID"]
    assert any("has no kv_cache_usage_peak" in line and "rolled back" in line
               for line in rs.story)


# ---- bounds on the command line, and on resume ----------------------------------------------
@pytest.mark.parametrize(("budget", "says"), [
    ("0", "at least 1 proposal"), ("-1", "at least 1 proposal"),
    ("100000", "at most 1000 proposals"),
])
def test_a_budget_out_of_bounds_is_one_line_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        budget: str, says: str) -> None:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    run_dir = tmp_path / "run"
    code = main(["tune", "--config", str(write(tmp_path)), "--run-dir", str(run_dir),
                 "--budget", budget])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err and "pydantic" not in err
    assert err.startswith(f"tunegate tune: error: --budget: {says}")
    assert err.rstrip().endswith(f"(got {budget})")
    assert not run_dir.exists()


def test_a_resumed_run_whose_config_lacks_a_start_value_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an older tunegate accepted and then failed with ``KeyError`` on resume."""
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    data = load_config(write(tmp_path)).to_json()
    del data["space"][0]["default"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    journal = Journal.open(run_dir / "journal.jsonl")
    journal.append("config", data)
    journal.close()
    code = main(["tune", "--resume", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "KeyError" not in err
    assert "the run's config in journal.jsonl: space.0 (max_num_seqs): a searched parameter " \
           "needs a starting value" in err
