"""``workers="auto"``: when the supervisor adds a worker, and how slots change hands."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from tunegate.loadgen.autoscale import ScalePolicy, _Shared, _Supervisor


def _supervisor(workers: int, total: int | None, **policy: float) -> _Supervisor:
    shared = _Shared(mp.get_context("spawn"), workers)
    return _Supervisor(shared, workers, total, ScalePolicy(max_workers=workers, **policy))


def test_one_worker_holds_every_slot_at_the_start() -> None:
    supervisor = _supervisor(4, total=64)
    assert list(supervisor.shared.targets) == [64, 0, 0, 0]
    assert supervisor.active == 1


def test_one_hot_window_is_not_a_trend() -> None:
    supervisor = _supervisor(2, total=8)
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.1)
    supervisor.observe(0, busy=0.1, lag_p99_ms=0.1)
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.1)
    assert supervisor.active == 1 and supervisor.scaling == []


@pytest.mark.parametrize(("busy", "lag_ms"), [(0.9, 0.1), (0.1, 3.0)])
def test_two_hot_windows_add_a_worker_and_say_why(busy: float, lag_ms: float) -> None:
    supervisor = _supervisor(2, total=8)
    supervisor.observe(0, busy=busy, lag_p99_ms=lag_ms)
    supervisor.observe(0, busy=busy, lag_p99_ms=lag_ms)
    assert supervisor.active == 2
    [line] = supervisor.scaling
    assert "2 workers (worker 0:" in line and f"{lag_ms:.2f} ms" in line


def test_slots_change_hands_only_as_they_are_freed() -> None:
    supervisor = _supervisor(2, total=8)
    shared = supervisor.shared
    shared.running[0] = 8  # every slot is busy in worker 0
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.0)
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.0)
    assert list(shared.targets) == [4, 0], "worker 0 retires 4 slots; none is free yet"
    shared.running[0] = 6  # two slots retired after their requests ended
    supervisor.grant()
    assert list(shared.targets) == [4, 2]
    shared.running[0] = 4
    supervisor.grant()
    assert list(shared.targets) == [4, 4]


def test_never_more_slots_than_the_total_while_they_move() -> None:
    supervisor = _supervisor(3, total=10)
    shared = supervisor.shared
    for running in (10, 9, 7, 6, 5, 4, 3):
        shared.running[0] = running
        for _ in range(2):
            supervisor.observe(0, busy=0.9, lag_p99_ms=0.0)
        supervisor.grant()
        held = sum(max(shared.targets[w], shared.running[w]) for w in range(3))
        assert held <= 10


def test_workers_are_bounded_by_the_policy() -> None:
    supervisor = _supervisor(2, total=8)
    for _ in range(10):
        supervisor.observe(0, busy=1.0, lag_p99_ms=9.0)
        supervisor.observe(1, busy=1.0, lag_p99_ms=9.0)
    assert supervisor.active == 2 and len(supervisor.scaling) == 1


def test_an_idle_worker_is_not_watched() -> None:
    supervisor = _supervisor(3, total=8)
    for _ in range(3):
        supervisor.observe(2, busy=1.0, lag_p99_ms=9.0)  # not active: its figures mean nothing
    assert supervisor.active == 1


def test_uncapped_open_loop_switches_workers_on() -> None:
    supervisor = _supervisor(3, total=None)
    assert list(supervisor.shared.targets) == [1, 0, 0]
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.0)
    supervisor.observe(0, busy=0.9, lag_p99_ms=0.0)
    assert list(supervisor.shared.targets) == [1, 1, 0]


def test_claims_hand_out_each_request_once() -> None:
    shared = _Shared(mp.get_context("spawn"), 1)
    claims = [shared.claim(3) for _ in range(5)]
    assert claims == [0, 1, 2, None, None]


def test_large_runs_start_with_one_worker_per_128_streams() -> None:
    policy = ScalePolicy(max_workers=4)
    assert [policy.initial_workers(n) for n in (1, 128, 129, 256, 4096, None)] == [
        1, 1, 2, 2, 4, 1]
    supervisor = _supervisor(4, total=256)
    assert supervisor.active == 2 and list(supervisor.shared.targets) == [128, 128, 0, 0]
    assert supervisor.scaling == ["0.0 s: 2 workers from the start for 256 concurrent streams"]
