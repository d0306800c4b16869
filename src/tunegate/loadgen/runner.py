"""Drive a workload against a server: closed-loop slots or open-loop arrivals.

One process runs one asyncio loop with one ``aiohttp`` session whose connection pool is sized
to the concurrency. When one process cannot keep up (its event-loop lag grows), ``workers=N``
splits the same schedule over N processes that share the system-wide monotonic clock and one
start instant; see :mod:`tunegate.loadgen.workers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tunegate.loadgen.client import (
    ClientConfig,
    PreparedRequest,
    TokenCounter,
    prepare_request,
    send_request,
    timing_trace_config,
)
from tunegate.loadgen.kernel_stamps import hold_kernel_stamps
from tunegate.loadgen.lag import LagMonitor, LagSummary
from tunegate.loadgen.receipts import ReceiptTally, StampingConnector, receipt_tally
from tunegate.loadgen.records import RequestRecord
from tunegate.workload.spec import RequestSpec, Workload

__all__ = [
    "ProgressCallback",
    "RunResult",
    "client_session",
    "prepare_ahead",
    "run_workload_async",
    "sleep_or_stop",
    "sleep_until",
]

ProgressCallback = Callable[[RequestRecord], None]

PREPARED_BODY_BYTES = 256 * 1024 * 1024
"""Request bodies encoded before the start, at most (the rest are encoded when sent)."""
PREPARED_REQUESTS = 4096
"""Requests whose bodies are encoded ahead: before the start, then one more as each response
ends (off the sending path), so the window stays this wide and memory does not grow with the
workload."""


def prepare_ahead(workload: Workload, config: ClientConfig,
                  budget_bytes: int = PREPARED_BODY_BYTES,
                  max_requests: int = PREPARED_REQUESTS) -> dict[int, PreparedRequest]:
    """Encode the first request bodies, in order, while they fit in ``budget_bytes`` and
    ``max_requests``."""
    prepared: dict[int, PreparedRequest] = {}
    used = 0
    for spec in workload.requests:
        if len(prepared) >= max_requests:
            break
        request = prepare_request(spec, config)
        used += len(request.body)
        if used > budget_bytes:
            break
        prepared[spec.index] = request
    return prepared


@dataclass(slots=True)
class RunResult:
    """Records of one run and what the client knows about its own health.

    Attributes:
        records: One record per request sent, ordered by request index; empty when the run
            handed them to a sink instead (``keep_records=False``).
        started_ns / ended_ns: The run's monotonic start instant and the end of its last request.
        lag: Event-loop lag of the client (worst worker when several).
        interrupted: The run was stopped early (Ctrl-C); the records are what was measured.
        workers: Client processes used.
        not_sent: Requests of the workload never sent (duration reached or interrupted).
        worker_lags: Each worker's own lag summary.
        worker_errors: Client worker processes that failed (their records are missing; the
            other workers' records are kept).
        scaling: With ``workers="auto"``, each time a worker was added and why.
        ended: Requests that ended (kept in ``records`` or handed on); by default
            ``len(records)``.
    """

    records: list[RequestRecord]
    started_ns: int
    ended_ns: int
    lag: LagSummary
    interrupted: bool = False
    workers: int = 1
    not_sent: int = 0
    worker_lags: list[LagSummary] = field(default_factory=list)
    worker_errors: list[str] = field(default_factory=list)
    scaling: list[str] = field(default_factory=list)
    ended: int = -1

    def __post_init__(self) -> None:
        if self.ended < 0:
            self.ended = len(self.records)

    @classmethod
    def merged(cls, parts: list[RunResult], workers: int, total: int) -> RunResult:
        """One result from several worker processes' results (records by index, the worst
        lag)."""
        records = sorted((r for part in parts for r in part.records), key=lambda r: r.index)
        lags = [part.lag for part in parts]
        return cls(
            records=records,
            started_ns=min((p.started_ns for p in parts), default=0),
            ended_ns=max((p.ended_ns for p in parts), default=0),
            lag=LagSummary.worst(lags),
            interrupted=any(p.interrupted for p in parts),
            workers=workers,
            not_sent=total - sum(p.ended for p in parts),
            worker_lags=lags,
            ended=sum(p.ended for p in parts),
        )


def client_session(max_connections: int, *, kernel_receipts: bool = True) -> aiohttp.ClientSession:
    """The session one client process uses: a pool of ``max_connections`` (0 = unbounded, for
    uncapped open loop) whose connections take receipt times as bytes come off the socket
    (:mod:`.receipts`; the kernel's where it gives them and ``kernel_receipts`` is on), the
    send-time trace hooks, and no session-wide deadline (each request has its own)."""
    connector = StampingConnector(limit=max_connections, limit_per_host=0, ttl_dns_cache=300,
                                  kernel_receipts=kernel_receipts)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                 trace_configs=[timing_trace_config()])


async def sleep_until(target_ns: int) -> None:
    """Sleep until the monotonic instant ``target_ns`` (at once when it has passed)."""
    delay_ns = target_ns - time.monotonic_ns()
    if delay_ns > 0:
        await asyncio.sleep(delay_ns / 1e9)


async def sleep_or_stop(target_ns: int, stop: asyncio.Event) -> None:
    """Sleep until ``target_ns``; long waits end early when ``stop`` is set (Ctrl-C)."""
    delay_s = (target_ns - time.monotonic_ns()) / 1e9
    if delay_s > 0.05:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay_s - 0.02)
    await sleep_until(target_ns)


class _Run:
    """Shared state of one run inside one process."""

    def __init__(
        self,
        workload: Workload,
        config: ClientConfig,
        count_tokens: TokenCounter | None,
        progress: ProgressCallback | None,
        stop: asyncio.Event,
        deadline_ns: int | None,
        keep_records: bool = True,
        halt: Callable[[], bool] | None = None,
    ) -> None:
        self.workload = workload
        self.halt = halt
        self.config = config
        self.count_tokens = count_tokens
        self.progress = progress
        self.stop = stop
        self.deadline_ns = deadline_ns
        self.keep_records = keep_records
        self.records: list[RequestRecord] = []
        self.sent = 0
        self.ended = 0
        self.last_end_ns: int | None = None
        self.prepared: dict[int, PreparedRequest] = {}
        self.next_to_prepare = 0
        self.failure: BaseException | None = None

    def prepare(self, prepared: dict[int, PreparedRequest]) -> None:
        """Start from bodies encoded ahead (the first ``len(prepared)`` requests)."""
        self.prepared = prepared
        self.next_to_prepare = len(prepared)

    def _top_up(self) -> None:
        """Encode one more body ahead, keeping the window of prepared requests as wide."""
        requests = self.workload.requests
        if self.prepared and self.next_to_prepare < len(requests):
            spec = requests[self.next_to_prepare]
            self.prepared[spec.index] = prepare_request(spec, self.config)
            self.next_to_prepare += 1

    def may_send(self) -> bool:
        if self.stop.is_set() or (self.halt is not None and self.halt()):
            return False
        return self.deadline_ns is None or time.monotonic_ns() < self.deadline_ns

    async def one(self, session: aiohttp.ClientSession, spec: RequestSpec) -> None:
        self.sent += 1
        record = await send_request(session, spec, self.config, self.count_tokens,
                                    self.prepared.pop(spec.index, None))
        self.ended += 1
        if self.last_end_ns is None or record.t_end_ns > self.last_end_ns:
            self.last_end_ns = record.t_end_ns
        if self.keep_records:
            self.records.append(record)
        if self.progress is not None:
            self.progress(record)
        self._top_up()

    async def closed_loop(self, session: aiohttp.ClientSession, slots: int) -> None:
        pending: Iterator[RequestSpec] = iter(self.workload.requests)

        async def slot() -> None:
            for spec in pending:
                if not self.may_send():
                    return
                await self.one(session, spec)

        await _gather_until_stopped([slot() for _ in range(slots)], self.stop)

    async def open_loop(self, session: aiohttp.ClientSession, start_ns: int) -> None:
        offsets = self.workload.schedule.offsets_s
        assert offsets is not None
        cap = self.workload.schedule.max_concurrency
        gate = asyncio.Semaphore(cap) if cap else None

        async def gated(spec: RequestSpec) -> None:
            if gate is None:
                await self.one(session, spec)
                return
            async with gate:
                if self.may_send():
                    await self.one(session, spec)

        live: set[asyncio.Task[None]] = set()  # only requests in flight: memory stays flat

        def finished(task: asyncio.Task[None]) -> None:
            live.discard(task)
            if not task.cancelled() and task.exception() is not None and self.failure is None:
                self.failure = task.exception()

        for spec, offset in zip(self.workload.requests, offsets, strict=True):
            await sleep_or_stop(start_ns + int(offset * 1e9), self.stop)
            if not self.may_send():
                break
            task = asyncio.create_task(gated(spec))
            live.add(task)
            task.add_done_callback(finished)
        await _gather_until_stopped(list(live), self.stop)
        if self.failure is not None:  # requests never raise for server behaviour: a bug
            raise self.failure


async def _gather_until_stopped(aws: list[Any], stop: asyncio.Event) -> None:
    """Await all tasks; when ``stop`` is set, cancel them (each records its partial data)."""
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        everything: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
        done, _ = await asyncio.wait({everything, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in done:
            for task in tasks:
                task.cancel()
        outcomes = await everything
    finally:
        stopper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopper
    for outcome in outcomes:  # requests never raise for server behaviour: this is a bug
        if isinstance(outcome, Exception):
            raise outcome


async def run_workload_async(
    workload: Workload,
    config: ClientConfig,
    *,
    count_tokens: TokenCounter | None = None,
    progress: ProgressCallback | None = None,
    duration_s: float | None = None,
    stop: asyncio.Event | None = None,
    start_at_ns: int | None = None,
    lag_interval_s: float = 0.005,
    prepared: dict[int, PreparedRequest] | None = None,
    keep_records: bool = True,
    halt: Callable[[], bool] | None = None,
) -> RunResult:
    """Run ``workload`` in the current event loop.

    Args:
        workload: Requests and their schedule.
        config: Server, endpoint and request options.
        count_tokens: A real tokenizer's counter, for token counts the server does not report.
        progress: Called with each finished record.
        duration_s: Stop sending new requests this long after the start; in-flight ones finish.
        stop: Set it to stop early (Ctrl-C): in-flight requests end as ``truncated`` with their
            partial data, and the result says ``interrupted``.
        start_at_ns: A shared monotonic start instant (several worker processes).
        lag_interval_s: Period of the event-loop lag probe.
        prepared: Request bodies already encoded (:func:`prepare_ahead`); by default they are
            encoded here, before the start.
        keep_records: Keep every record in the result. Off, each record goes to ``progress``
            only, and the run holds nothing per request once it has ended.
        halt: Asked before each send; once true nothing more is sent and the requests in
            flight finish (as at ``duration_s``): a capacity probe whose verdict is certain.
    """
    stop = stop or asyncio.Event()
    run = _Run(workload, config, count_tokens, progress, stop, None, keep_records, halt)
    run.prepare(prepared if prepared is not None else prepare_ahead(workload, config))
    if config.kernel_receipts:
        hold_kernel_stamps()  # before the start: the kernel switches its stamping on lazily
    if start_at_ns is not None:
        await sleep_until(start_at_ns)
    start_ns = time.monotonic_ns()
    if duration_s is not None:
        run.deadline_ns = start_ns + int(duration_s * 1e9)
    monitor = LagMonitor(lag_interval_s)
    monitor.start()
    receipts = ReceiptTally()
    try:
        session = client_session(workload.schedule.max_concurrency or 0,
                                 kernel_receipts=config.kernel_receipts)
        receipts = receipt_tally(session)
        async with session:
            if workload.schedule.offsets_s is None:
                slots = workload.schedule.max_concurrency or 1
                await run.closed_loop(session, slots)
            else:
                await run.open_loop(session, start_ns)
    finally:
        lag = monitor.stop(kernel_receipts=receipts.kernel_share)
    return RunResult(
        records=sorted(run.records, key=lambda r: r.index),
        started_ns=start_ns,
        ended_ns=run.last_end_ns if run.last_end_ns is not None else start_ns,
        lag=lag,
        interrupted=stop.is_set(),
        not_sent=len(workload.requests) - run.sent,
        worker_lags=[lag],
        ended=run.ended,
    )
