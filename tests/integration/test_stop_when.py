"""``stop_when``: a benchmark stops sending once the caller has seen enough (a capacity probe
whose verdict is already certain), over HTTP from one process or several, and on the simulator:
nothing more is sent, and the requests in flight finish (unlike Ctrl-C, which truncates them),
so every request a stopped probe measured is whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Literal

import pytest
from aiohttp import web

from tunegate.api import BenchOptions, TargetOptions, bench, capacity
from tunegate.capacity import CapacityPlan
from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.loadgen.workers import run_workload
from tunegate.metrics.slo_spec import parse_slo_specs
from tunegate.servers.loopback import Behaviour, build_app
from tunegate.workload import WorkloadConfig, build_workload

pytestmark = pytest.mark.integration

ServerFactory = Callable[[Behaviour], AbstractContextManager[str]]

REQUESTS = 400
STOP_AFTER = 20
# ~85 ms a request: 400 requests at 4 streams would take ~8 s; the stop comes after ~0.4 s.
SLOW = Behaviour(ttft_ms=5, itl_ms=10, tokens=8)


def _workload(**extra: object) -> WorkloadConfig:
    return WorkloadConfig.model_validate({"dataset": "synthetic", "num_requests": REQUESTS,
                                          "input_tokens": "fixed:8", "output_tokens": "fixed:8",
                                          "concurrency": 4, "seed": 1, **extra})


@pytest.mark.parametrize("workers", [1, 2, "auto"])
def test_http_bench_stops_sending_once_the_hook_says_so(
    loopback: ServerFactory, workers: int | Literal["auto"],
) -> None:
    seen: list[RequestRecord] = []
    with loopback(SLOW) as url:
        result = bench(BenchOptions(target=TargetOptions(url=url), workload=_workload(),
                                    workers=workers, server_metrics=False),
                       progress=seen.append, stop_when=lambda: len(seen) >= STOP_AFTER)
    run = result.run
    assert run.interrupted is False  # a stop the caller asked for, not Ctrl-C
    assert STOP_AFTER <= run.ended < REQUESTS // 4  # far fewer than the workload sent
    assert run.not_sent == REQUESTS - run.ended
    assert len(result.records) == run.ended == len(seen)
    assert sorted(r.index for r in seen) == [r.index for r in result.records]
    # The requests in flight when it stopped finished: every request sent completed.
    assert all(r.outcome is Outcome.COMPLETE for r in result.records)
    assert result.summary["completed"] == run.ended


def test_http_bench_without_a_hook_sends_everything(loopback: ServerFactory) -> None:
    with loopback(Behaviour(ttft_ms=1, itl_ms=1, tokens=8)) as url:
        result = bench(BenchOptions(target=TargetOptions(url=url),
                                    workload=_workload(num_requests=40), server_metrics=False),
                       stop_when=lambda: False)
    assert result.run.interrupted is False
    assert result.run.ended == 40 and result.run.not_sent == 0
    assert result.summary["completed"] == 40


def test_simulated_bench_stops_and_counts_the_requests_never_sent() -> None:
    seen: list[RequestRecord] = []
    result = bench(BenchOptions(workload=_workload(concurrency=8), sim="fast"),
                   progress=seen.append, stop_when=lambda: len(seen) >= STOP_AFTER)
    run = result.run
    assert STOP_AFTER <= run.ended < REQUESTS // 4
    assert run.not_sent == REQUESTS - run.ended
    assert len(result.records) == run.ended == len(seen)
    # The simulator lets the requests in flight finish: every one sent completed.
    assert all(r.outcome is Outcome.COMPLETE for r in result.records)
    assert result.summary["completed"] == run.ended


@pytest.mark.parametrize("workers", [1, 2, "auto"])
def test_the_hook_stops_sending_without_a_progress_callback(
    loopback: ServerFactory, workers: int | Literal["auto"],
) -> None:
    workload = build_workload(_workload(num_requests=60))
    asked = 0

    def stop() -> bool:
        nonlocal asked
        asked += 1
        return asked >= STOP_AFTER

    with loopback(SLOW) as url:
        result = run_workload(workload, ClientConfig(base_url=url, model="loopback"),
                              workers=workers, stop_when=stop)
    assert result.interrupted is False
    assert result.not_sent > 0 and result.ended + result.not_sent == 60


def test_a_stopped_http_probe_does_not_fail_a_target_the_server_met(
        loopback: ServerFactory) -> None:
    # TTFT 40 ms misses ttft_p99 <= 10 ms on every request (the probe stops after its first
    # ten); TPOT 2 ms meets tpot_mean <= 1000 ms by far.
    plan = CapacityPlan(by="concurrency", slos=parse_slo_specs(["ttft_p99:10", "tpot_mean:1000"]),
                        start=4, min_load=2, max_load=8, probe_requests=40, max_probes=2)
    with loopback(Behaviour(ttft_ms=40, itl_ms=2, tokens=8)) as url:
        options = BenchOptions(target=TargetOptions(url=url), server_metrics=False,
                               workload=_workload(num_requests=8, concurrency=1))
        result = capacity(options, plan)
    assert [p.stop for p in result.probes] == ["certain_failure"] * 2
    for probe in result.probes:
        assert probe.verdict == "fail" and probe.margins["ttft_p99"] == math.inf
        assert math.isfinite(probe.margins["tpot_mean"]) and probe.margins["tpot_mean"] < 0
        assert probe.stats["failed"] == 0


@contextlib.contextmanager
def _queueing_server(hold_s: float) -> Iterator[str]:
    """A loopback server that holds each request ``hold_s`` before answering it, without
    response headers meanwhile (as llama-server holds the requests queued for a slot), then
    streams its answer."""
    @web.middleware
    async def hold(request: web.Request,
                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                   ) -> web.StreamResponse:
        await asyncio.sleep(hold_s)
        return await handler(request)

    app = build_app(Behaviour(ttft_ms=0, itl_ms=2, tokens=8))
    app.middlewares.append(hold)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    ready = threading.Event()
    port: list[int] = []

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        port.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_stopped_probe_is_not_taken_for_a_dead_server() -> None:
    # Every request waits 100 ms without headers: ttft_p99 <= 10 ms fails for sure after the
    # probe's first ten; the eight in flight then are all still waiting.
    plan = CapacityPlan(by="concurrency", slos=parse_slo_specs(["ttft_p99:10"]), start=8,
                        min_load=4, max_load=8, probe_requests=40, max_probes=2)
    with _queueing_server(hold_s=0.1) as url:
        options = BenchOptions(target=TargetOptions(url=url, model="loopback"),
                               server_metrics=False,
                               workload=_workload(num_requests=8, concurrency=1))
        result = capacity(options, plan)
    assert len(result.probes) == 2 and result.status != "server_died"
    for probe in result.probes:
        assert probe.verdict == "fail"
        assert probe.stop == "certain_failure", (probe.load, probe.stop)
