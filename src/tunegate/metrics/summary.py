"""Summaries of a run's records under vLLM ``bench serve`` key names, plus tunegate's own.

Latency and rate statistics use complete, non-warm-up requests only; failed requests are counted
(``failed``, ``outcomes``) and never enter a latency figure. Percentiles use NumPy's linear
interpolation (as vLLM does); ``std`` is the population standard deviation (as vLLM does).

The reasoning block (``*_ttfat_ms``, ``total_reasoning_tokens``, ...) appears only when at least
one complete request streamed reasoning text or had its server report reasoning tokens, so the
results of models that do not reason do not grow a block of nulls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.metrics.definitions import (
    NS_PER_MS,
    NS_PER_S,
    benchmark_duration_ns,
    decode_rate,
    e2el_ns,
    generation_rate,
    itl_ns,
    prefill_rate,
    tpot_ns,
    ttfat_ns,
    ttft_ns,
)
from tunegate.metrics.slo import Slos

__all__ = [
    "DEFAULT_PERCENTILES",
    "concurrency_profile",
    "percentile_key",
    "reasoning_summary",
    "summarize",
]

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)


def percentile_key(p: float) -> str:
    """``99`` -> ``p99``, ``99.9`` -> ``p99.9`` (vLLM's spelling)."""
    return f"p{int(p)}" if float(p).is_integer() else f"p{p:g}"


def _stats(
    prefix: str, unit: str, values: Sequence[float], percentiles: Sequence[float]
) -> dict[str, float | None]:
    """``mean_/median_/std_/pNN_`` + ``{prefix}_{unit}`` keys; ``None`` when there is no value."""
    keys = ["mean", "median", "std", *(percentile_key(p) for p in percentiles)]
    if not values:
        return {f"{k}_{prefix}_{unit}": None for k in keys}
    array = np.asarray(values, dtype=np.float64)
    out: dict[str, float | None] = {
        f"mean_{prefix}_{unit}": float(array.mean()),
        f"median_{prefix}_{unit}": float(np.median(array)),
        f"std_{prefix}_{unit}": float(array.std()),
    }
    for p in percentiles:
        out[f"{percentile_key(p)}_{prefix}_{unit}"] = float(np.percentile(array, p))
    return out


def _collect(
    records: Sequence[RequestRecord], metric: Callable[[RequestRecord], float | int | None]
) -> list[float]:
    values = (metric(r) for r in records)
    return [float(v) for v in values if v is not None]


def concurrency_profile(records: Sequence[RequestRecord]) -> tuple[int, float]:
    """Observed peak and time-averaged number of requests in flight.

    Formula: peak = max over time of #{r : t_send <= t < t_end}; mean = sum(t_end - t_send) /
    duration (Little's law L = lambda x W, measured). Unit: requests.
    """
    measured = [r for r in records if not r.warmup]
    duration = benchmark_duration_ns(measured)
    if not measured or duration <= 0:
        return 0, 0.0
    edges = sorted([(r.t_send_ns, 1) for r in measured] + [(r.t_end_ns, -1) for r in measured])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    busy = sum(r.t_end_ns - r.t_send_ns for r in measured)
    return peak, busy / duration


def _reasoned(record: RequestRecord) -> bool:
    return record.reasoning_streamed or bool(record.usage_reasoning_tokens)


def reasoning_summary(
    ok: Sequence[RequestRecord], percentiles: Sequence[float] = DEFAULT_PERCENTILES
) -> dict[str, Any]:
    """The reasoning block over complete measured requests; ``{}`` when none of them reasoned.

    Keys: ``requests_with_reasoning`` (streamed reasoning text or reported reasoning tokens),
    ``requests_without_answer`` (ended while still reasoning: no TTFAT, so they are left out of
    its distribution and counted here), ``{mean,median,std,pNN}_ttfat_ms``,
    ``total_reasoning_tokens`` and ``total_answer_tokens`` (over requests whose split is known),
    ``reasoning_tokens_unknown`` (requests without one) and ``reasoning_tokens_source``.
    """
    if not any(_reasoned(r) for r in ok):
        return {}
    known = [r for r in ok if r.reasoning_tokens_source is not CountSource.UNKNOWN]
    to_ms = 1.0 / NS_PER_MS
    block: dict[str, Any] = {
        "requests_with_reasoning": sum(1 for r in ok if _reasoned(r)),
        "requests_without_answer": sum(1 for r in ok if r.t_first_answer_ns is None),
    }
    block |= _stats("ttfat", "ms", [v * to_ms for v in _collect(ok, ttfat_ns)], percentiles)
    block |= {
        "total_reasoning_tokens": int(sum(r.reasoning_tokens or 0 for r in known)),
        "total_answer_tokens": int(sum(r.answer_tokens or 0 for r in known)),
        "reasoning_tokens_unknown": len(ok) - len(known),
        "reasoning_tokens_source": dict(Counter(r.reasoning_tokens_source.value for r in ok)),
    }
    return block


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
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.outcome.is_success]
    duration_s = benchmark_duration_ns(measured) / NS_PER_S
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: 0.0)

    input_known = [r.input_tokens for r in ok if r.input_tokens is not None]
    total_in = int(sum(input_known))
    total_out = int(sum(r.output_tokens or 0 for r in ok))
    peak, mean_in_flight = concurrency_profile(records)

    summary: dict[str, Any] = {
        "num_prompts": len(measured),
        "warmup_requests": len(records) - len(measured),
        "duration": duration_s,
        "completed": len(ok),
        "failed": len(measured) - len(ok),
        "outcomes": {o.value: 0 for o in Outcome}
        | dict(Counter(r.outcome.value for r in measured)),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "input_tokens_unknown": len(ok) - len(input_known),
        "output_tokens_source": dict(Counter(r.output_tokens_source.value for r in ok)),
        "request_throughput": per_s(len(ok)),
        "output_throughput": per_s(total_out),
        "total_token_throughput": per_s(total_in + total_out),
        "max_concurrent_requests": peak,
        "mean_concurrent_requests": mean_in_flight,
    }
    to_ms = 1.0 / NS_PER_MS
    summary |= _stats("ttft", "ms", [v * to_ms for v in _collect(ok, ttft_ns)], percentiles)
    summary |= _stats("tpot", "ms", [v * to_ms for v in _collect(ok, tpot_ns)], percentiles)
    itls = [gap * to_ms for r in ok for gap in itl_ns(r)]
    summary |= _stats("itl", "ms", itls, percentiles)
    summary |= _stats("e2el", "ms", [v * to_ms for v in _collect(ok, e2el_ns)], percentiles)
    summary |= _stats("prefill", "tok_s", _collect(ok, prefill_rate), percentiles)
    summary |= _stats("decode", "tok_s", _collect(ok, decode_rate), percentiles)
    summary |= _stats("generation", "tok_s", _collect(ok, generation_rate), percentiles)
    summary |= reasoning_summary(ok, percentiles)

    if slos is not None and slos.limits_ms:
        good = sum(1 for r in measured if slos.met_by(r))
        summary["request_goodput"] = per_s(good)
        summary["goodput"] = {
            "slos_ms": dict(slos.limits_ms),
            "good_requests": good,
            "good_fraction": good / len(measured) if measured else 0.0,
            "request_goodput": per_s(good),
        }
    else:
        summary["request_goodput"] = None
    return summary
