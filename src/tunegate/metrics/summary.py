"""Summaries of a run's records under vLLM ``bench serve`` key names, plus tunegate's own.

Latency and rate statistics use complete, non-warm-up requests only; failed requests are counted
(``failed``, ``outcomes``) and never enter a latency figure. Percentiles use NumPy's linear
interpolation (as vLLM does); ``std`` is the population standard deviation (as vLLM does).

The reasoning block (``*_ttfat_ms``, ``total_reasoning_tokens``, ...) appears only when at least
one complete request streamed reasoning text or had its server report reasoning tokens, so the
results of models that do not reason do not grow a block of nulls.

Everything is computed from a :class:`~tunegate.loadgen.record_table.RecordTable` (columns, one
row per request), so a run of a million requests is summarised from its columns without a
Python object per request or per token. The formulas are those of
:mod:`tunegate.metrics.definitions`, vectorised operation for operation, so a summary of
records equals the one the per-record functions would give. The pooled inter-token gaps are
reduced in memory while they fit there, and by exact selection over their file beyond
(:mod:`tunegate.metrics.quantiles`: the same percentiles; mean and std equal to the last digit
or two).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tunegate.loadgen.record_table import NO_COUNT, NO_TIME, OUTCOMES, SOURCES, RecordTable
from tunegate.loadgen.records import CountSource, RequestRecord
from tunegate.metrics.definitions import NS_PER_MS, NS_PER_S
from tunegate.metrics.quantiles import chunked_stats
from tunegate.metrics.slo import Slos

__all__ = [
    "DEFAULT_PERCENTILES",
    "concurrency_profile",
    "peak_in_flight",
    "percentile_key",
    "summarize",
    "summarize_table",
    "table_concurrency",
    "table_duration_ns",
]

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)

_UNKNOWN_SOURCE = SOURCES.index(CountSource.UNKNOWN)


def percentile_key(p: float) -> str:
    """``99`` -> ``p99``, ``99.9`` -> ``p99.9`` (vLLM's spelling)."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


def _stats(
    prefix: str, unit: str, values: np.ndarray, percentiles: Sequence[float]
) -> dict[str, float | None]:
    """``mean_/median_/std_/pNN_`` + ``{prefix}_{unit}`` keys; ``None`` when there is no value."""
    keys = ["mean", "median", "std", *(percentile_key(p) for p in percentiles)]
    if not values.size:
        return {f"{k}_{prefix}_{unit}": None for k in keys}
    array = values.astype(np.float64, copy=False)
    out: dict[str, float | None] = {
        f"mean_{prefix}_{unit}": float(array.mean()),
        f"median_{prefix}_{unit}": float(np.median(array)),
        f"std_{prefix}_{unit}": float(array.std()),
    }
    for p in percentiles:
        out[f"{percentile_key(p)}_{prefix}_{unit}"] = float(np.percentile(array, p))
    return out


def _itl_stats(table: RecordTable, percentiles: Sequence[float]) -> dict[str, float | None]:
    """The pooled ITL keys (ms): in memory while the gaps are, else by chunked selection."""
    to_ms = 1.0 / NS_PER_MS
    if not table.gaps.on_disk:
        return _stats("itl", "ms", table.gaps.array().astype(np.float64) * to_ms, percentiles)
    stats = chunked_stats(table.gaps.chunks, percentiles, scale=to_ms)
    if stats is None:  # pragma: no cover - a file holds at least one gap
        return _stats("itl", "ms", np.zeros(0), percentiles)
    return {"mean_itl_ms": stats.mean, "median_itl_ms": stats.median, "std_itl_ms": stats.std,
            **{f"{percentile_key(p)}_itl_ms": stats.percentiles[p] for p in percentiles}}


def table_duration_ns(table: RecordTable) -> int:
    """:func:`~tunegate.metrics.definitions.benchmark_duration_ns` of the table's rows."""
    measured = ~table.column("warmup")
    if not measured.any():
        return 0
    complete = measured & table.column("success")
    ends = table.column("t_end_ns")[complete if complete.any() else measured]
    return int(ends.max()) - int(table.column("t_send_ns")[measured].min())


def peak_in_flight(starts: np.ndarray, ends: np.ndarray) -> int:
    """Most requests in flight at one instant, from their send and end times.

    The sweep over the sorted (time, +1 send / -1 end) events, ends first at one instant (a
    request that ends when another is sent is not counted with it), as a cumulative sum
    evaluated right after each send, where the peak is reached: after the ``i``-th send in time
    order, ``i + 1`` sends and every end up to and including that instant have happened. 0 for
    no request.
    """
    if not starts.size:
        return 0
    sends = np.sort(starts)
    ended = np.searchsorted(np.sort(ends), sends, side="right")
    del sends
    ended -= np.arange(1, ended.size + 1)  # minus those in flight after each send
    return max(0, -int(ended.min()))


def table_concurrency(table: RecordTable) -> tuple[int, float]:
    """Observed peak and time-averaged number of requests in flight (measured rows).

    Formula: peak = max over time of #{r : t_send <= t < t_end} (a request ending at the instant
    another is sent is not counted with it); mean = sum(t_end - t_send) / duration (Little's law
    L = lambda x W, measured). Unit: requests.
    """
    measured = ~table.column("warmup")
    duration = table_duration_ns(table)
    if not measured.any() or duration <= 0:
        return 0, 0.0
    sends, ends = table.column("t_send_ns")[measured], table.column("t_end_ns")[measured]
    busy = int((ends - sends).sum(dtype=np.int64))
    return peak_in_flight(sends, ends), busy / duration


def concurrency_profile(records: Sequence[RequestRecord]) -> tuple[int, float]:
    """:func:`table_concurrency` of ``records``."""
    return table_concurrency(RecordTable.from_records(records, pool_gaps=False))


def _in_order(codes: np.ndarray, names: Sequence[str]) -> dict[str, int]:
    """How often each code occurs, keyed by name, in order of first occurrence."""
    values, first, counts = np.unique(codes, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return {names[int(values[i])]: int(counts[i]) for i in order}


def _since_send(table: RecordTable, name: str, send: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``column - t_send`` where the time column has a value (0 elsewhere), and where it has."""
    times = table.column(name)
    has = times != NO_TIME
    return np.where(has, times - send, 0), has


def _ms(values: np.ndarray, where: np.ndarray) -> np.ndarray:
    scaled: np.ndarray = values[where].astype(np.float64) * (1.0 / NS_PER_MS)
    return scaled


def _good(table: RecordTable, slos: Slos, latency: _Latency) -> np.ndarray:
    """:meth:`Slos.met_by` of every row, vectorised."""
    good: np.ndarray = table.column("success").copy()
    for name, limit_ms in slos.limits_ms.items():
        bound = limit_ms * NS_PER_MS
        if name == "ttft":
            good &= latency.has_first & (latency.ttft <= bound)
        elif name == "e2el":
            good &= latency.has_last & (latency.e2el <= bound)
        else:  # tpot: a one-token request has none and counts as 0 (as vLLM)
            good &= ((latency.has_tpot & (latency.tpot <= bound))
                     | (~latency.has_tpot & (table.column("output_tokens") == 1)))
    return good


class _Latency:
    """TTFT, E2EL, TTFAT (int ns) and TPOT (float ns) of every row, as
    :mod:`~tunegate.metrics.definitions` computes them record by record."""

    def __init__(self, table: RecordTable) -> None:
        send = table.column("t_send_ns")
        self.ttft, self.has_first = _since_send(table, "t_first_ns", send)
        self.e2el, self.has_last = _since_send(table, "t_last_ns", send)
        self.ttfat, self.has_answer = _since_send(table, "t_first_answer_ns", send)
        del send
        output = table.column("output_tokens")
        self.has_tpot = self.has_first & self.has_last & (output > 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.tpot = np.where(self.has_tpot, (self.e2el - self.ttft) / (output - 1), 0.0)


def _rates(table: RecordTable, latency: _Latency, ok: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefill (input / TTFT), decode (1 / TPOT) and generation (output / E2EL) rates, tok/s."""
    tokens = table.column("input_tokens")
    where = ok & latency.has_first & (latency.ttft > 0) & (tokens > 0)
    prefill = (tokens[where] * NS_PER_S) / latency.ttft[where]
    where = ok & latency.has_tpot & (latency.tpot > 0)
    decode = NS_PER_S / latency.tpot[where]
    tokens = table.column("output_tokens")
    where = ok & latency.has_last & (latency.e2el > 0) & (tokens > 0)
    generation = (tokens[where] * NS_PER_S) / latency.e2el[where]
    return prefill, decode, generation


def _reasoning_block(table: RecordTable, latency: _Latency, ok: np.ndarray,
                     percentiles: Sequence[float]) -> dict[str, Any]:
    """The reasoning block over complete measured requests; ``{}`` when none of them reasoned.

    Keys: ``requests_with_reasoning`` (streamed reasoning text or reported reasoning tokens),
    ``requests_without_answer`` (ended while still reasoning: no TTFAT, so they are left out of
    its distribution and counted here), ``{mean,median,std,pNN}_ttfat_ms``,
    ``total_reasoning_tokens`` and ``total_answer_tokens`` (over requests whose split is known),
    ``reasoning_tokens_unknown`` (requests without one) and ``reasoning_tokens_source``.
    """
    reasoned = ok & (table.column("reasoning_streamed")
                     | (table.column("usage_reasoning_tokens") > 0))
    if not reasoned.any():
        return {}
    sources = table.column("reasoning_tokens_source")
    known = ok & (sources != _UNKNOWN_SOURCE)
    block: dict[str, Any] = {
        "requests_with_reasoning": int(reasoned.sum()),
        "requests_without_answer": int((ok & ~latency.has_answer).sum()),
    }
    block |= _stats("ttfat", "ms", _ms(latency.ttfat, ok & latency.has_answer), percentiles)
    block |= {
        "total_reasoning_tokens": int(np.maximum(table.column("reasoning_tokens")[known], 0)
                                      .sum()),
        "total_answer_tokens": int(np.maximum(table.column("answer_tokens")[known], 0).sum()),
        "reasoning_tokens_unknown": int(ok.sum() - known.sum()),
        "reasoning_tokens_source": _in_order(sources[ok], [s.value for s in SOURCES]),
    }
    return block


def summarize_table(
    table: RecordTable,
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    slos: Slos | None = None,
) -> dict[str, Any]:
    """Summarise a run from its table. Keys: vLLM's (``completed``, ``mean_ttft_ms``, ...) plus
    tunegate's; see :func:`summarize`. Columns are read one figure at a time, so the memory
    it needs is a few arrays of 8 bytes per request, whatever the run's length."""
    measured = ~table.column("warmup")
    ok = measured & table.column("success")
    n_measured, n_ok = int(measured.sum()), int(ok.sum())
    duration_s = table_duration_ns(table) / NS_PER_S
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: 0.0)

    inputs = table.column("input_tokens")
    input_known = ok & (inputs != NO_COUNT)
    total_in = int(inputs[input_known].sum())
    del inputs
    total_out = int(np.maximum(table.column("output_tokens")[ok], 0).sum())
    peak, mean_in_flight = table_concurrency(table)
    outcome_counts = np.bincount(table.column("outcome")[measured], minlength=len(OUTCOMES))

    summary: dict[str, Any] = {
        "num_prompts": n_measured,
        "warmup_requests": len(table) - n_measured,
        "duration": duration_s,
        "completed": n_ok,
        "failed": n_measured - n_ok,
        "outcomes": {o.value: int(c) for o, c in zip(OUTCOMES, outcome_counts, strict=True)},
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "input_tokens_unknown": n_ok - int(input_known.sum()),
        "output_tokens_source": _in_order(table.column("output_tokens_source")[ok],
                                          [s.value for s in SOURCES]),
        "request_throughput": per_s(n_ok),
        "output_throughput": per_s(total_out),
        "total_token_throughput": per_s(total_in + total_out),
        "max_concurrent_requests": peak,
        "mean_concurrent_requests": mean_in_flight,
    }
    latency = _Latency(table)
    summary |= _stats("ttft", "ms", _ms(latency.ttft, ok & latency.has_first), percentiles)
    summary |= _stats("tpot", "ms", latency.tpot[ok & latency.has_tpot] * (1.0 / NS_PER_MS),
                      percentiles)
    summary |= _itl_stats(table, percentiles)
    summary |= _stats("e2el", "ms", _ms(latency.e2el, ok & latency.has_last), percentiles)
    prefill, decode, generation = _rates(table, latency, ok)
    summary |= _stats("prefill", "tok_s", prefill, percentiles)
    summary |= _stats("decode", "tok_s", decode, percentiles)
    summary |= _stats("generation", "tok_s", generation, percentiles)
    del prefill, decode, generation
    summary |= _reasoning_block(table, latency, ok, percentiles)

    if slos is not None and slos.limits_ms:
        good = int((measured & _good(table, slos, latency)).sum())
        summary["request_goodput"] = per_s(good)
        summary["goodput"] = {
            "slos_ms": dict(slos.limits_ms),
            "good_requests": good,
            "good_fraction": good / n_measured if n_measured else 0.0,
            "request_goodput": per_s(good),
        }
    else:
        summary["request_goodput"] = None
    return summary


def summarize(
    records: Sequence[RequestRecord],
    *,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    slos: Slos | None = None,
) -> dict[str, Any]:
    """Summarise a run. Keys: vLLM's (``completed``, ``mean_ttft_ms``, ...) plus tunegate's.

    Args:
        records: Every record of the run, warm-up included (they are filtered here).
        percentiles: Percentiles to report for every distribution.
        slos: Goodput objectives; ``request_goodput`` is ``None`` without them.
    """
    with RecordTable.from_records(records) as table:
        return summarize_table(table, percentiles=percentiles, slos=slos)
