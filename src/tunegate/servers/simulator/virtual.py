"""The virtual-clock driver: a whole benchmark in process, in a fraction of a second of CPU.

It plays the client's part exactly as ``tunegate.loadgen`` would over HTTP and returns the same
:class:`~tunegate.loadgen.records.RequestRecord` objects, with integer-nanosecond virtual
timestamps (the run starts at 0):

* ``t_send_ns`` is the real send time, between engine steps as often as not: open loop sends at
  its offset; a request waiting for a concurrency slot (closed loop, ``offsets_s=None``, or a
  capped open loop) is sent when a slot frees, that is when an earlier response ended plus the
  client's turnaround (``client_turnaround_s``, default :data:`CLIENT_TURNAROUND_S`: reading the
  end of the stream and writing the next request).
* After the scenario's front-end latency the request enters the scheduler, and joins the first
  step that **starts strictly after** it entered: a request that arrives while a step runs waits
  for that step to end, as on a real server. An idle engine starts a step when it enters.
* Streaming: one content event per generated token at the end of the step that produced it.
  ``stream=False``: one content event at completion (so TTFT == E2EL, exactly what a
  non-streaming benchmark measures).
* Counts come from the server's usage report (:mod:`.tokens` documents its tokenizer).
* Rejected requests (HTTP 400), an injected lying health (HTTP 500), and a crash (in-flight
  streams truncated, later connections refused) end as the HTTP client would record them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.prometheus import ServerMetrics
from tunegate.servers.simulator.scenarios import Scenario
from tunegate.servers.simulator.sequence import Seq
from tunegate.servers.simulator.tokens import block_hashes, chars_prefix, count_prompt_tokens
from tunegate.workload.spec import RequestSpec, Workload

__all__ = ["CLIENT_TURNAROUND_S", "VirtualRun", "evaluate_noise_free", "run_virtual"]

CLIENT_TURNAROUND_S = 300e-6
"""Seconds between a response's end and the next request's send on a freed slot (the client's
own processing: closing the stream, building and writing the next request; ~0.1-0.5 ms for an
asyncio HTTP client on loopback). It keeps a closed-loop request from joining the engine step
that starts the instant the previous one finished, which a real client always misses."""

_LYING = "engine is not ready: model executor failed (injected fault)"


@dataclass(slots=True)
class VirtualRun:
    """Result of :func:`run_virtual`.

    Attributes:
        records: One record per workload request, in request order; empty when the records
            went to a ``sink`` instead.
        server_metrics: The counters and histograms ``/metrics`` would expose after the run.
        engine_info: Scenario, effective engine config, memory plan (as a start-up log).
        duration_ns: Virtual time from the first send to the last event.
        steps: Engine steps executed.
        elapsed_before_s: Machine age when the run started (see :func:`run_virtual`).
    """

    records: list[RequestRecord]
    server_metrics: ServerMetrics
    engine_info: dict[str, Any]
    duration_ns: int
    steps: int
    notes: list[str] = field(default_factory=list)
    elapsed_before_s: float = 0.0

    @property
    def elapsed_after_s(self) -> float:
        """Machine age when the run ended: pass it as the next run's ``elapsed_before_s``."""
        return self.elapsed_before_s + self.duration_ns / 1e9


class _SendQueue:
    """Requests not yet sent, in sending order, without a Python object per request.

    Closed loop: indices in order, all due at once. Open loop: each request's offset; offsets
    built by :mod:`tunegate.workload.arrivals` only grow, so the order is the index order, and
    only a hand-made schedule whose offsets go back costs an index array to sort them.
    """

    def __init__(self, count: int, offsets_s: Sequence[float] | None) -> None:
        self._next = 0
        self._count = count
        self._offsets = offsets_s
        self._order: np.ndarray | None = None
        if offsets_s is not None and any(b < a for a, b in pairwise(offsets_s)):
            due = np.rint(np.asarray(offsets_s, dtype=np.float64) * 1e9)
            self._order = np.argsort(due, kind="stable")  # by due instant, then index

    def __bool__(self) -> bool:
        return self._next < self._count

    def _index(self) -> int:
        return self._next if self._order is None else int(self._order[self._next])

    def due_ns(self) -> int:
        """When the next request is due (0 in a closed loop: as soon as a slot frees)."""
        return 0 if self._offsets is None else round(self._offsets[self._index()] * 1e9)

    def pop(self) -> int:
        """The next request's index."""
        index = self._index()
        self._next += 1
        return index

    def clear(self) -> None:
        """Send nothing more."""
        self._next = self._count


