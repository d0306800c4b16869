"""Run one workload from one or several client processes, with Ctrl-C keeping what was measured.

Several processes share nothing but the schedule and the start instant. Linux's
``CLOCK_MONOTONIC`` (``time.monotonic_ns``) is one clock for every process on the machine, so
records from different workers are directly comparable. Closed-loop slots are divided between
workers (worker *i* gets every *W*-th request and its share of the slots); open-loop arrivals are
dealt round-robin, each keeping its offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

from tunegate.loadgen.client import ClientConfig, TokenCounter
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import ProgressCallback, RunResult, run_workload_async
from tunegate.workload.spec import Workload

__all__ = ["run_workload", "split_workload"]

CounterFactory = Callable[[], TokenCounter | None]
"""Builds the token counter inside the process that uses it (tokenizers are not picklable)."""

_START_MARGIN_NS = 100_000_000  # workers start together 100 ms after the last one is ready


def split_workload(workload: Workload, workers: int) -> list[Workload]:
    """Deal a workload's requests to ``workers`` sub-workloads (round-robin, offsets kept)."""
    schedule = workload.schedule
    parts: list[Workload] = []
    for i in range(workers):
        requests = workload.requests[i::workers]
        offsets = schedule.offsets_s[i::workers] if schedule.offsets_s is not None else None
        cap = schedule.max_concurrency
        share = None if cap is None else cap // workers + (1 if i < cap % workers else 0)
        parts.append(
            Workload(
                requests=requests,
                schedule=replace(schedule, offsets_s=offsets, max_concurrency=share),
                description=workload.description,
            )
        )
    return parts


def _install_sigint(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)


async def _run_here(
    workload: Workload,
    config: ClientConfig,
    count_tokens: TokenCounter | None,
    progress: ProgressCallback | None,
    duration_s: float | None,
    start_at_ns: int | None = None,
) -> RunResult:
    stop = asyncio.Event()
    _install_sigint(stop)
    return await run_workload_async(
        workload,
        config,
        count_tokens=count_tokens,
        progress=progress,
        duration_s=duration_s,
        stop=stop,
        start_at_ns=start_at_ns,
    )


def _worker_main(
    worker_id: int,
    workload: Workload,
    config: ClientConfig,
    counter_factory: CounterFactory | None,
    duration_s: float | None,
    outbox: Any,
    go: MpEvent,
    start_at: Any,
) -> None:
    """Body of one worker process: wait for the common start, run, send records home."""
    count_tokens = counter_factory() if counter_factory is not None else None
    outbox.put(("ready", worker_id, None))
    go.wait()

    def progress(record: RequestRecord) -> None:
        outbox.put(("progress", worker_id, record.to_dict()))

    result = asyncio.run(
        _run_here(workload, config, count_tokens, progress, duration_s, int(start_at.value))
    )
    outbox.put(("done", worker_id, result))


def run_workload(
    workload: Workload,
    config: ClientConfig,
    *,
    workers: int = 1,
    counter_factory: CounterFactory | None = None,
    progress: ProgressCallback | None = None,
    duration_s: float | None = None,
) -> RunResult:
    """Run a workload to completion (or Ctrl-C) and return every record measured.

    Args:
        workload: What to send and when.
        config: The server and request options.
        workers: Client processes; more than one only when one process cannot keep up.
        counter_factory: Builds a real-tokenizer counter in each process (or ``None``).
        progress: Called in this process with each finished record.
        duration_s: Stop sending new requests after this many seconds.
    """
    if workers <= 1 or len(workload.requests) < 2:
        count_tokens = counter_factory() if counter_factory is not None else None
        return asyncio.run(_run_here(workload, config, count_tokens, progress, duration_s))
    return _run_in_processes(workload, config, workers, counter_factory, progress, duration_s)


def _run_in_processes(
    workload: Workload,
    config: ClientConfig,
    workers: int,
    counter_factory: CounterFactory | None,
    progress: ProgressCallback | None,
    duration_s: float | None,
) -> RunResult:
    cap = workload.schedule.max_concurrency
    if cap is not None:
        workers = min(workers, cap)
    workers = min(workers, len(workload.requests))
    ctx = mp.get_context("spawn")
    outbox = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("q", 0)
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(i, part, config, counter_factory, duration_s, outbox, go, start_at),
            daemon=True,
        )
        for i, part in enumerate(split_workload(workload, workers))
    ]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # workers handle Ctrl-C themselves
    for proc in procs:
        proc.start()
    signal.signal(signal.SIGINT, previous)
    results: dict[int, RunResult] = {}
    ready = 0
    interrupted = False
    try:
        while len(results) < workers:
            try:
                kind, worker_id, payload = outbox.get(timeout=0.5)
            except queue.Empty:
                if any(not p.is_alive() for p in procs if p.exitcode not in (None, 0)):
                    break
                continue
            except KeyboardInterrupt:
                interrupted = True
                continue
            if kind == "ready":
                ready += 1
                if ready == workers:
                    start_at.value = time.monotonic_ns() + _START_MARGIN_NS
                    go.set()
            elif kind == "progress" and progress is not None:
                progress(RequestRecord.from_dict(payload))
            elif kind == "done":
                results[worker_id] = payload
    finally:
        for proc in procs:
            proc.join(timeout=5)
    return _merge(list(results.values()), workers, interrupted, len(workload.requests))


def _merge(parts: list[RunResult], workers: int, interrupted: bool, total: int) -> RunResult:
    records = sorted((r for part in parts for r in part.records), key=lambda r: r.index)
    lags = [part.lag for part in parts]
    return RunResult(
        records=records,
        started_ns=min((p.started_ns for p in parts), default=0),
        ended_ns=max((p.ended_ns for p in parts), default=0),
        lag=LagSummary.worst(lags),
        interrupted=interrupted or any(p.interrupted for p in parts),
        workers=workers,
        not_sent=total - len(records),
        worker_lags=lags,
    )


