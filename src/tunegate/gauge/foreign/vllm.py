"""vLLM ``bench serve`` result JSON (and tunegate's own result file, which uses its keys).

Keys read (``vllm/benchmarks/serve.py``): ``completed``, ``failed``, ``duration``,
``total_input_tokens``, ``total_output_tokens``, ``output_throughput``, ``max_concurrency``,
``request_rate`` (``"inf"`` for a closed loop), ``max_concurrent_requests``, and
``mean_/median_/std_/pNN_`` + ``ttft|tpot|itl|e2el`` + ``_ms``. With ``--save-detailed``:
``input_lens``, ``output_lens``, ``ttfts`` and ``itls`` (seconds), ``errors`` ("" = success), and
in newer versions ``latencies`` and ``start_times``. Without ``latencies`` a request's E2EL is
``ttft + sum(itls)``, as vLLM's own timeline plot computes it. vLLM writes 0 for TTFT statistics
when no request streamed a first token ("ttfts is empty if streaming is not supported").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.gauge.dataset import Dataset, RequestSample, RunContext, Stat, Summary

__all__ = ["quoted_percentiles", "read_vllm", "vllm_context", "vllm_stat", "vllm_summary"]

_PCT = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return float("inf")
    raise ValueError(f"expected a number, got {value!r}")


def quoted_percentiles(doc: Mapping[str, Any]) -> tuple[float, ...]:
    """Percentiles the file quotes (``p99_ttft_ms`` -> 99.0)."""
    found = {float(m.group(1)) for key in doc if (m := _PCT.match(key))}
    return tuple(sorted(found))


def vllm_stat(doc: Mapping[str, Any], metric: str) -> Stat | None:
    """``mean_/median_/pNN_{metric}_ms`` as a :class:`Stat` (``None`` without a mean)."""
    mean = _num(doc.get(f"mean_{metric}_ms"))
    if mean is None:
        return None
    pcts: dict[float, float] = {}
    for key, value in doc.items():
        m = _PCT.match(key)
        if m and m.group(2) == metric and (v := _num(value)) is not None:
            pcts[float(m.group(1))] = v
    return Stat(mean=mean, median=_num(doc.get(f"median_{metric}_ms")), percentiles=pcts)


def vllm_summary(doc: Mapping[str, Any]) -> Summary:
    """The summary keys of a vLLM-named result."""
    completed = int(_num(doc["completed"]) or 0)
    failed = doc.get("failed")
    if failed is None and isinstance(doc.get("errors"), list):
        failed = sum(1 for e in doc["errors"] if e)
    total_in, total_out = _num(doc.get("total_input_tokens")), _num(doc.get("total_output_tokens"))
    return Summary(
        completed=completed,
        failed=int(failed) if failed is not None else None,
        duration_s=_num(doc.get("duration")),
        ttft_ms=vllm_stat(doc, "ttft"), tpot_ms=vllm_stat(doc, "tpot"),
        itl_ms=vllm_stat(doc, "itl"), e2el_ms=vllm_stat(doc, "e2el"),
        mean_input_tokens=total_in / completed if total_in is not None and completed else None,
        mean_output_tokens=total_out / completed if total_out is not None and completed else None,
        total_output_tokens=total_out,
        output_throughput=_num(doc.get("output_throughput")),
        max_concurrent_requests=_num(doc.get("max_concurrent_requests")),
    )


def vllm_context(doc: Mapping[str, Any]) -> RunContext:
    """What a vLLM-named result says about the run's configuration."""
    cap = doc.get("max_concurrency")
    return RunContext(
        max_concurrency=int(cap) if cap is not None else None,
        request_rate=_num(doc.get("request_rate")),
        percentiles=quoted_percentiles(doc),
    )


def _samples(doc: Mapping[str, Any]) -> tuple[RequestSample, ...]:
    ttfts: Sequence[Any] = doc["ttfts"]
    n = len(ttfts)

    def column(name: str) -> Sequence[Any]:
        values = doc.get(name)
        if values is None:
            return [None] * n
        if not isinstance(values, list) or len(values) != n:
            raise ValueError(f"'{name}' has {len(values) if isinstance(values, list) else 'no'} "
                             f"entries, 'ttfts' has {n}")
        return values

    ins, outs, itls = column("input_lens"), column("output_lens"), column("itls")
    errors, lats, starts = column("errors"), column("latencies"), column("start_times")
    out: list[RequestSample] = []
    for i in range(n):
        ok = not errors[i]
        ttft = _num(ttfts[i])
        gaps = tuple(float(g) for g in itls[i]) if isinstance(itls[i], list) else None
        e2el = _num(lats[i])
        if e2el is None and ttft is not None and gaps is not None:
            e2el = ttft + sum(gaps)
        start = _num(starts[i])
        out.append(RequestSample(
            ok=ok, ttft_s=ttft if ok else None, e2el_s=e2el if ok else None,
            input_tokens=int(ins[i]) if ins[i] is not None else None,
            output_tokens=int(outs[i]) if outs[i] is not None and ok else None,
            itls_s=gaps, start_s=start,
            end_s=start + e2el if start is not None and e2el is not None else None,
            error=str(errors[i]) if errors[i] else None,
            content_events=len(gaps) + 1 if gaps is not None and ok and ttft else None,
        ))
    return tuple(out)


def read_vllm(doc: Mapping[str, Any]) -> Dataset:
    """A vLLM ``bench serve`` result as a dataset (per-request data when ``ttfts`` is there)."""
    requests = _samples(doc) if isinstance(doc.get("ttfts"), list) else None
    return Dataset(source="vllm", summary=vllm_summary(doc), requests=requests,
                   context=vllm_context(doc))