def _error_record(
    spec: RequestSpec,
    t_ns: int,
    stream: bool,
    status: int | None,
    message: str,
    outcome: Outcome = Outcome.SERVER_ERROR,
) -> RequestRecord:
    return RequestRecord(
        index=spec.index,
        warmup=spec.warmup,
        outcome=outcome,
        streamed=stream,
        t_send_ns=t_ns,
        t_end_ns=t_ns,
        requested_max_tokens=spec.max_tokens,
        ignore_eos=True,
        http_status=status,
        error=message,
    )


def _record(spec: RequestSpec, seq: Seq, stream: bool, complete: bool, t_end: int) -> RequestRecord:
    times = seq.times
    n = len(times)
    if stream or not complete:
        content_times = times if stream else []
        content_chars = chars_prefix(n) if stream else []
    else:
        content_times = [times[-1]]
        content_chars = [sum(chars_prefix(n))]
    rec = RequestRecord(
        index=spec.index,
        warmup=spec.warmup,
        outcome=Outcome.COMPLETE if complete else Outcome.TRUNCATED,
        streamed=stream,
        t_send_ns=seq.arrival_ns,
        t_end_ns=t_end,
        t_first_ns=content_times[0] if content_times else None,
        t_last_ns=content_times[-1] if content_times else None,
        content_times_ns=content_times,
        content_chars=content_chars,
        requested_max_tokens=spec.max_tokens,
        ignore_eos=True,
        http_status=200,
    )
    if complete:
        rec.input_tokens = rec.usage_prompt_tokens = seq.prompt_len
        rec.output_tokens = rec.usage_completion_tokens = n
        rec.input_tokens_source = rec.output_tokens_source = CountSource.USAGE
        rec.finish_reason = "length"
    else:
        rec.error = "connection closed by server (engine crashed)"
    return rec


