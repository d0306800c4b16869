"""AIPerf exports: ``profile_export_aiperf.json`` (summary) and ``profile_export.jsonl``.

Checked against AIPerf 0.13 (schema_version 1.4, ``tests/fixtures/aiperf``). The summary holds
one block per metric, ``{"unit": "ms", "avg", "p50", "p90", "p99", "count", ...}``; units are
converted, never assumed. AIPerf's ``inter_token_latency`` is per request (E2E - TTFT) /
(tokens - 1), i.e. tunegate's (and vLLM's) TPOT; its ``inter_chunk_latency`` is the ITL. Each
JSONL line is ``{"metadata": {...request_start_ns, benchmark_phase...}, "metrics": {name:
{"value", "unit"}}}``; ``http_req_chunks_received`` counts transport chunks of any kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.gauge.dataset import (
    Dataset,
    RequestSample,
    RunContext,
    Stat,
    Summary,
    summary_from_samples,
)

__all__ = ["is_aiperf_line", "read_aiperf"]

_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}
_PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0)


def _ms(block: Mapping[str, Any], key: str) -> float | None:
    value = block.get(key)
    if not isinstance(value, int | float):
        return None
    unit = str(block.get("unit", "ms"))
    if unit not in _TO_MS:
        raise ValueError(f"unknown time unit {unit!r}")
    return float(value) * _TO_MS[unit]


def _stat(doc: Mapping[str, Any], name: str) -> Stat | None:
    block = doc.get(name)
    if not isinstance(block, Mapping) or "avg" not in block:
        return None
    pcts = {p: v for p in _PERCENTILES if (v := _ms(block, f"p{p:g}")) is not None}
    count = block.get("count")
    return Stat(mean=_ms(block, "avg"), median=pcts.get(50.0), percentiles=pcts,
                count=int(count) if isinstance(count, int | float) else None)


def _avg(doc: Mapping[str, Any], name: str) -> float | None:
    block = doc.get(name)
    value = block.get("avg") if isinstance(block, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def _context(doc: Mapping[str, Any]) -> RunContext:
    config = doc.get("input_config") or {}
    endpoint = config.get("endpoint") or {}
    phases = config.get("phases") or []
    profiling = [p for p in phases if p.get("kind") == "profiling"]
    warmup = sum(int(p.get("requests") or 0) for p in phases if p.get("kind") == "warmup")
    loadgen = config.get("loadgen") or {}  # older schema
    cap = next((p.get("concurrency") for p in profiling if p.get("concurrency")),
               loadgen.get("concurrency"))
    rate = next((p.get("request_rate") for p in profiling if p.get("request_rate")),
                loadgen.get("request_rate"))
    streaming = endpoint.get("streaming")
    return RunContext(
        max_concurrency=int(cap) if cap else None,
        request_rate=float(rate) if rate else None,
        stream_requested=streaming if isinstance(streaming, bool) else None,
        percentiles=(50.0, 90.0, 99.0),  # what AIPerf's console table quotes
        warmup_excluded=warmup,
    )


def _requested(doc: Mapping[str, Any]) -> tuple[int | None, bool | None]:
    config = doc.get("input_config") or {}
    extra = (config.get("endpoint") or {}).get("extra") or {}
    osl = None
    for dataset in config.get("datasets") or []:
        spec = ((dataset.get("prompts") or {}).get("osl")) or {}
        if spec.get("mean") and not spec.get("stddev"):
            osl = int(spec["mean"])
    eos = extra.get("ignore_eos")
    return osl, eos if isinstance(eos, bool) else None


def is_aiperf_line(line: Any) -> bool:
    """Whether a parsed JSONL line looks like one of AIPerf's per-request records."""
    return isinstance(line, Mapping) and isinstance(line.get("metadata"), Mapping) and \
        isinstance(line.get("metrics"), Mapping)


def _value(metrics: Mapping[str, Any], name: str, seconds: bool = False) -> Any:
    entry = metrics.get(name)
    if not isinstance(entry, Mapping):
        return None
    value = entry.get("value")
    if seconds and isinstance(value, int | float):
        return _ms(entry, "value") / 1e3  # type: ignore[operator]
    if seconds and isinstance(value, list):
        factor = _TO_MS[str(entry.get("unit", "ms"))] / 1e3
        return tuple(float(v) * factor for v in value)
    return value


def _samples(lines: Sequence[Mapping[str, Any]], osl: int | None, eos: bool | None,
             stream: bool | None) -> tuple[RequestSample, ...]:
    starts = [line["metadata"].get("request_start_ns") for line in lines]
    origin = min((s for s in starts if isinstance(s, int)), default=0)
    out = []
    for line in lines:
        meta, metrics = line["metadata"], line["metrics"]
        start, end = meta.get("request_start_ns"), meta.get("request_end_ns")
        usage = _value(metrics, "usage_completion_tokens")
        osl_value = _value(metrics, "output_sequence_length")
        gaps = _value(metrics, "inter_chunk_latency", seconds=True)
        out.append(RequestSample(
            ok=not line.get("error") and not meta.get("was_cancelled"),
            ttft_s=_value(metrics, "time_to_first_token", seconds=True),
            e2el_s=_value(metrics, "request_latency", seconds=True),
            input_tokens=_value(metrics, "input_sequence_length"),
            output_tokens=osl_value if osl_value is not None else usage,
            itls_s=gaps if isinstance(gaps, tuple) else None,
            start_s=(start - origin) / 1e9 if isinstance(start, int) else None,
            end_s=(end - origin) / 1e9 if isinstance(end, int) else None,
            error=str(line["error"]) if line.get("error") else None,
            stream_requested=stream, chunks=_value(metrics, "http_req_chunks_received"),
            usage_output_tokens=usage,
            tokenizer_output_tokens=_value(metrics, "output_token_count"),
            requested_max_tokens=osl, ignore_eos=eos,
            warmup=meta.get("benchmark_phase") == "warmup",
        ))
    return tuple(out)


def read_aiperf(doc: Mapping[str, Any] | None,
                lines: Sequence[Mapping[str, Any]] | None = None) -> Dataset:
    """AIPerf's summary (and its per-request JSONL, when given) as a dataset."""
    doc = doc or {}
    context = _context(doc)
    osl, eos = _requested(doc)
    requests = _samples(lines, osl, eos, context.stream_requested) if lines else None
    duration_block = doc.get("benchmark_duration")
    duration = None
    if isinstance(duration_block, Mapping):
        duration = (_ms(duration_block, "avg") or 0.0) / 1e3 or None
    errors = doc.get("error_summary") or []
    failed = sum(int(e.get("count", 1)) for e in errors if isinstance(e, Mapping))
    completed = _avg(doc, "completed_request_count") or _avg(doc, "request_count")
    summary = Summary(
        completed=int(completed) if completed is not None else None, failed=failed,
        duration_s=duration,
        ttft_ms=_stat(doc, "time_to_first_token"), tpot_ms=_stat(doc, "inter_token_latency"),
        itl_ms=_stat(doc, "inter_chunk_latency"), e2el_ms=_stat(doc, "request_latency"),
        mean_input_tokens=_avg(doc, "input_sequence_length"),
        mean_output_tokens=_avg(doc, "output_sequence_length"),
        total_output_tokens=_avg(doc, "total_output_tokens"),
        output_throughput=_avg(doc, "output_token_throughput"),
    )
    if not doc and requests is not None:
        summary = summary_from_samples(requests, None, context.percentiles)
    return Dataset(source="aiperf", summary=summary, requests=requests, context=context)
