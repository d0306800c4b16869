"""The normalised form every gauge check reads, whichever tool measured the data.

A :class:`Dataset` holds per-request samples when the source has them (tunegate records, vLLM
``--save-detailed`` arrays, AIPerf's ``profile_export.jsonl``, GuideLLM's sampled requests),
summary statistics always, and the run's configuration (:class:`RunContext`). All times are in
seconds except the summary statistics, which keep the milliseconds every tool reports.

The checks read the per-request data as columns (:class:`~tunegate.gauge.table.SampleTable`, a
few bytes per request); foreign readers hand over :class:`RequestSample` objects (defined
beside the table, re-exported here) and the dataset turns them into columns once.

A check that needs per-request data and only finds summaries says so (``not_checked``) instead
of guessing; see :mod:`tunegate.gauge.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tunegate.gauge.table import RequestSample, SampleTable
from tunegate.loadgen.lag import LagSummary

__all__ = ["Dataset", "RequestSample", "RooflineLimits", "RunContext", "Stat", "Summary",
           "engine_of_metrics", "stat_of", "summary_from_samples", "summary_from_table"]


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
    ``table``: the per-request data as columns, which is all the checks read; built from
    ``requests`` when only those are given (foreign readers), given alone for tunegate's own
    records (no :class:`RequestSample` per request then: ``requests`` stays ``None``). A copy
    with other ``requests`` (``dataclasses.replace``) must pass ``table=None`` to rebuild it.
    """

    source: str
    summary: Summary
    requests: tuple[RequestSample, ...] | None = None
    context: RunContext = field(default_factory=RunContext)
    requests_are_sample: bool = False
    table: SampleTable | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.table is None:
            # frozen: the one place the table is set, once, from the samples
            object.__setattr__(self, "table", SampleTable.from_samples(self.requests or ()))

    @property
    def rows(self) -> SampleTable:
        """The per-request columns (no rows when the source has only summaries)."""
        assert self.table is not None  # set by __post_init__
        return self.table

    @property
    def has_requests(self) -> bool:
        return len(self.rows) > 0


def engine_of_metrics(server_metrics: Mapping[str, Any] | None) -> str | None:
    """The serving engine a scraped ``/metrics`` revealed (``vllm``, ``sglang``, ``llamacpp``)."""
    engine = (server_metrics or {}).get("engine")
    return engine if engine in ("vllm", "sglang", "llamacpp") else None


def stat_of(values: Sequence[float] | npt.NDArray[np.float64],
            percentiles: Sequence[float]) -> Stat | None:
    """A :class:`Stat` computed from raw values (NumPy linear interpolation, as vLLM)."""
    array = np.asarray(values, dtype=np.float64)
    if not array.size:
        return None
    return Stat(
        mean=float(array.mean()),
        median=float(np.median(array)),
        percentiles={p: float(np.percentile(array, p)) for p in percentiles},
        count=int(array.size),
        std=float(array.std()),
    )


def summary_from_table(table: SampleTable, duration_s: float | None,
                       percentiles: Sequence[float], itls_ms: npt.NDArray[np.float64] | None,
                       ) -> Summary:
    """A :class:`Summary` from per-request columns (successful measured rows).

    ``itls_ms``: the pooled inter-token gaps of those rows in milliseconds, in row order
    (``None``: unknown, so no ITL statistics).
    """
    ok = table.ok_mask
    failed = int(np.count_nonzero(~table.ok & table.measured))

    def of(column: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        values = column[ok]
        return values[~np.isnan(values)]

    outs, ins, thinking = of(table.output_tokens), of(table.input_tokens), \
        of(table.reasoning_tokens)
    total_out = float(outs.sum()) if outs.size else None
    return Summary(
        completed=int(np.count_nonzero(ok)),
        failed=failed,
        duration_s=duration_s,
        ttft_ms=stat_of(of(table.ttft_s) * 1e3, percentiles),
        tpot_ms=stat_of(of(table.tpot_s) * 1e3, percentiles),
        itl_ms=stat_of(itls_ms, percentiles) if itls_ms is not None else None,
        e2el_ms=stat_of(of(table.e2el_s) * 1e3, percentiles),
        ttfat_ms=stat_of(of(table.ttfat_s) * 1e3, percentiles),
        mean_reasoning_tokens=float(np.mean(thinking)) if thinking.size else None,
        mean_input_tokens=float(np.mean(ins)) if ins.size else None,
        mean_output_tokens=float(np.mean(outs)) if outs.size else None,
        total_output_tokens=total_out,
        output_throughput=total_out / duration_s if total_out is not None and duration_s
        else None,
    )


def summary_from_samples(
    samples: Sequence[RequestSample], duration_s: float | None, percentiles: Sequence[float]
) -> Summary:
    """Fill a :class:`Summary` from per-request samples (used when a file quotes too little)."""
    pooled = [np.asarray(r.itls_s, dtype=np.float64) for r in samples
              if r.ok and not r.warmup and r.itls_s]
    itls_ms = np.concatenate(pooled) * 1e3 if pooled else np.zeros(0)
    return summary_from_table(SampleTable.from_samples(samples), duration_s, percentiles,
                              itls_ms)
