"""The virtual-clock driver: a whole benchmark in process, in a fraction of a second of CPU.

It plays the client's part exactly as ``tunegate.loadgen`` would over HTTP and returns the same
:class:`~tunegate.loadgen.records.RequestRecord` objects, with integer-nanosecond virtual
timestamps (the run starts at 0):

* ``t_send_ns`` is the arrival; closed loop (``offsets_s=None``) sends the next request the
  instant a previous one ends; open loop sends at its offset, or when a concurrency slot frees.
* Streaming: one content event per generated token at the end of the step that produced it.
  ``stream=False``: one content event at completion (so TTFT == E2EL, exactly what a
  non-streaming benchmark measures).
* Counts come from the server's usage report (:mod:`.tokens` documents its tokenizer).
* Rejected requests (HTTP 400), an injected lying health (HTTP 500), and a crash (in-flight
  streams truncated, later connections refused) end as the HTTP client would record them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.prometheus import ServerMetrics
from tunegate.servers.simulator.sequence import Seq
from tunegate.servers.simulator.tokens import block_hashes, chars_prefix, count_prompt_tokens
from tunegate.workload.spec import RequestSpec, Workload

__all__ = ["VirtualRun", "evaluate_noise_free", "run_virtual"]


@dataclass(slots=True)
class VirtualRun:
    """Result of :func:`run_virtual`.

    Attributes:
        records: One record per workload request, in request order.
        server_metrics: The counters and histograms ``/metrics`` would expose after the run.
        engine_info: Scenario, effective engine config, memory plan (as a start-up log).
        duration_ns: Virtual time from the first send to the last event.
        steps: Engine steps executed.
    """

    records: list[RequestRecord]
    server_metrics: ServerMetrics
    engine_info: dict[str, Any]
    duration_ns: int
    steps: int
    notes: list[str] = field(default_factory=list)


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
    scenario: str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    stream: bool = True,
    seed: int = 0,
    noise: bool = True,
    faults: FaultConfig | None = None,
) -> VirtualRun:
    """Benchmark a simulated engine on ``workload`` with a virtual clock.

    Args:
        workload: Requests and their arrival schedule.
        scenario: A name from :func:`list_scenarios`.
        engine_args: Engine flags (vLLM names; strings or typed values) over the scenario's.
        stream: Whether the simulated client streams (``False`` reproduces the broken gauge).
        seed: Seeds noise and fault draws; same seed, same records.
        noise: ``False`` gives the noise-free ground truth.
        faults: Faults to inject on top of the scenario's.

    Raises:
        ConfigError: An invalid engine argument or scenario name.
        ServerError: The engine fails to start (OOM, injected start failure, ...).
    """
    engine = Engine(scenario, engine_args, seed=seed, noise=noise, faults=faults)
    specs = workload.requests
    n = len(specs)
    records: list[RequestRecord | None] = [None] * n
    offsets = workload.schedule.offsets_s
    cap = workload.schedule.max_concurrency
    slots = cap if cap is not None else n
    bs = engine.config.block_size
    caching = engine.config.enable_prefix_caching
    lying = engine.faults.lying_health
    arrivals: list[tuple[int, int]] = []  # (ready_ns, index): heap of requests wanting to send
    if offsets is None:
        arrivals = [(0, i) for i in range(n)]
    else:
        arrivals = [(round(o * 1e9), i) for i, o in enumerate(offsets)]
        heapq.heapify(arrivals)
    in_flight: dict[int, Seq] = {}
    entering: list[tuple[int, int, Seq]] = []  # (enter_ns, index, seq): front-end latency
    now = 0
    last_event = 0
    free = slots

    def release_slot() -> None:
        nonlocal free
        free += 1

    while True:
        # Send every request that is due and has a slot.
        while arrivals and free > 0 and arrivals[0][0] <= now:
            _, i = heapq.heappop(arrivals)
            spec = specs[i]
            free -= 1
            if engine.crashed:
                records[i] = _error_record(
                    spec, now, stream, None, "connection refused (engine crashed)"
                )
                release_slot()
                continue
            prompt_len = count_prompt_tokens(spec.prompt, spec.input_tokens)
            reason = engine.validate(prompt_len, spec.max_tokens)
            if lying:
                reason = reason or "engine is not ready: model executor failed (injected fault)"
                records[i] = _error_record(spec, now, stream, 500, reason)
                release_slot()
                continue
            if reason is not None:
                records[i] = _error_record(spec, now, stream, 400, reason)
                release_slot()
                continue
            hashes = block_hashes(spec.prompt, bs, prompt_len) if caching else None
            seq = Seq(i, prompt_len, spec.max_tokens, now, block_hashes=hashes)
            in_flight[i] = seq
            heapq.heappush(entering, (now + engine.frontend.next_ns(), i, seq))
        # Requests whose front-end processing is done enter the scheduler.
        while entering and entering[0][0] <= now:
            engine.add(heapq.heappop(entering)[2])
        if engine.has_work() and not engine.crashed:
            result = engine.step(now)
            if result is None:  # pragma: no cover - has_work() guarantees a batch
                raise RuntimeError("engine had work but scheduled nothing")
            now = result.end_ns
            for seq in result.finished:
                del in_flight[seq.rid]
                records[seq.rid] = _record(specs[seq.rid], seq, stream, True, now)
                release_slot()
            last_event = now
            if engine.crashed:
                for i, seq in in_flight.items():
                    records[i] = _record(specs[i], seq, stream, False, now)
                    release_slot()
                in_flight.clear()
                entering.clear()
            continue
        # Idle: jump to the next request entering the scheduler or the next sendable arrival.
        candidates = [entering[0][0]] if entering else []
        if arrivals and free > 0:
            candidates.append(arrivals[0][0])
        if not candidates:
            break
        now = max(now, min(candidates))
        last_event = max(last_event, now)
    out = [r for r in records if r is not None]
    if len(out) != n:  # pragma: no cover - every request ends in exactly one record
        raise RuntimeError(f"virtual run lost {n - len(out)} requests")
    return VirtualRun(
        records=out,
        server_metrics=engine.metrics,
        engine_info=engine.info(),
        duration_ns=last_event,
        steps=engine.steps,
    )


def evaluate_noise_free(
    workload: Workload,
    scenario: str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    stream: bool = True,
) -> VirtualRun:
    """Ground truth: :func:`run_virtual` with every noise factor exactly 1."""
    return run_virtual(workload, scenario, engine_args, stream=stream, noise=False)
