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
import threading
import traceback
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.synchronize import Event as MpEvent
from typing import Any, Literal

import numpy as np

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
from tunegate.workload import LazyRequests, Offsets
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
    positions = np.arange(len(workload.requests))
    if schedule.offsets_s is None and slot_shares is not None:
        owner = np.repeat(np.arange(workers), slot_shares)
        assignment = owner[positions % len(owner)]
    else:
        assignment = positions % workers
    offsets_s = schedule.offsets_s
    all_offsets = (None if offsets_s is None else offsets_s.values
                   if isinstance(offsets_s, Offsets) else np.asarray(offsets_s, np.float64))
    parts: list[Workload] = []
    for i in range(workers):
        mine = np.flatnonzero(assignment == i)
        # Views, not copies: a lazy workload's share pickles as its recipe and positions.
        requests = workload.requests
        share = (requests.select(mine) if isinstance(requests, LazyRequests)
                 else tuple(requests[int(j)] for j in mine))
        offsets = None if all_offsets is None else Offsets(all_offsets[mine])
        parts.append(Workload(
            requests=share,
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
    keep_records: bool = True,
    halt: Callable[[], bool] | None = None,
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
                keep_records=keep_records, halt=halt,
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
    halt_all: MpEvent,
    start_at: Any,
    send_records: bool,
    keep_records: bool,
) -> None:
    """Body of one worker process: wait for the common start, run, send records home: each as
    it ends with ``send_records``, all at the end with ``keep_records``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; stop_all tells us
    try:
        count_tokens = counter_factory() if counter_factory is not None else None
        prepared = prepare_ahead(workload, config)  # before the common start, not after it
        outbox.put(("ready", worker_id, None))
        go.wait()

        def progress(record: RequestRecord) -> None:
            outbox.put(("progress", worker_id, record.to_dict()))

        result = asyncio.run(_run_here(workload, config, count_tokens,
                                       progress if send_records else None, duration_s,
                                       int(start_at.value), stop_all, prepared,
                                       keep_records=keep_records, halt=halt_all.is_set))
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
    keep_records: bool = True,
    stop_when: Callable[[], bool] | None = None,
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
        keep_records: Keep every record in the result. Off, each record goes to ``progress``
            as it ends (from worker processes too) and is not kept: memory stays flat however
            many requests the workload holds.
        stop_when: Asked after each record ends; once it returns true nothing more is sent
            and the requests in flight finish (as at ``duration_s``; Ctrl-C, in contrast, ends
            them as ``truncated``). A capacity probe whose verdict is already certain stops
            this way, so the requests it measured are whole.
    """
    if workers == "auto":
        return run_autoscaled(workload, config, counter_factory=counter_factory,
                              progress=progress, duration_s=duration_s,
                              keep_records=keep_records, stop_when=stop_when)
    if workers <= 1 or len(workload.requests) < 2:
        count_tokens = counter_factory() if counter_factory is not None else None
        flag = threading.Event()
        return asyncio.run(_run_here(workload, config, count_tokens,
                                     _stopping(progress, stop_when, flag), duration_s,
                                     keep_records=keep_records,
                                     halt=flag.is_set if stop_when is not None else None))
    return _run_in_processes(workload, config, workers, counter_factory, progress, duration_s,
                             keep_records, stop_when)


def _stopping(progress: ProgressCallback | None, stop_when: Callable[[], bool] | None,
              flag: threading.Event) -> ProgressCallback | None:
    """``progress``, then ``flag`` set once ``stop_when`` says so (the run asks it before
    each send)."""
    if stop_when is None:
        return progress

    def each(record: RequestRecord) -> None:
        if progress is not None:
            progress(record)
        if stop_when():
            flag.set()

    return each


def _run_in_processes(
    workload: Workload,
    config: ClientConfig,
    workers: int,
    counter_factory: CounterFactory | None,
    progress: ProgressCallback | None,
    duration_s: float | None,
    keep_records: bool,
    stop_when: Callable[[], bool] | None = None,
) -> RunResult:
    cap = workload.schedule.max_concurrency
    workers = min(workers, cap or workers, len(workload.requests))
    ctx = mp.get_context("spawn")
    outbox = ctx.Queue()
    go, stop_all, halt_all = ctx.Event(), ctx.Event(), ctx.Event()
    start_at = ctx.Value("q", 0)
    procs = [
        ctx.Process(target=_worker_main, daemon=True,
                    args=(i, part, config, counter_factory, duration_s, outbox, go, stop_all,
                          halt_all, start_at,
                          progress is not None or not keep_records or stop_when is not None,
                          keep_records))
        for i, part in enumerate(split_workload(workload, workers))
    ]
    outcome = run_pool(procs, outbox, go=go, stop_all=stop_all, start_at=start_at,
                       progress=progress, stop_when=stop_when, halt_all=halt_all)
    return outcome.merged(sorted(outcome.results), workers, len(workload.requests))
