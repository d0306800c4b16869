"""Noise streams per repeat and config, drift across runs, start-failure retries."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.errors import ServerError
from tunegate.servers.simulator import FaultConfig, run_virtual
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.seed_table import article_table


def _throughput(run) -> float:  # type: ignore[no-untyped-def]
    return article_table(run.records)["output_throughput"]


def test_repeats_of_one_config_draw_different_noise(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, input_tokens=100, output_tokens=32, concurrency=8)
    runs = [_throughput(run_virtual(wl, "h100-8b", seed=4, repeat=r)) for r in range(6)]
    assert len(set(runs)) == 6
    again = _throughput(run_virtual(wl, "h100-8b", seed=4, repeat=2))
    assert again == runs[2]  # same (seed, repeat): same draw


def test_two_configs_do_not_share_one_noise_factor(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, input_tokens=100, output_tokens=32, concurrency=8)
    ratios: dict[int, list[float]] = {16: [], 32: []}
    for mns, values in ratios.items():
        truth = _throughput(run_virtual(wl, "h100-8b", {"max_num_seqs": mns}, noise=False))
        for seed in range(12):
            run = run_virtual(wl, "h100-8b", {"max_num_seqs": mns}, seed=seed)
            values.append(_throughput(run) / truth)
    # With one shared noise stream the two configs' noise factors move in lock-step.
    assert np.corrcoef(ratios[16], ratios[32])[0, 1] < 0.8


def test_noise_free_ignores_seed_repeat_and_machine_age(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=16)
    base = run_virtual(wl, "seed", noise=False)
    other = run_virtual(wl, "seed", noise=False, seed=3, repeat=5, elapsed_before_s=36000.0)
    assert [r.to_dict() for r in other.records] == [r.to_dict() for r in base.records]


def test_drift_accumulates_with_machine_age_across_runs(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, input_tokens=100, output_tokens=32, concurrency=8)
    young = run_virtual(wl, "h100-8b", seed=1)
    old = run_virtual(wl, "h100-8b", seed=1, elapsed_before_s=10 * 3600.0)
    # Same draws, 10 h older machine: the default drift (1 %/h) makes it 10 % slower.
    assert young.duration_ns * 1.1 == pytest.approx(old.duration_ns, rel=2e-3)
    assert old.elapsed_before_s == 36000.0
    assert old.elapsed_after_s == pytest.approx(36000.0 + old.duration_ns / 1e9)


def test_a_sequence_of_runs_shows_a_steady_trend(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, input_tokens=100, output_tokens=32, concurrency=8)
    age, ages, values = 0.0, [], []
    for repeat in range(12):
        run = run_virtual(wl, "h100-8b", seed=2, repeat=repeat, elapsed_before_s=age)
        ages.append(age / 3600.0)
        values.append(np.log(_throughput(run)))
        age = run.elapsed_after_s + 3600.0  # an hour of other work between benchmarks
    slope = np.polyfit(ages, values, 1)[0]  # log-throughput per hour
    assert slope == pytest.approx(-0.01, abs=0.004)


def test_start_failure_retries_draw_afresh() -> None:
    faults = FaultConfig(start_failure_prob=0.5)
    outcomes = []
    for attempt in range(20):
        try:
            Engine("fast", seed=3, faults=faults, start_attempt=attempt)
            outcomes.append(True)
        except ServerError as exc:
            assert f"attempt {attempt}" in str(exc)
            outcomes.append(False)
    assert 3 < sum(outcomes) < 17
    # Deterministic per (seed, attempt).
    first_ok = outcomes.index(True)
    Engine("fast", seed=3, faults=faults, start_attempt=first_ok)


def test_an_in_process_retry_loop_eventually_starts(workload) -> None:  # type: ignore[no-untyped-def]
    faults = FaultConfig(start_failure_prob=0.7)
    for _ in range(60):  # 0.7**60 ~ 5e-10: a fixed draw per seed would fail forever
        try:
            run_virtual(workload(n=1), "fast", seed=11, faults=faults)
            break
        except ServerError:
            continue
    else:
        pytest.fail("every retry failed: the start-failure draw does not change per attempt")
