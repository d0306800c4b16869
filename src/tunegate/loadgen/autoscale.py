"""``workers="auto"``: as many client processes as the load needs, decided while it runs.

A Python client process has a ceiling: each content event costs it tens of microseconds, and
when its event loop is busy, every receipt time it takes is late by the queue in front of it.
How many processes a run needs depends on the server's speed, which is not known before the
run. So the run starts in one process per :attr:`ScalePolicy.streams_per_worker` streams and
is watched: every :attr:`ScalePolicy.window_s` each
active worker reports the share of a core it used and its event-loop lag p99 over that window
(:meth:`LagMonitor.window`). When one of them is over :attr:`ScalePolicy.busy_limit` or
:attr:`ScalePolicy.lag_p99_limit_ms` for :attr:`ScalePolicy.hot_windows` windows in a row, one
more worker takes a share of the load, up to the machine's cores. Workers are never removed:
a run that needed them once may need them again.

How the load moves without changing it: requests are claimed in index order from one shared
counter, so which process sends a request never changes what is sent or when. Closed loop: the
``C`` slots are shared out by per-worker targets; a worker whose target drops retires a slot
when that slot's request ends, and the new worker's target rises only by slots already freed,
so at most ``C`` requests are ever in flight. Open loop: each active worker's dispatcher claims
the next arrival and sends it at its offset from the common start; a concurrency cap is shared
out like slots.

All processes are started (and ready) before the common start instant, so adding one costs no
start-up time mid-run; the idle ones cost memory only.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

from tunegate.loadgen.client import ClientConfig, TokenCounter, send_request
from tunegate.loadgen.kernel_stamps import hold_kernel_stamps
from tunegate.loadgen.lag import LagMonitor
from tunegate.loadgen.pool import run_pool
from tunegate.loadgen.receipts import ReceiptTally, receipt_tally
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import (
    ProgressCallback,
    RunResult,
    client_session,
    sleep_or_stop,
    sleep_until,
)
from tunegate.workload.spec import Workload

__all__ = ["ScalePolicy", "available_cores", "run_autoscaled"]

_POLL_S = 0.02


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class ScalePolicy:
    """When the client adds a worker process.

    Attributes:
        busy_limit: CPU share of one core above which a worker counts as hot. At half a core
            the loop is idle half the time, so an event waits on average for less than the
            processing of one other event.
        lag_p99_limit_ms: Event-loop lag p99 above which a worker counts as hot (the gauge's
            ``client_saturated`` warns at 1 ms).
        window_s: Length of one observation window.
        hot_windows: Consecutive hot windows before a worker is added (one busy moment, such
            as opening every connection at the start, is not a trend).
        max_workers: Most processes (default: the cores this process may use).
        streams_per_worker: Streams one process serves at the start (see
            :meth:`initial_workers`): a decode step of 256 streams is a burst of 256 events,
            and one process reading them all was measured late by 3.6-4.4 ms at p99 (two
            processes: 1.9-2.5 ms) on a 2-core machine, server included.
    """

    busy_limit: float = 0.5
    lag_p99_limit_ms: float = 1.0
    window_s: float = 0.5
    hot_windows: int = 2
    max_workers: int = field(default_factory=available_cores)
    streams_per_worker: int = 128

    def initial_workers(self, streams: int | None) -> int:
        """Workers active from the start: one per ``streams_per_worker`` concurrent streams
        (a decode step of that many streams is a burst of that many events for one process),
        so a large run does not spend its first windows finding out. Unknown (uncapped open
        loop): one."""
        if streams is None:
            return 1
        return max(1, min(self.max_workers, -(-streams // self.streams_per_worker)))


class _Shared:
    """What the supervisor and the workers share: the claim counter, per-worker targets and
    running counts (each element written by one process only), the start and stop."""

    def __init__(self, ctx: Any, workers: int) -> None:
        self.claimed: Synchronized[int] = ctx.Value("q", 0)
        self.targets: SynchronizedArray[int] = ctx.Array("i", workers, lock=False)
        self.running: SynchronizedArray[int] = ctx.Array("i", workers, lock=False)
        self.go: MpEvent = ctx.Event()
        self.stop: MpEvent = ctx.Event()
        self.halt: MpEvent = ctx.Event()
        """Send nothing more, let the requests in flight finish (``stop_when``)."""
        self.start_at: Synchronized[int] = ctx.Value("q", 0)

    def claim(self, total: int) -> int | None:
        """The next request index, or ``None`` when every request is claimed."""
        with self.claimed.get_lock():
            index = self.claimed.value
            if index >= total:
                return None
            self.claimed.value = index + 1
        return index


class _Worker:
    """One process's share of an autoscaled run."""

    def __init__(self, worker_id: int, workload: Workload, config: ClientConfig,
                 count_tokens: TokenCounter | None, shared: _Shared, outbox: Any,
                 duration_s: float | None, window_s: float, send_progress: bool,
                 keep_records: bool = True) -> None:
        self.id = worker_id
        self.keep_records = keep_records
        self.ended = 0
        self.last_end_ns: int | None = None
        self.send_progress = send_progress
        self.workload = workload
        self.config = config
        self.count_tokens = count_tokens
        self.shared = shared
        self.outbox = outbox
        self.duration_s = duration_s
        self.window_s = window_s
        self.records: list[RequestRecord] = []
        self.stop = asyncio.Event()
        self.deadline_ns: int | None = None
        self.freed = asyncio.Event()

    @property
    def target(self) -> int:
        return int(self.shared.targets[self.id])

    @property
    def running(self) -> int:
        return int(self.shared.running[self.id])

    def _add_running(self, step: int) -> None:
        self.shared.running[self.id] += step

    def may_send(self) -> bool:
        if self.stop.is_set() or self.shared.stop.is_set() or self.shared.halt.is_set():
            return False
        return self.deadline_ns is None or time.monotonic_ns() < self.deadline_ns

    def exhausted(self) -> bool:
        return int(self.shared.claimed.value) >= len(self.workload.requests)

    async def one(self, session: Any, index: int) -> None:
        record = await send_request(session, self.workload.requests[index], self.config,
                                    self.count_tokens)
        self.ended += 1
        if self.last_end_ns is None or record.t_end_ns > self.last_end_ns:
            self.last_end_ns = record.t_end_ns
        if self.keep_records:
            self.records.append(record)
        if self.send_progress:
            self.outbox.put(("progress", self.id, record.to_dict()))

    async def run(self) -> RunResult:
        await sleep_until(int(self.shared.start_at.value))
        start_ns = int(self.shared.start_at.value)
        if self.duration_s is not None:
            self.deadline_ns = start_ns + int(self.duration_s * 1e9)
        monitor = LagMonitor()
        monitor.start()
        tasks: set[asyncio.Task[None]] = set()
        schedule = self.workload.schedule
        receipts = ReceiptTally()
        try:
            session = client_session(schedule.max_concurrency or 0,
                                     kernel_receipts=self.config.kernel_receipts)
            receipts = receipt_tally(session)
            async with session:
                if schedule.offsets_s is None:
                    await self._closed_loop(session, tasks, monitor)
                else:
                    await self._open_loop(session, tasks, monitor, start_ns)
        finally:
            lag = monitor.stop(kernel_receipts=receipts.kernel_share)
        return RunResult(
            records=sorted(self.records, key=lambda r: r.index), started_ns=start_ns,
            ended_ns=self.last_end_ns if self.last_end_ns is not None else start_ns, lag=lag,
            interrupted=self.shared.stop.is_set(), worker_lags=[lag], ended=self.ended,
        )

    def _stop_if_asked(self, tasks: set[asyncio.Task[None]]) -> None:
        """On the supervisor's stop, end in-flight requests once (each keeps its partial data
        as ``truncated``)."""
        if self.shared.stop.is_set() and not self.stop.is_set():
            self.stop.set()
            for task in tasks:
                task.cancel()

    def _report(self, monitor: LagMonitor, last: list[float]) -> None:
        now = time.monotonic()
        if now - last[0] >= self.window_s:
            last[0] = now
            busy, lag_p99_ms = monitor.window()
            self.outbox.put(("health", self.id, (busy, lag_p99_ms)))

    async def _closed_loop(self, session: Any, tasks: set[asyncio.Task[None]],
                           monitor: LagMonitor) -> None:
        async def slot() -> None:
            try:
                while self.may_send() and self.running <= self.target:
                    index = self.shared.claim(len(self.workload.requests))
                    if index is None:
                        return
                    await self.one(session, index)
            finally:
                self._add_running(-1)

        last = [time.monotonic()]
        while not (self.exhausted() and not tasks):
            self._stop_if_asked(tasks)
            while self.may_send() and not self.exhausted() and self.running < self.target:
                self._add_running(1)
                task = asyncio.create_task(slot())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if not self.may_send() and not tasks:
                return
            self._report(monitor, last)
            await asyncio.sleep(_POLL_S)

    async def _open_loop(self, session: Any, tasks: set[asyncio.Task[None]],
                         monitor: LagMonitor, start_ns: int) -> None:
        offsets = self.workload.schedule.offsets_s
        assert offsets is not None
        capped = self.workload.schedule.max_concurrency is not None

        async def gated(index: int) -> None:
            try:
                await self.one(session, index)
            finally:
                self._add_running(-1)
                self.freed.set()

        async def dispatch() -> None:
            while self.may_send():
                if self.target == 0:
                    await asyncio.sleep(_POLL_S)
                    continue
                index = self.shared.claim(len(self.workload.requests))
                if index is None:
                    return
                await sleep_or_stop(start_ns + int(offsets[index] * 1e9), self.stop)
                while capped and self.running >= self.target and self.may_send():
                    self.freed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.freed.wait(), _POLL_S)
                if not self.may_send():
                    return
                self._add_running(1)
                task = asyncio.create_task(gated(index))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        dispatcher = asyncio.create_task(dispatch())
        last = [time.monotonic()]
        while not (dispatcher.done() and not tasks):
            self._stop_if_asked(tasks)
            self._report(monitor, last)
            await asyncio.sleep(_POLL_S)
        await dispatcher


