"""The client knows when it is the bottleneck; work is split over processes faithfully."""

from __future__ import annotations

import asyncio
import signal
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tunegate.loadgen.lag import LagMonitor, LagSummary, percentile_99
from tunegate.loadgen.stopping import signals_set
from tunegate.loadgen.workers import split_workload
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload


def test_lag_monitor_sees_a_blocked_event_loop() -> None:
    async def scenario() -> tuple[LagSummary, LagSummary]:
        idle = LagMonitor(interval_s=0.001)
        idle.start()
        await asyncio.sleep(0.05)
        quiet = idle.stop()
        busy = LagMonitor(interval_s=0.001)
        busy.start()
        for _ in range(10):
            await asyncio.sleep(0.002)
            time.sleep(0.01)  # the loop is blocked: a queued callback waits ~10 ms
        return quiet, busy.stop()

    quiet, busy = asyncio.run(scenario())
    assert quiet.samples > 10
    assert quiet.p50_ms < 1.0
    assert busy.max_ms >= 5.0


def test_worst_merge_takes_each_maximum() -> None:
    a = LagSummary(10, 0.1, 0.5, 2.0, 0.0, 0.3)
    b = LagSummary(20, 0.2, 0.4, 9.0, 0.1, 0.2)
    merged = LagSummary.worst([a, b])
    assert (merged.samples, merged.p99_ms, merged.max_ms, merged.cpu_busy_fraction) == (
        30, 0.5, 9.0, 0.3)


def test_the_merged_kernel_share_is_the_lowest_known_one() -> None:
    def share(kernel_receipts: float | None) -> LagSummary:
        return LagSummary(10, 0.1, 0.5, 2.0, 0.0, 0.3, kernel_receipts=kernel_receipts)

    assert LagSummary.worst([share(1.0), share(0.75), share(None)]).kernel_receipts == 0.75
    assert LagSummary.worst([share(None), share(None)]).kernel_receipts is None


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=300))
def test_the_window_percentile_is_numpys(values: list[int]) -> None:
    assert percentile_99(values) == pytest.approx(float(np.percentile(values, 99)), rel=1e-12)


def _workload(n: int, offsets: bool, cap: int | None) -> Workload:
    requests = tuple(RequestSpec(index=i, prompt=f"p{i}", max_tokens=4) for i in range(n))
    schedule = ArrivalSchedule(
        offsets_s=tuple(0.1 * i for i in range(n)) if offsets else None,
        max_concurrency=cap, kind="poisson" if offsets else "closed")
    return Workload(requests, schedule)


def test_split_keeps_every_request_once_with_its_offset() -> None:
    parts = split_workload(_workload(10, offsets=True, cap=None), 3)
    indices = sorted(r.index for p in parts for r in p.requests)
    assert indices == list(range(10))
    for part in parts:
        assert part.schedule.offsets_s is not None
        for request, offset in zip(part.requests, part.schedule.offsets_s, strict=True):
            assert offset == 0.1 * request.index


def test_split_divides_closed_loop_slots() -> None:
    parts = split_workload(_workload(10, offsets=False, cap=5), 2)
    assert [p.schedule.max_concurrency for p in parts] == [3, 2]


def test_a_run_routes_stop_signals_but_keeps_an_ignored_one_ignored() -> None:
    """Ctrl-C stops a benchmark gracefully; a background job (SIGINT ignored by its shell)
    keeps ignoring it."""
    stops: list[int] = []
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with signals_set(lambda: stops.append(1)):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler)
            handler(signal.SIGTERM, None)
        assert stops == [1]
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == saved[signal.SIGTERM]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
