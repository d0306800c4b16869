"""The normalised form every gauge check reads, whichever tool measured the data.

A :class:`Dataset` holds per-request samples when the source has them (tunegate records, vLLM
``--save-detailed`` arrays, AIPerf's ``profile_export.jsonl``, GuideLLM's sampled requests),
summary statistics always, and the run's configuration (:class:`RunContext`). All times are in
seconds except the summary statistics, which keep the milliseconds every tool reports.

A check that needs per-request data and only finds summaries says so (``not_checked``) instead
of guessing; see :mod:`tunegate.gauge.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tunegate.loadgen.lag import LagSummary

__all__ = ["Dataset", "RequestSample", "RooflineLimits", "RunContext", "Stat", "Summary",
           "engine_of_metrics", "stat_of"]


@dataclass(frozen=True, slots=True)
class RooflineLimits:
    """What the hardware allows, as plain numbers (no simulator import needed).

    Attributes:
        peak_flops: Dense tensor FLOP/s of every chip serving one model replica together.
        mem_bandwidth: Memory bandwidth of those chips together, bytes/s.
        weight_bytes: Bytes of weights one forward pass reads.
        params: Parameter count (a token costs about ``2 x params`` FLOPs).
        description: For messages, e.g. ``"8x Ascend-910B-like, llama-3.1-70b"``.
    """

    peak_flops: float
    mem_bandwidth: float
    weight_bytes: float
    params: float
    description: str = ""

    @property
    def max_decode_rate(self) -> float:
        """Tokens/s one sequence can decode at most: every step reads all weights once."""
        return self.mem_bandwidth / self.weight_bytes

    @property
    def max_token_rate(self) -> float:
        """Tokens/s (prefill + decode, all sequences) the compute allows: 2 x params FLOPs each."""
        return self.peak_flops / (2.0 * self.params)


@dataclass(frozen=True, slots=True)
class RequestSample:
    """One request as a foreign tool (or tunegate) reported it. Times in seconds.

    ``None`` always means "the source did not say"; ``itls_s=()`` means "known: no gaps".
    ``ttfat_s`` is the time to the first *answer* token (after any reasoning) and
    ``reasoning_tokens`` the reasoning part of ``output_tokens``, when the source tells them
    apart (tunegate, AIPerf, GuideLLM 0.7+).
    ``content_events`` counts events carrying generated text; ``chunks`` counts whatever the
    transport delivered (role, usage and ``[DONE]`` events included), when that is all a tool
    records (AIPerf's ``http_req_chunks_received``).
    """

    ok: bool
    ttft_s: float | None = None
    e2el_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    itls_s: tuple[float, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None
    error: str | None = None
    stream_requested: bool | None = None
    response_streamed: bool | None = None
    content_events: int | None = None
    chunks: int | None = None
    usage_output_tokens: int | None = None
    tokenizer_output_tokens: int | None = None
    output_tokens_source: str | None = None
    requested_max_tokens: int | None = None
    ignore_eos: bool | None = None
    warmup: bool = False
    ttfat_s: float | None = None
    reasoning_tokens: int | None = None

    @property
    def tpot_s(self) -> float | None:
        """(E2EL - TTFT) / (output_tokens - 1), for more than one output token."""
        if self.ttft_s is None or self.e2el_s is None or (self.output_tokens or 0) <= 1:
            return None
        return (self.e2el_s - self.ttft_s) / ((self.output_tokens or 0) - 1)


@dataclass(frozen=True, slots=True)
class Stat:
    """A summary of one distribution as a report quotes it (``percentiles``: p -> value).

    Attributes:
        std: Standard deviation, when the report gives one.
        derived: ``None`` when the report quoted these figures; otherwise how tunegate derived
            them from other fields (e.g. E2EL from TTFT + TPOT x (output - 1) when the report
            left E2EL out), so messages can say the figure was not measured as such.
    """

    mean: float | None = None
    median: float | None = None
    percentiles: Mapping[float, float] = field(default_factory=dict)
    count: int | None = None
    std: float | None = None
    derived: str | None = None

    def quoted(self) -> dict[str, float]:
        """Every statistic the report gave, by name (``mean``, ``median``, ``p99``...)."""
        out = {"mean": self.mean, "median": self.median}
        out |= {f"p{p:g}": v for p, v in self.percentiles.items()}
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True, slots=True)
class Summary:
    """Run totals and distributions (latencies in ms, as every tool reports them).

    ``max_concurrent_requests`` is an instantaneous peak of requests in flight, set only when
    the source measured one (tunegate's records; not vLLM's per-second bucket count).
    ``mean_concurrent_requests`` is the time-averaged number in flight the tool measured (SGLang's
    ``concurrency``: sum of latencies / duration). ``error_examples`` are failure messages the
    report names when it has no per-request data (AIPerf's ``error_summary``). ``ttfat_ms`` and
    ``mean_reasoning_tokens``: time to first answer token and reasoning tokens per request, for
    reasoning models, when the source tells reasoning from answer.
    """

    completed: int | None = None
    failed: int | None = None
    duration_s: float | None = None
    ttft_ms: Stat | None = None
    tpot_ms: Stat | None = None
    itl_ms: Stat | None = None
    e2el_ms: Stat | None = None
    ttfat_ms: Stat | None = None
    mean_reasoning_tokens: float | None = None
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    total_output_tokens: float | None = None
    output_throughput: float | None = None
    max_concurrent_requests: float | None = None
    mean_concurrent_requests: float | None = None
    request_throughput: float | None = None
    num_prompts: int | None = None
    total_output_tokens_retokenized: float | None = None
    error_examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunContext:
    """How the run was configured, and what else is known about it.

    Attributes:
        max_concurrency: Closed-loop slots or concurrency cap; ``None`` when unknown/uncapped.
        request_rate: Open-loop rate; ``None`` or infinity for a closed loop.
        stream_requested: Whether the benchmark asked for streaming (``None``: unknown).
        percentiles: Percentiles the report quotes.
        warmup_excluded: Requests excluded as warm-up (``None``: unknown).
        lag: The load generator's own event-loop lag (tunegate only).
        server_metrics: The server's ``/metrics`` over the run: the block of
            :mod:`tunegate.loadgen.server_metrics` (checks read its engine-independent
            ``derived`` keys), or an older file's flat snapshot keyed by vLLM names.
        roofline: Hardware limits, when hardware and model are known.
        engine: The serving engine when the report names it (``vllm``, ``sglang``,
            ``llamacpp``): remedies then name that engine's flags; ``None`` when unknown.
        arrival: The open loop's arrival process (``poisson``, ``gamma``, ``constant``).
        burstiness: The gamma shape of the arrivals (1 = Poisson); ``None`` when unknown.
        rate_schedule: True when the request rate changed during the run (a ramp-up): one
            configured rate then describes no part of it.
    """

    max_concurrency: int | None = None
    request_rate: float | None = None
    stream_requested: bool | None = None
    percentiles: tuple[float, ...] = ()
    warmup_excluded: int | None = None
    lag: LagSummary | None = None
    server_metrics: Mapping[str, Any] | None = None
    roofline: RooflineLimits | None = None
    engine: str | None = None
    arrival: str | None = None
    burstiness: float | None = None
    rate_schedule: bool = False

    @property
    def closed_loop(self) -> bool:
        rate = self.request_rate
        return self.max_concurrency is not None and (rate is None or rate == float("inf"))


@dataclass(frozen=True, slots=True)
class Dataset:
    """What the checks read: samples (when known), summary, context, and the source's name.

    ``requests_are_sample``: the requests are a sample of the run's (GuideLLM keeps a few per
    status), so checks that need every request (arrival rate, counts) use the summary.
    """

    source: str
    summary: Summary
    requests: tuple[RequestSample, ...] | None = None
    context: RunContext = field(default_factory=RunContext)
    requests_are_sample: bool = False

    @property
    def measured(self) -> list[RequestSample]:
        """Per-request samples outside warm-up (empty when the source has none)."""
        return [r for r in self.requests or () if not r.warmup]

    @property
    def ok(self) -> list[RequestSample]:
        """Successful measured requests."""
        return [r for r in self.measured if r.ok]

    @property
    def has_requests(self) -> bool:
        return bool(self.requests)


def engine_of_metrics(server_metrics: Mapping[str, Any] | None) -> str | None:
    """The serving engine a scraped ``/metrics`` revealed (``vllm``, ``sglang``, ``llamacpp``)."""
    engine = (server_metrics or {}).get("engine")
    return engine if engine in ("vllm", "sglang", "llamacpp") else None


def stat_of(values: Sequence[float], percentiles: Sequence[float]) -> Stat | None:
    """A :class:`Stat` computed from raw values (NumPy linear interpolation, as vLLM)."""
    if not values:
        return None
    array = np.asarray(values, dtype=np.float64)
    return Stat(
        mean=float(array.mean()),
        median=float(np.median(array)),
        percentiles={p: float(np.percentile(array, p)) for p in percentiles},
        count=len(values),
        std=float(array.std()),
    )


def summary_from_samples(
    samples: Sequence[RequestSample], duration_s: float | None, percentiles: Sequence[float]
) -> Summary:
    """Fill a :class:`Summary` from per-request samples (used when a file quotes too little)."""
    ok = [r for r in samples if r.ok and not r.warmup]
    failed = sum(1 for r in samples if not r.ok and not r.warmup)
    outs = [r.output_tokens for r in ok if r.output_tokens is not None]
    ins = [r.input_tokens for r in ok if r.input_tokens is not None]
    thinking = [r.reasoning_tokens for r in ok if r.reasoning_tokens is not None]
    return Summary(
        completed=len(ok),
        failed=failed,
        duration_s=duration_s,
        ttft_ms=stat_of([r.ttft_s * 1e3 for r in ok if r.ttft_s is not None], percentiles),
        tpot_ms=stat_of([t * 1e3 for r in ok if (t := r.tpot_s) is not None], percentiles),
        itl_ms=stat_of([g * 1e3 for r in ok for g in r.itls_s or ()], percentiles),
        e2el_ms=stat_of([r.e2el_s * 1e3 for r in ok if r.e2el_s is not None], percentiles),
        ttfat_ms=stat_of([r.ttfat_s * 1e3 for r in ok if r.ttfat_s is not None], percentiles),
        mean_reasoning_tokens=float(np.mean(thinking)) if thinking else None,
        mean_input_tokens=float(np.mean(ins)) if ins else None,
        mean_output_tokens=float(np.mean(outs)) if outs else None,
        total_output_tokens=float(sum(outs)) if outs else None,
        output_throughput=sum(outs) / duration_s if outs and duration_s else None,
    )
