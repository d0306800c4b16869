"""A run that keeps no records hands each one on as it ends, from any number of processes,
and its summary, verdict and detailed file are those of a run that kept them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.workload import WorkloadConfig, build_workload

pytestmark = pytest.mark.integration


def _config(**extra: object) -> WorkloadConfig:
    return WorkloadConfig.model_validate({"dataset": "synthetic", "num_requests": 24,
                                          "input_tokens": "8", "output_tokens": "6",
                                          "concurrency": 4, "seed": 2, **extra})


@pytest.mark.parametrize("workers", [1, 2, "auto"])
def test_each_record_goes_to_the_callback_once_and_none_is_kept(
    workers: int | Literal["auto"],
) -> None:
    handed: list[RequestRecord] = []
    with serve_in_process(Behaviour(ttft_ms=5, itl_ms=2, tokens=6)) as url:
        result = run_workload(build_workload(_config()), ClientConfig(base_url=url,
                                                                     model="loopback"),
                              workers=workers, progress=handed.append, keep_records=False)
    assert result.records == [] and result.ended == 24 and result.not_sent == 0
    assert sorted(r.index for r in handed) == list(range(24))
    assert all(r.outcome.is_success and r.content_events == 6 for r in handed)


def test_open_loop_without_records_ends_every_request() -> None:
    handed: list[RequestRecord] = []
    workload = build_workload(_config(request_rate=200.0, concurrency=None))
    with serve_in_process(Behaviour(ttft_ms=5, itl_ms=1, tokens=6)) as url:
        result = run_workload(workload, ClientConfig(base_url=url, model="loopback"),
                              progress=handed.append, keep_records=False)
    assert result.ended == 24 and sorted(r.index for r in handed) == list(range(24))


def test_a_bench_without_records_reports_what_one_with_them_does() -> None:
    with serve_in_process(Behaviour(ttft_ms=20, itl_ms=3, tokens=6)) as url:
        verdicts = []
        for keep in (True, False):
            options = BenchOptions(target=TargetOptions(url=url), workload=_config(),
                                   keep_records=keep, server_metrics=False)
            result = bench(options)
            verdicts.append((result.summary["completed"], result.summary["total_output_tokens"],
                             result.validation.valid, result.run.ended,
                             len(result.records)))
    assert verdicts == [(24, 144, True, 24, 24), (24, 144, True, 24, 0)]


def test_save_detailed_writes_every_request_as_it_ends(tmp_path: Path) -> None:
    out = tmp_path / "detailed.json"
    argv = [sys.executable, "-m", "tunegate", "bench", "--sim", "fast", "--num-requests", "300",
            "--num-warmup", "5", "--concurrency", "16", "--input-tokens", "32",
            "--output-tokens", "12", "--out", str(out), "--save-detailed", "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert len(document["records"]) == 305 and len(document["ttfts"]) == 300
    assert sorted(r["index"] for r in document["records"]) == list(range(305))
    assert all(len(gaps) == 11 for gaps in document["itls"])
    assert document["completed"] == 300
    checked = subprocess.run([sys.executable, "-m", "tunegate", "validate", str(out)],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
