"""vLLM ``bench serve`` result JSON (and tunegate's own result file, which uses its keys).

Keys read (``vllm/benchmarks/serve.py``): ``completed``, ``failed``, ``num_prompts``,
``duration``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``output_throughput``, ``max_concurrency``, ``request_rate`` (``"inf"`` for a closed loop),
``burstiness``, ``ramp_up_strategy``, ``backend``, and ``mean_/median_/std_/pNN_`` +
``ttft|tpot|itl|e2el`` + ``_ms``; with ``--save-detailed`` the arrays of
:mod:`~tunegate.gauge.foreign.flat`. vLLM writes 0 for TTFT statistics when no request
streamed a first token ("ttfts is empty if streaming is not supported").

Two of vLLM's figures are not what their names suggest:

* ``max_concurrent_requests`` counts every request active at any moment of a whole-second
  bucket (``concurrent_requests_per_second[s] += 1`` for each second a request touched), so
  with requests shorter than a second it exceeds ``--max-concurrency`` on ordinary runs. It is
  not an instantaneous peak and is not used as one (tunegate's own files, which write a true
  peak, are read with ``exact_peak=True``).
* The default ``--percentile-metrics`` is ``ttft,tpot,itl``: no E2EL. The mean E2EL is then
  derived (:func:`~tunegate.gauge.foreign.flat.derived_e2el`) and marked as such, so the checks
  that need it run instead of being skipped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tunegate.gauge.dataset import Dataset, RunContext, Summary
from tunegate.gauge.foreign.flat import (
    derived_e2el,
    engine_of,
    quoted_percentiles,
    samples,
    stat_of_keys,
)
from tunegate.gauge.foreign.values import count, error_lines, number

__all__ = ["arrival_of", "read_vllm", "vllm_context", "vllm_summary"]


def _per_request(total: float | None, completed: int) -> float | None:
    return total / completed if total is not None and completed else None


def _failed(doc: Mapping[str, Any], completed: int) -> int | None:
    """``failed``; older vLLM writes none, so failures are ``num_prompts - completed``."""
    failed = count(doc.get("failed"), "failed")
    if failed is not None:
        return failed
    if isinstance(doc.get("errors"), list):
        return sum(1 for e in doc["errors"] if e)
    prompts = count(doc.get("num_prompts"), "num_prompts")
    return max(prompts - completed, 0) if prompts is not None else None


def _error_examples(doc: Mapping[str, Any]) -> tuple[str, ...]:
    errors = doc.get("errors")
    return error_lines(errors) if isinstance(errors, list) else ()


def vllm_summary(doc: Mapping[str, Any], *, exact_peak: bool = False) -> Summary:
    """The summary keys of a vLLM-named result.

    Args:
        doc: The result object.
        exact_peak: ``max_concurrent_requests`` is an instantaneous peak (tunegate's files), not
            vLLM's per-second bucket count.
    """
    completed = count(doc["completed"], "completed") or 0
    total_in = count(doc.get("total_input_tokens"), "total_input_tokens")
    total_out = count(doc.get("total_output_tokens"), "total_output_tokens")
    mean_out = _per_request(total_out, completed)
    ttft, tpot = stat_of_keys(doc, "ttft"), stat_of_keys(doc, "tpot")
    num_prompts = count(doc.get("num_prompts"), "num_prompts")
    return Summary(
        completed=completed,
        failed=_failed(doc, completed),
        duration_s=number(doc.get("duration"), "duration"),
        ttft_ms=ttft, tpot_ms=tpot, itl_ms=stat_of_keys(doc, "itl"),
        # "latency" is E2EL in Lambda Labs' 2024 fork of benchmark_serving.py
        e2el_ms=stat_of_keys(doc, "e2el") or stat_of_keys(doc, "latency")
        or derived_e2el(ttft, tpot, mean_out),
        mean_input_tokens=_per_request(total_in, completed),
        mean_output_tokens=mean_out,
        total_output_tokens=total_out,
        output_throughput=number(doc.get("output_throughput"), "output_throughput"),
        request_throughput=number(doc.get("request_throughput"), "request_throughput"),
        num_prompts=num_prompts,
        max_concurrent_requests=number(doc.get("max_concurrent_requests"),
                                       "max_concurrent_requests") if exact_peak else None,
        error_examples=_error_examples(doc),
    )


def arrival_of(doc: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """The open loop's arrival process and gamma shape, from ``burstiness`` when given."""
    burstiness = number(doc.get("burstiness"), "burstiness")
    if burstiness is None:
        return None, None
    return ("poisson" if burstiness == 1.0 else "gamma"), burstiness


def vllm_context(doc: Mapping[str, Any]) -> RunContext:
    """What a vLLM-named result says about the run's configuration."""
    cap = number(doc.get("max_concurrency"), "max_concurrency", allow_inf=True)
    arrival, burstiness = arrival_of(doc)
    return RunContext(
        max_concurrency=None if cap is None or math.isinf(cap) else count(cap, "max_concurrency"),
        request_rate=number(doc.get("request_rate"), "request_rate", allow_inf=True),
        percentiles=quoted_percentiles(doc),
        engine=engine_of(doc),
        arrival=arrival, burstiness=burstiness,
        rate_schedule=bool(doc.get("ramp_up_strategy")),
    )


def read_vllm(doc: Mapping[str, Any]) -> Dataset:
    """A vLLM ``bench serve`` result as a dataset (per-request data when ``ttfts`` is there)."""
    requests = samples(doc) if doc.get("ttfts") is not None else None
    return Dataset(source="vllm", summary=vllm_summary(doc), requests=requests,
                   context=vllm_context(doc))
