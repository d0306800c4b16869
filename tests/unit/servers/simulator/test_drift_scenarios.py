"""Drift scenarios: a known change at a known machine age, and none where none is promised.

Every number is measured on bench's default workload (synthetic, 128-token prompts, 128 output
tokens, closed loop at concurrency 16) in virtual time; machine age is passed to
``run_virtual`` as ``elapsed_before_s`` or accumulated by ``VirtualSimulator`` over its runs.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import cache

import pytest

from tunegate.servers.adapters import VirtualSimulator
from tunegate.servers.simulator import get_scenario, list_scenarios, run_virtual
from tunegate.servers.simulator.cli import main
from tunegate.servers.simulator.drift import DriftConfig
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.scenarios import (
    DRIFT_LEAK_PREEMPTION_AGE_S,
    DRIFT_LEAK_START_S,
    DRIFT_STEP_AT_S,
)
from tunegate.servers.simulator.sequence import Seq
from tunegate.servers.simulator.virtual import VirtualRun
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload

DRIFT = ("drift-none", "drift-step", "drift-leak")
SIGMA = 0.02  # the drift scenarios' run-to-run noise (NoiseConfig.sigma)
PREEMPTIONS = "vllm:num_preemptions_total"
KV_USAGE = "vllm:kv_cache_usage_perc"


@cache
def bench_default(num_requests: int = 200) -> Workload:
    """Bench's default workload: synthetic 128/128 tokens, closed loop at concurrency 16."""
    config = WorkloadConfig(dataset="synthetic", num_requests=num_requests, input_tokens="128",
                            output_tokens="128", concurrency=16)
    return build_workload(config)


def throughput(run: VirtualRun) -> float:
    """Output tokens per second of virtual time."""
    return sum(r.output_tokens or 0 for r in run.records) / (run.duration_ns / 1e9)


def noisy_mean(scenario: str, ages: list[float], seed: int = 7) -> float:
    """Mean output throughput of runs at ``ages``, each its own noise draw (``repeat``).

    Draws depend on ``(seed, repeat)``, not on age: compare two means under different seeds.
    """
    return statistics.fmean(
        throughput(run_virtual(bench_default(), scenario, seed=seed, repeat=i,
                               elapsed_before_s=age))
        for i, age in enumerate(ages)
    )


def within_noise(n: int) -> float:
    """Four standard deviations of the ratio of two means of ``n`` independent runs."""
    return 4 * SIGMA * math.sqrt(2 / n)


# -- the names -------------------------------------------------------------------------------