def _worker_main(worker_id: int, workload: Workload, config: ClientConfig,
                 counter_factory: Any, duration_s: float | None, shared: _Shared, outbox: Any,
                 window_s: float, send_records: bool, keep_records: bool) -> None:
    """Body of one worker process: wait for the common start, serve its share, send it home:
    each record as it ends with ``send_records``, all at the end with ``keep_records``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides; shared.stop tells us
    try:
        count_tokens = counter_factory() if counter_factory is not None else None
        if config.kernel_receipts:
            hold_kernel_stamps()  # before the start: the kernel switches its stamping on lazily
        outbox.put(("ready", worker_id, None))
        shared.go.wait()
        worker = _Worker(worker_id, workload, config, count_tokens, shared, outbox, duration_s,
                         window_s, send_records, keep_records)
        outbox.put(("done", worker_id, asyncio.run(worker.run())))
    except BaseException as exc:  # reported to the supervisor, which keeps the others' records
        outbox.put(("error", worker_id, f"{type(exc).__name__}: {exc}\n"
                                        f"{traceback.format_exc(limit=5)}"))


def _shares(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class _Supervisor:
    """Decides when to add a worker, and hands slots over without exceeding the total."""

    def __init__(self, shared: _Shared, workers: int, total_slots: int | None,
                 policy: ScalePolicy) -> None:
        self.shared = shared
        self.workers = workers
        self.total = total_slots  # None: uncapped open loop, targets are on/off flags
        self.policy = policy
        self.active = min(workers, policy.initial_workers(total_slots))
        self.desired = [0] * workers
        self.hot = [0] * workers
        self.scaling: list[str] = []
        if self.active > 1:
            self.scaling.append(f"0.0 s: {self.active} workers from the start for "
                                f"{total_slots} concurrent streams")
        self.started = time.monotonic()
        self._set_desired()

    def _set_desired(self) -> None:
        shares = (_shares(self.total, self.active) if self.total is not None
                  else [1] * self.active)
        self.desired = shares + [0] * (self.workers - self.active)
        for w, want in enumerate(self.desired):
            if want < self.shared.targets[w] or self.total is None:
                self.shared.targets[w] = want
        self.grant()

    def grant(self) -> None:
        """Raise targets towards their share by slots that are actually free."""
        if self.total is None:
            return
        for w, want in enumerate(self.desired):
            if self.shared.targets[w] >= want:
                continue
            held = sum(max(self.shared.targets[o], self.shared.running[o])
                       for o in range(self.workers) if o != w)
            self.shared.targets[w] = max(self.shared.targets[w],
                                         min(want, self.total - held))

    def restart_clock(self) -> None:
        """The run starts now: scaling times count from here."""
        self.started = time.monotonic()

    def hear(self, kind: str, worker: int, payload: Any) -> None:
        """A worker's message the pool does not handle itself: its health."""
        if kind == "health":
            self.observe(worker, *payload)

    def observe(self, worker: int, busy: float, lag_p99_ms: float) -> None:
        if worker >= self.active:
            return
        policy = self.policy
        hot = busy > policy.busy_limit or lag_p99_ms > policy.lag_p99_limit_ms
        self.hot[worker] = self.hot[worker] + 1 if hot else 0
        if self.hot[worker] < policy.hot_windows or self.active >= self.workers:
            return
        self.active += 1
        self.hot = [0] * self.workers
        self.scaling.append(
            f"{time.monotonic() - self.started:.1f} s: {self.active} workers (worker {worker}: "
            f"CPU {busy:.0%} of a core, event-loop lag p99 {lag_p99_ms:.2f} ms)")
        self._set_desired()


