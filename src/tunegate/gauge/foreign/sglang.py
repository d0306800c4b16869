"""SGLang ``bench_serving`` results (``python -m sglang.bench_serving --output-file F``).

SGLang appends one JSON object per run to its output file (one line per point of a sweep); the
object is flat, like vLLM's, but with SGLang's names (``python/sglang/bench_serving.py``):

* ``{mean,median,std,p99}_e2e_latency_ms`` for the end-to-end latency (vLLM: ``*_e2el_ms``);
  ``mean/median/std/p99`` (and in newer versions ``p90``/``p95``) for ``ttft``, ``tpot``,
  ``itl``;
* ``concurrency``: the *measured* mean number of requests in flight, sum of E2E latencies /
  duration (Little's L), beside the configured ``max_concurrency`` (``null`` when unset);
* ``request_rate``: ``Infinity`` (bare, as Python's ``json.dumps`` writes it) for "all at once";
* ``total_output_tokens`` (the server's usage counts, or the requested length when the server
  sent none) and ``total_output_tokens_retokenized`` (the client re-tokenising the text);
* ``backend`` (``sglang``, ``sglang-oai``, ``vllm``, ...), ``server_info`` (the server's
  arguments and internal state, when the backend is SGLang), ``accept_length``;
* with ``--output-details``: vLLM's per-request arrays (:mod:`~tunegate.gauge.foreign.flat`).

SGLang's TTFT for a non-streaming request (``--disable-stream``) is the whole latency, so such a
run has TTFT == E2E latency for every request: the gauge rejects it, as it rejects vLLM's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tunegate.gauge.dataset import Dataset, RunContext, Summary
from tunegate.gauge.foreign.flat import engine_of, quoted_percentiles, samples, stat_of_keys
from tunegate.gauge.foreign.values import count, error_lines, number

__all__ = ["is_sglang", "read_sglang"]

E2E = "e2e_latency"


def is_sglang(doc: Mapping[str, Any]) -> bool:
    """An SGLang ``bench_serving`` result: SGLang's E2E key names or its retokenized count."""
    return "completed" in doc and (
        any(f"{s}_{E2E}_ms" in doc for s in ("mean", "median"))
        or "total_output_tokens_retokenized" in doc)


def _summary(doc: Mapping[str, Any]) -> Summary:
    completed = count(doc["completed"], "completed") or 0
    total_in = count(doc.get("total_input_tokens"), "total_input_tokens")
    total_out = count(doc.get("total_output_tokens"), "total_output_tokens")
    errors = doc.get("errors")
    failed = sum(1 for e in errors if e) if isinstance(errors, list) else None
    return Summary(
        completed=completed,
        failed=failed,
        duration_s=number(doc.get("duration"), "duration"),
        ttft_ms=stat_of_keys(doc, "ttft"), tpot_ms=stat_of_keys(doc, "tpot"),
        itl_ms=stat_of_keys(doc, "itl"), e2el_ms=stat_of_keys(doc, E2E),
        mean_input_tokens=total_in / completed if total_in is not None and completed else None,
        mean_output_tokens=total_out / completed if total_out is not None and completed
        else None,
        total_output_tokens=total_out,
        total_output_tokens_retokenized=count(doc.get("total_output_tokens_retokenized"),
                                              "total_output_tokens_retokenized"),
        output_throughput=number(doc.get("output_throughput"), "output_throughput"),
        request_throughput=number(doc.get("request_throughput"), "request_throughput"),
        mean_concurrent_requests=number(doc.get("concurrency"), "concurrency"),
        error_examples=error_lines(errors) if isinstance(errors, list) else (),
    )


def _context(doc: Mapping[str, Any]) -> RunContext:
    cap = number(doc.get("max_concurrency"), "max_concurrency", allow_inf=True)
    return RunContext(
        max_concurrency=None if cap is None or math.isinf(cap) else count(cap, "max_concurrency"),
        request_rate=number(doc.get("request_rate"), "request_rate", allow_inf=True),
        percentiles=quoted_percentiles(doc),
        engine=engine_of(doc),
        arrival="poisson",  # bench_serving draws exponential gaps (no burstiness option)
        burstiness=1.0,
    )


def read_sglang(doc: Mapping[str, Any]) -> Dataset:
    """One SGLang result object as a dataset (per-request arrays when it has them)."""
    requests = samples(doc) if doc.get("ttfts") is not None else None
    return Dataset(source="sglang", summary=_summary(doc), requests=requests,
                   context=_context(doc))
