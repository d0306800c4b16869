"""``workers="auto"`` against a real server: every request once, the load kept, the choice told."""

from __future__ import annotations

import itertools

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.loadgen.autoscale import ScalePolicy, run_autoscaled
from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.kernel_stamps import KERNEL_STAMPS
from tunegate.loadgen.records import RequestRecord
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.workload import WorkloadConfig, build_workload

pytestmark = pytest.mark.integration

ALWAYS_HOT = ScalePolicy(busy_limit=-1.0, window_s=0.2, max_workers=2)
"""Every window counts as hot: a second worker joins after two windows, on any machine."""


def _peak_in_flight(records: list[RequestRecord]) -> int:
    edges = sorted([(r.t_send_ns, 1) for r in records] + [(r.t_end_ns, -1) for r in records])
    return max(itertools.accumulate(step for _, step in edges))


def test_a_second_worker_joins_mid_run_without_changing_the_load() -> None:
    workload = build_workload(WorkloadConfig(dataset="synthetic", num_requests=24,
                                             input_tokens="8", output_tokens="20",
                                             concurrency=4, seed=3))
    with serve_in_process(Behaviour(ttft_ms=50, itl_ms=20, tokens=20)) as url:
        result = run_autoscaled(workload, ClientConfig(base_url=url, model="loopback"),
                                policy=ALWAYS_HOT)
    assert sorted(r.index for r in result.records) == list(range(24)), "each request once"
    assert all(r.outcome.is_success for r in result.records)
    assert result.workers == 2 and len(result.scaling) == 1
    assert "2 workers (worker 0: CPU" in result.scaling[0]
    assert all(lag.samples > 0 for lag in result.worker_lags), "both workers sent requests"
    assert all(lag.kernel_receipts == (1.0 if KERNEL_STAMPS else 0.0)
               for lag in result.worker_lags), "both timed their reads the same way"
    assert _peak_in_flight(result.records) <= 4, "the slots moved, they did not multiply"


def test_open_loop_arrivals_keep_their_offsets_across_workers() -> None:
    workload = build_workload(WorkloadConfig(dataset="synthetic", num_requests=30,
                                             input_tokens="8", output_tokens="4",
                                             request_rate=20.0, arrival="constant", seed=1))
    with serve_in_process(Behaviour(ttft_ms=10, itl_ms=5, tokens=4)) as url:
        result = run_autoscaled(workload, ClientConfig(base_url=url, model="loopback"),
                                policy=ALWAYS_HOT)
    assert sorted(r.index for r in result.records) == list(range(30))
    assert result.workers == 2
    offsets = workload.schedule.offsets_s
    assert offsets is not None
    start = min(r.t_issue_ns or r.t_send_ns for r in result.records)
    late_ms = [((r.t_issue_ns or r.t_send_ns) - start) / 1e6 - offsets[r.index] * 1e3
               for r in result.records]
    assert max(late_ms) - min(late_ms) < 200, "every request went out near its own offset"


def test_a_light_load_stays_in_one_process_and_says_so() -> None:
    with serve_in_process(Behaviour(ttft_ms=20, itl_ms=10, tokens=4)) as url:
        options = BenchOptions(target=TargetOptions(url=url), workers="auto",
                               workload=WorkloadConfig(dataset="synthetic", num_requests=6,
                                                       input_tokens="8", output_tokens="4",
                                                       concurrency=2, seed=1))
        result = bench(options)
    assert len(result.records) == 6
    assert result.run.workers == 1 and result.run.scaling == []
    assert result.to_json()["client"]["scaling"] == []
    assert result.to_json()["client"]["kernel_receipts"] == (1.0 if KERNEL_STAMPS else 0.0)


@pytest.mark.parametrize("value", [0, -2, "many"])
def test_workers_must_be_a_count_or_auto(value: object) -> None:
    workload = WorkloadConfig(dataset="synthetic", num_requests=4, input_tokens="8",
                              output_tokens="4", concurrency=1)
    with pytest.raises(ValueError, match="workers"):
        BenchOptions(workers=value, workload=workload)
