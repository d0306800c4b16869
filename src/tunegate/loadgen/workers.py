"""Run one workload from one or several client processes, keeping what was measured on a stop.

Several processes share nothing but the schedule, the start instant and a stop flag. Linux's
``CLOCK_MONOTONIC`` (``time.monotonic_ns``) is one clock for every process on the machine, so
records from different workers are directly comparable.

How work is divided: closed-loop slots are dealt to workers as evenly as possible and request
``j`` goes to the worker that owns slot ``j mod C``, so each worker's share of requests matches
its share of slots and the offered concurrency stays ``C`` until the end. Open-loop arrivals
are dealt round-robin, each keeping its offset.

Stopping: SIGINT or SIGTERM to this process (or Ctrl-C to the whole group) sets a shared stop
flag; every worker stops sending, ends its in-flight requests as ``truncated`` and sends its
records home. A worker that crashes reports its error; the others are stopped, their records are
kept, and the result lists the error (``worker_errors``).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import signal
import traceback
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.synchronize import Event as MpEvent
from typing import Any, Literal

from tunegate.loadgen.autoscale import run_autoscaled
from tunegate.loadgen.client import ClientConfig, PreparedRequest, TokenCounter
from tunegate.loadgen.pool import run_pool
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import (
    ProgressCallback,
    RunResult,
    prepare_ahead,
    run_workload_async,
)
from tunegate.loadgen.stopping import signals_set
from tunegate.workload.spec import Workload

__all__ = ["run_workload", "split_workload"]

CounterFactory = Callable[[], TokenCounter | None]
"""Builds the token counter inside the process that uses it (tokenizers are not picklable)."""



def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def split_workload(workload: Workload, workers: int) -> list[Workload]:
    """Deal a workload to ``workers`` sub-workloads (see the module docstring for the rule)."""
    schedule = workload.schedule
    cap = schedule.max_concurrency
    slot_shares = _shares(cap, workers) if cap is not None else None
    if schedule.offsets_s is None and slot_shares is not None:
        owner = [w for w, share in enumerate(slot_shares) for _ in range(share)]
        assignment = [owner[j % len(owner)] for j in range(len(workload.requests))]
    else:
        assignment = [j % workers for j in range(len(workload.requests))]
    parts: list[Workload] = []
    for i in range(workers):
        mine = [j for j, w in enumerate(assignment) if w == i]
        offsets = (tuple(schedule.offsets_s[j] for j in mine)
                   if schedule.offsets_s is not None else None)
        parts.append(Workload(
            requests=tuple(workload.requests[j] for j in mine),
            schedule=replace(schedule, offsets_s=offsets,
                             max_concurrency=slot_shares[i] if slot_shares else None),
            description=workload.description,
        ))
    return parts


async def _run_here(
    workload: Workload,
    config: ClientConfig,
    count_tokens: TokenCounter | None,
    progress: ProgressCallback | None,
    duration_s: float | None,
    start_at_ns: int | None = None,
    shared_stop: MpEvent | None = None,
    prepared: dict[int, PreparedRequest] | None = None,
) -> RunResult:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    watcher: asyncio.Task[None] | None = None
    if shared_stop is not None:
        async def watch() -> None:
            while not shared_stop.is_set():
                await asyncio.sleep(0.05)
            stop.set()
        watcher = asyncio.create_task(watch())
    def request_stop() -> None:
        loop.call_soon_threadsafe(stop.set)

    with signals_set(request_stop):
        try:
            return await run_workload_async(
                workload, config, count_tokens=count_tokens, progress=progress,
                duration_s=duration_s, stop=stop, start_at_ns=start_at_ns, prepared=prepared,
            )
        finally:
            if watcher is not None:
                watcher.cancel()


def _worker_main(
    worker_id: int,
    workload: Workload,
    config: ClientConfig,
    counter_factory: CounterFactory | None,
    duration_s: float | None,
    outbox: Any,
    go: MpEvent,
    stop_all: MpEvent,
    start_at: Any,
) -> None:
    """Body of one worker process: wait for the common start, run, send records home."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; stop_all tells us
    try:
        count_tokens = counter_factory() if counter_factory is not None else None
        prepared = prepare_ahead(workload, config)  # before the common start, not after it
        outbox.put(("ready", worker_id, None))
        go.wait()

        def progress(record: RequestRecord) -> None:
            outbox.put(("progress", worker_id, record.to_dict()))

        result = asyncio.run(_run_here(workload, config, count_tokens, progress, duration_s,
                                       int(start_at.value), stop_all, prepared))
        outbox.put(("done", worker_id, result))
    except BaseException as exc:  # reported to the parent, which keeps the others' records
        outbox.put(("error", worker_id, f"{type(exc).__name__}: {exc}\n"
                                        f"{traceback.format_exc(limit=5)}"))


def run_workload(
    workload: Workload,
    config: ClientConfig,
    *,
    workers: int | Literal["auto"] = 1,
    counter_factory: CounterFactory | None = None,
    progress: ProgressCallback | None = None,
    duration_s: float | None = None,
) -> RunResult:
    """Run a workload to completion (or a stop signal) and return every record measured.

    Args:
        workload: What to send and when.
        config: The server and request options.
        workers: Client processes; more than one only when one process cannot keep up.
            ``"auto"`` starts with one and adds processes while the run goes on, as its own
            CPU and event-loop lag ask for them (:mod:`tunegate.loadgen.autoscale`).
        counter_factory: Builds a real-tokenizer counter in each process (or ``None``).
        progress: Called in this process with each finished record.
        duration_s: Stop sending new requests after this many seconds.
    """
    if workers == "auto":
        return run_autoscaled(workload, config, counter_factory=counter_factory,
                              progress=progress, duration_s=duration_s)
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
    workers = min(workers, cap or workers, len(workload.requests))
    ctx = mp.get_context("spawn")
    outbox = ctx.Queue()
    go, stop_all = ctx.Event(), ctx.Event()
    start_at = ctx.Value("q", 0)
    procs = [
        ctx.Process(target=_worker_main, daemon=True,
                    args=(i, part, config, counter_factory, duration_s, outbox, go, stop_all,
                          start_at))
        for i, part in enumerate(split_workload(workload, workers))
    ]
    outcome = run_pool(procs, outbox, go=go, stop_all=stop_all, start_at=start_at,
                       progress=progress)
    return outcome.merged(sorted(outcome.results), workers, len(workload.requests))