def run_virtual(
    workload: Workload,
    scenario: Scenario | str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    stream: bool = True,
    seed: int = 0,
    noise: bool = True,
    faults: FaultConfig | None = None,
    repeat: int = 0,
    elapsed_before_s: float = 0.0,
    start_attempt: int | None = None,
    client_turnaround_s: float = CLIENT_TURNAROUND_S,
    send_for_s: float | None = None,
    sink: Callable[[RequestRecord], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
) -> VirtualRun:
    """Benchmark a simulated engine on ``workload`` with a virtual clock.

    Args:
        workload: Requests and their arrival schedule.
        scenario: A scenario or a name from :func:`list_scenarios`.
        engine_args: Engine flags (vLLM names; strings or typed values) over the scenario's.
        stream: Whether the simulated client streams (``False`` reproduces the broken gauge).
        seed: Seeds noise and fault draws; same arguments, same records.
        noise: ``False`` gives the noise-free ground truth (exactly deterministic: ``seed``
            and ``repeat`` then change nothing, nor does ``elapsed_before_s`` unless the
            scenario has a known change with machine age, :mod:`.drift`).
        faults: Faults to inject on top of the scenario's.
        repeat: Repeat number of this measurement. The step noise is drawn from
            ``(seed, repeat, hash of scenario + engine config)``: repeated measurements of one
            config differ (pass ``repeat=0, 1, 2, ...``) and two configs never share a draw.
        elapsed_before_s: Machine age at the start of this run, seconds. Drift (and a drift
            scenario's step or leak) follows machine age, so a sequence of runs that passes
            ``previous.elapsed_after_s`` here sees drift accumulate across runs, as on one
            long-lived server.
        start_attempt: Start attempt number for the start-failure draw (see :class:`Engine`).
        client_turnaround_s: Client time from a response's end to the next send on its slot.
        send_for_s: Stop sending after this much virtual time, as ``bench --duration`` does:
            requests not sent by then are left out of the records (those in flight finish).
        sink: Called with each record as its request ends (in completion order); the records
            are then not kept (``VirtualRun.records`` is empty), so a run of any length holds
            only the requests in flight.
        stop_when: Asked before each send; once it returns true nothing more is sent (the
            requests in flight finish, the rest are left out of the records), as when a
            capacity probe's verdict is already certain.

    Raises:
        ConfigError: An invalid engine argument or scenario name.
        ServerError: The engine fails to start (OOM, injected start failure, ...).
    """
    engine = Engine(
        scenario,
        engine_args,
        seed=seed,
        noise=noise,
        faults=faults,
        repeat=repeat,
        elapsed_before_s=elapsed_before_s,
        start_attempt=start_attempt,
    )
    specs = workload.requests
    n = len(specs)
    records: list[RequestRecord | None] = [None] * (0 if sink else n)
    ended = 0
    offsets = workload.schedule.offsets_s
    cap = workload.schedule.max_concurrency
    turnaround = round(client_turnaround_s * 1e9)
    bs = engine.config.block_size
    caching = engine.config.enable_prefix_caching
    lying = engine.faults.lying_health
    pending = _SendQueue(n, offsets)
    slots = [0] * min(cap if cap is not None else n, n)  # heap: when each free slot frees
    in_flight: dict[int, Seq] = {}
    entering: list[tuple[int, int, Seq]] = []  # (enter_ns, index, seq): front-end latency
    dead_at: int | None = None
    last_event = 0
    cutoff = None if send_for_s is None else round(send_for_s * 1e9)

    def next_send() -> int | None:
        if not pending or not slots:  # nothing left, or every slot busy until a response ends
            return None
        t = pending.due_ns()
        t = slots[0] if slots[0] > t else t
        if (cutoff is not None and t > cutoff) or (stop_when is not None and stop_when()):
            pending.clear()  # the sending time is over: the rest is never sent
            return None
        return t

    def end(i: int, record: RequestRecord, slot_free_ns: int) -> None:
        nonlocal ended
        ended += 1
        if sink is not None:
            sink(record)
        else:
            records[i] = record
        heapq.heappush(slots, slot_free_ns)

    def fail(i: int, t: int, status: int | None, message: str) -> None:
        end(i, _error_record(specs[i], t, stream, status, message), t + turnaround)

    def send_until(limit: int, inclusive: bool) -> None:
        nonlocal last_event
        while True:
            t = next_send()
            if t is None or t > limit or (t == limit and not inclusive):
                return
            i = pending.pop()
            heapq.heappop(slots)
            last_event = max(last_event, t)
            spec = specs[i]
            if dead_at is not None and t >= dead_at:
                fail(i, t, None, "connection refused (engine crashed)")
                continue
            prompt_len = count_prompt_tokens(spec.prompt, spec.input_tokens)
            reason = engine.validate(prompt_len, spec.max_tokens)
            if lying:
                fail(i, t, 500, reason or _LYING)
                continue
            if reason is not None:
                fail(i, t, 400, reason)
                continue
            hashes = block_hashes(spec.prompt, bs, prompt_len) if caching else None
            seq = Seq(i, prompt_len, spec.max_tokens, t, block_hashes=hashes)
            in_flight[i] = seq
            heapq.heappush(entering, (t + engine.frontend.next_ns(), i, seq))

    now = 0
    while True:
        send_until(now, inclusive=True)
        # Requests that entered before this step starts join it; an idle engine takes them now.
        busy = engine.has_work()
        while entering and (entering[0][0] < now or (not busy and entering[0][0] == now)):
            enter_ns, _, seq = heapq.heappop(entering)
            engine.add(seq, enter_ns)
        if dead_at is None and engine.has_work():
            result = engine.step(now)
            if result is None:  # pragma: no cover - has_work() guarantees a batch
                raise RuntimeError("engine had work but scheduled nothing")
            step_end = result.end_ns
            send_until(step_end, inclusive=False)  # sent while the step ran: a later step
            for seq in result.finished:
                del in_flight[seq.rid]
                end(seq.rid, _record(specs[seq.rid], seq, stream, True, step_end),
                    step_end + turnaround)
            last_event = max(last_event, step_end)
            if engine.crashed:
                dead_at = step_end
                for i, seq in in_flight.items():
                    end(i, _record(specs[i], seq, stream, False, step_end),
                        step_end + turnaround)
                in_flight.clear()
                entering.clear()
            now = step_end
            continue
        # Idle: jump to the next request entering the scheduler or the next send.
        candidates = [entering[0][0]] if entering else []
        t_send = next_send()
        if t_send is not None:
            candidates.append(t_send)
        if not candidates:
            break
        now = max(now, min(candidates))
    out = [r for r in records if r is not None]
    if send_for_s is None and stop_when is None and ended != n:  # pragma: no cover
        raise RuntimeError(f"virtual run lost {n - ended} requests")
    return VirtualRun(
        records=out,
        server_metrics=engine.metrics,
        engine_info=engine.info(),
        duration_ns=last_event,
        steps=engine.steps,
        elapsed_before_s=engine.noise.elapsed_before_s,
    )


def evaluate_noise_free(
    workload: Workload,
    scenario: Scenario | str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    stream: bool = True,
) -> VirtualRun:
    """Ground truth: :func:`run_virtual` with every noise factor exactly 1."""
    return run_virtual(workload, scenario, engine_args, stream=stream, noise=False)