def test_drift_scenarios_are_listed_and_served_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(DRIFT) <= {s.name for s in list_scenarios()}
    assert main(["scenarios", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "3600 s" in rows["drift-step"]["description"]
    assert "1800 s" in rows["drift-leak"]["description"]
    assert f"{DRIFT_LEAK_PREEMPTION_AGE_S:g} s" in rows["drift-leak"]["description"]
    for name in DRIFT:
        assert get_scenario(name).name == name
        # The name is accepted: the start fails on the bad flag, not on the scenario.
        assert main(["serve", "--scenario", name, "--block-size", "7", "--port", "0"]) == 2
        err = capsys.readouterr().err
        assert "block_size=7 is invalid" in err and "scenario" not in err


def test_only_the_drift_scenarios_change_with_machine_age() -> None:
    for s in list_scenarios():
        assert s.drift.active == (s.name in ("drift-step", "drift-leak")), s.name
        if s.name in DRIFT:
            assert s.noise.drift_per_hour == 0.0  # the named change is the only one


# -- drift-none ------------------------------------------------------------------------------


def test_drift_none_is_flat_over_24_hours() -> None:
    young = run_virtual(bench_default(), "drift-none", noise=False, elapsed_before_s=0.0)
    old = run_virtual(bench_default(), "drift-none", noise=False, elapsed_before_s=86400.0)
    assert throughput(young) == throughput(old)
    assert round(throughput(young)) == 1776
    n = 8
    day_one = noisy_mean("drift-none", [450.0 * i for i in range(n)])
    day_two = noisy_mean("drift-none", [86400.0 + 450.0 * i for i in range(n)], seed=8)
    assert abs(day_two / day_one - 1) < within_noise(n)


# -- drift-step ------------------------------------------------------------------------------


def test_drift_step_is_exactly_minus_8_percent_from_3600_s_noise_free() -> None:
    def at(age: float) -> float:
        return throughput(run_virtual(bench_default(), "drift-step", noise=False,
                                      elapsed_before_s=age))

    nominal = at(0.0)
    assert at(DRIFT_STEP_AT_S - 20.0) == nominal  # the run ends before the onset
    assert at(DRIFT_STEP_AT_S) / nominal == pytest.approx(0.92, abs=5e-4)
    assert at(86400.0) == at(DRIFT_STEP_AT_S)
    # A run that straddles the onset is slowed from the onset on, not before it.
    assert at(DRIFT_STEP_AT_S) < at(DRIFT_STEP_AT_S - 5.0) < nominal


def test_drift_step_with_noise_before_and_after_the_onset() -> None:
    n = 8
    early = noisy_mean("drift-step", [100.0 + 200.0 * i for i in range(n)])
    late_before = noisy_mean("drift-step", [1800.0 + 200.0 * i for i in range(n)], seed=8)
    after = noisy_mean("drift-step", [3700.0 + 200.0 * i for i in range(n)], seed=9)
    assert abs(late_before / early - 1) < within_noise(n)  # nothing before the onset
    assert abs(after / early - 0.92) < within_noise(n)


def test_virtual_simulator_sees_the_step_as_its_machine_ages() -> None:
    sim = VirtualSimulator("drift-step", seed=3)
    handle = sim.start(sim.default_config())
    sim.elapsed_s = DRIFT_STEP_AT_S - 120.0  # resume an aged machine: 8 runs before the onset
    before: list[float] = []
    after: list[float] = []
    for i in range(16):
        age = sim.elapsed_s
        run = sim.measure(handle, bench_default(), repeat=i)
        assert sim.elapsed_s == pytest.approx(age + run.duration_ns / 1e9)
        if sim.elapsed_s <= DRIFT_STEP_AT_S:
            before.append(throughput(run))
        elif age >= DRIFT_STEP_AT_S:
            after.append(throughput(run))
    assert len(before) >= 6 and len(after) >= 6
    n = min(len(before), len(after))
    assert abs(statistics.fmean(after) / statistics.fmean(before) - 0.92) < within_noise(n)


# -- drift-leak ------------------------------------------------------------------------------


def test_drift_leak_kv_usage_climbs_with_machine_age() -> None:
    ages = [0.0, DRIFT_LEAK_START_S - 20.0, 2700.0, 3600.0, 4500.0, 5300.0]
    runs = [run_virtual(bench_default(), "drift-leak", noise=False, elapsed_before_s=a)
            for a in ages]
    # The gauge after the run: the leak's share of the pool (the workload has drained).
    usage = [r.server_metrics.gauges[KV_USAGE] for r in runs]
    assert usage[0] == usage[1] == 0.0
    assert usage == sorted(usage) and len(set(usage[1:])) == len(usage) - 1
    for run, age in zip(runs[2:], ages[2:], strict=True):
        end_age = run.elapsed_after_s
        leaked_share = (end_age - DRIFT_LEAK_START_S) / 3600.0
        assert run.server_metrics.gauges[KV_USAGE] == pytest.approx(leaked_share, abs=2e-3), age
        assert run.server_metrics.gauges["vllm:gpu_cache_usage_perc"] == (
            run.server_metrics.gauges[KV_USAGE])
        assert run.server_metrics.counters[PREEMPTIONS] == 0
        assert throughput(run) == throughput(runs[0])  # a leak costs nothing until it bites
    assert f'vllm:kv_cache_usage_perc{{model_name="{runs[-1].engine_info["model"]}"}} ' in (
        runs[-1].server_metrics.render())


@pytest.mark.parametrize(("seed", "noise"), [(0, False), (1, True), (2, True)])
def test_drift_leak_preemptions_begin_at_the_documented_age(seed: int, noise: bool) -> None:
    sim = VirtualSimulator("drift-leak", seed=seed, noise=noise)
    handle = sim.start(sim.default_config())
    sim.elapsed_s = DRIFT_LEAK_PREEMPTION_AGE_S - 40.0
    workload = bench_default(48)  # three waves of 16: ~3.5 s of virtual time per run
    spans: list[tuple[float, float, float]] = []  # (start age, end age, preemptions)
    for i in range(24):
        age = sim.elapsed_s
        run = sim.measure(handle, workload, repeat=i)
        spans.append((age, sim.elapsed_s, run.server_metrics.counters[PREEMPTIONS]))
    onset = next(start for start, _, count in spans if count > 0)
    assert all(count == 0 for _, end, count in spans if end < DRIFT_LEAK_PREEMPTION_AGE_S - 1.0)
    assert all(count > 0 for start, _, count in spans if start > DRIFT_LEAK_PREEMPTION_AGE_S)
    assert DRIFT_LEAK_PREEMPTION_AGE_S - 5.0 < onset <= DRIFT_LEAK_PREEMPTION_AGE_S + 1.0


def test_drift_leak_after_saturation_preempts_steadily_and_keeps_serving() -> None:
    nominal = run_virtual(bench_default(), "drift-leak", noise=False)
    for age in (5400.0, 86400.0):
        run = run_virtual(bench_default(), "drift-leak", noise=False, elapsed_before_s=age)
        assert all(r.output_tokens == 128 for r in run.records)
        assert run.server_metrics.counters[PREEMPTIONS] > 100
        assert run.server_metrics.peaks[KV_USAGE] == 1.0
        assert throughput(run) < 0.7 * throughput(nominal)
    # The leak leaves one max_model_len sequence's worth of blocks: the longest request fits.
    longest = Workload((RequestSpec(0, "w " * 1900, 148, input_tokens=1900),),
                       ArrivalSchedule(None, 1))
    run = run_virtual(longest, "drift-leak", noise=False, elapsed_before_s=86400.0)
    assert run.records[0].output_tokens == 148


def test_leaked_blocks_count_as_used_though_no_sequence_holds_them() -> None:
    engine = Engine("drift-leak", noise=False, elapsed_before_s=DRIFT_LEAK_START_S + 1800.0)
    blocks = engine.blocks
    assert (blocks.num_blocks, blocks.leaked) == (25298, 0)  # taken at a step's start
    seq = Seq(0, 128, 4, 0)
    engine.add(seq)
    assert engine.step(0) is not None
    assert blocks.leaked == 25298 // 2  # half an hour at 100% of the pool per hour
    assert blocks.free == 25298 - blocks.leaked - seq.blocks
    assert blocks.usage == pytest.approx((blocks.leaked + seq.blocks) / 25298)
    assert engine.metrics.gauges[KV_USAGE] == blocks.usage
    # However old the machine, one max_model_len sequence's worth of blocks stays usable.
    assert engine.scenario.drift.leaked_blocks(1e9, 25298, 128) == 25298 - 128
    assert engine.scenario.drift.leak_saturation_age_s(25298, 128) == pytest.approx(5381.8, 0.1)
    assert get_scenario("drift-step").drift.leak_saturation_age_s(25298, 128) is None


def test_drift_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="step_throughput_factor"):
        DriftConfig(step_at_s=1.0, step_throughput_factor=0.0)
    with pytest.raises(ValueError, match="kv_leak_per_hour"):
        DriftConfig(kv_leak_start_s=0.0, kv_leak_per_hour=-0.1)
    with pytest.raises(ValueError, match="step_at_s"):
        DriftConfig(step_at_s=-1.0)
    assert not DriftConfig().active
    assert not DriftConfig(step_at_s=10.0).active  # a step of factor 1 changes nothing