def run_autoscaled(
    workload: Workload,
    config: ClientConfig,
    *,
    counter_factory: Any = None,
    progress: ProgressCallback | None = None,
    duration_s: float | None = None,
    policy: ScalePolicy | None = None,
    keep_records: bool = True,
    stop_when: Callable[[], bool] | None = None,
) -> RunResult:
    """Run ``workload`` from as many processes as it needs (see the module docstring).

    The result's ``workers`` is the number that took part, and ``scaling`` says when and why
    each was added.
    """
    policy = policy or ScalePolicy()
    total = len(workload.requests)
    cap = workload.schedule.max_concurrency
    workers = max(1, min(policy.max_workers, cap or policy.max_workers, total))
    ctx = mp.get_context("spawn")
    shared = _Shared(ctx, workers)
    outbox = ctx.Queue()
    supervisor = _Supervisor(shared, workers, cap, policy)
    procs = [ctx.Process(target=_worker_main, daemon=True,
                         args=(i, workload, config, counter_factory, duration_s, shared, outbox,
                               policy.window_s,
                               progress is not None or not keep_records or stop_when is not None,
                               keep_records))
             for i in range(workers)]
    outcome = run_pool(procs, outbox, go=shared.go, stop_all=shared.stop,
                       start_at=shared.start_at, progress=progress, poll_s=_POLL_S,
                       on_start=supervisor.restart_clock, on_poll=supervisor.grant,
                       on_message=supervisor.hear, stop_when=stop_when,
                       halt_all=shared.halt)
    merged = outcome.merged(list(range(supervisor.active)), supervisor.active, total)
    merged.scaling = supervisor.scaling
    return merged
