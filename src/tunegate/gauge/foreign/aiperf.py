"""AIPerf exports: ``profile_export_aiperf.json`` (summary) and ``profile_export.jsonl``.

Read from genuine files of every schema seen (``tests/fixtures/aiperf/real``) and AIPerf's source
(``src/aiperf/common/models/export_models.py``, ``src/aiperf/config/phases.py``):

* **pre-1.0** (no ``schema_version``): metric blocks under ``records``, keyed by tags that were
  later renamed (``ttft``, ``ttst``); ``input_config.loadgen`` holds the load;
* **1.0-1.2**: one block per metric at the top level, ``{"unit", "avg", "p50", "p90", "p99",
  "std", "count", ...}``; the load in ``input_config.loadgen`` (``concurrency``,
  ``request_rate``, ``warmup_request_count``);
* **1.3-1.4**: the load in ``input_config.phases[]``: ``{"name", "kind" (1.4 only), "type"
  (``concurrency``, ``poisson``, ``gamma``, ``constant``, ...), "requests", "concurrency"
  | "rate", "exclude_from_results"}``. A phase is a warm-up when its ``kind`` or, in 1.3, its
  ``name`` says so, or it is excluded from the results.

Units are converted, never assumed. AIPerf's ``inter_token_latency`` is per request (E2E - TTFT)
/ (tokens - 1), i.e. tunegate's TPOT; its ``inter_chunk_latency`` is the ITL.
``time_to_first_token`` counts reasoning; ``time_to_first_output_token`` is the first answer
token; ``output_sequence_length`` counts reasoning and answer tokens, ``reasoning_token_count``
the reasoning ones. ``request_count`` counts successful requests; ``completed_request_count``
(1.4) counts failures too. Errors are named in ``error_summary``.

Agentic replay (``--scenario``, ``loadgen.trajectory_start_*``) counts *sessions* against
``--concurrency`` while sub-agent requests run beside them, so the configured concurrency is no
bound on requests in flight there; AIPerf's own ``effective_concurrency`` is kept as the
measured mean in flight.

Each JSONL line is ``{"metadata": {request_start_ns, benchmark_phase | credit_phase |
phase_kind, ...}, "metrics": {name: {"value", "unit"}}, "error"}``; warm-up lines are marked.
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

__all__ = ["error_examples", "is_aiperf_line", "is_aiperf_summary", "read_aiperf"]

_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3, "sec": 1e3}
_PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0)
_ALIASES = {"time_to_first_token": ("time_to_first_token", "ttft"),
            "time_to_second_token": ("time_to_second_token", "ttst"),
            "time_to_first_output_token": ("time_to_first_output_token",
                                           "time_to_first_output")}
_ARRIVAL = {"poisson": "poisson", "gamma": "gamma", "constant": "constant"}
_WARMUP, _PROFILING = "warmup", "profiling"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _blocks(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The metric blocks: top level (1.0+), or under ``records`` (pre-1.0)."""
    records = doc.get("records")
    return records if isinstance(records, Mapping) and "schema_version" not in doc else doc


def _block(blocks: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for alias in _ALIASES.get(name, (name,)):
        block = blocks.get(alias)
        if isinstance(block, Mapping):
            return block
    return {}


def _ms(block: Mapping[str, Any], key: str) -> float | None:
    value = _number(block.get(key))
    if value is None:
        return None
    unit = str(block.get("unit", "ms"))
    if unit not in _TO_MS:
        raise ValueError(f"unknown time unit {unit!r}")
    return value * _TO_MS[unit]


def _stat(blocks: Mapping[str, Any], name: str) -> Stat | None:
    block = _block(blocks, name)
    if _number(block.get("avg")) is None:
        return None  # absent, or AIPerf's empty block (count 0, avg null): no such tokens
    pcts = {p: v for p in _PERCENTILES if (v := _ms(block, f"p{p:g}")) is not None}
    count = _number(block.get("count"))
    return Stat(mean=_ms(block, "avg"), median=pcts.get(50.0), percentiles=pcts,
                count=int(count) if count is not None else None, std=_ms(block, "std"))


def _avg(blocks: Mapping[str, Any], name: str) -> float | None:
    return _number(_block(blocks, name).get("avg"))


def _phase_kind(phase: Mapping[str, Any]) -> str:
    kind = str(phase.get("kind") or phase.get("name") or "").lower()
    if kind == _WARMUP or phase.get("exclude_from_results") is True:
        return _WARMUP
    return _PROFILING if kind in (_PROFILING, "") else kind


def _load(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    """The profiling load (``concurrency``, ``rate``, ``type``) and the warm-up request count."""
    phases = [_map(p) for p in config.get("phases") or ()]
    if phases:
        profiling = [p for p in phases if _phase_kind(p) == _PROFILING]
        warmup = sum(int(_number(p.get("requests")) or 0) for p in phases
                      if _phase_kind(p) == _WARMUP)
        return (profiling[0] if profiling else {}), warmup
    loadgen = _map(config.get("loadgen"))
    rate_mode = str(loadgen.get("request_rate_mode") or "")
    return ({"concurrency": loadgen.get("concurrency"), "rate": loadgen.get("request_rate"),
             "type": rate_mode.split("_")[0] or None},
            int(_number(loadgen.get("warmup_request_count")) or 0))


def _agentic(config: Mapping[str, Any]) -> bool:
    loadgen = _map(config.get("loadgen"))
    return bool(config.get("scenario")) or any(k.startswith("trajectory_start") for k in loadgen)


def _context(doc: Mapping[str, Any]) -> RunContext:
    config = _map(doc.get("input_config"))
    streaming = _map(config.get("endpoint")).get("streaming")
    load, warmup = _load(config)
    cap, rate = _number(load.get("concurrency")), _number(load.get("rate"))
    kind = str(load.get("type") or "")
    return RunContext(
        max_concurrency=int(cap) if cap and not _agentic(config) else None,
        request_rate=rate if rate else None,
        stream_requested=streaming if isinstance(streaming, bool) else None,
        percentiles=(50.0, 90.0, 99.0),  # what AIPerf's console table quotes
        warmup_excluded=warmup,
        arrival=_ARRIVAL.get(kind),
        burstiness=1.0 if kind == "poisson" else None,
    )


def _requested(doc: Mapping[str, Any]) -> tuple[int | None, bool | None]:
    config = _map(doc.get("input_config"))
    extra = _map(_map(config.get("endpoint")).get("extra")) or _map(
        _map(config.get("input")).get("extra_inputs_parsed"))
    osl = None
    for dataset in config.get("datasets") or ():
        spec = _map(_map(_map(dataset).get("prompts")).get("osl"))
        if spec.get("mean") and not spec.get("stddev"):
            osl = int(spec["mean"])
    eos = extra.get("ignore_eos")
    return osl, eos if isinstance(eos, bool) else None


def is_aiperf_summary(doc: Any) -> bool:
    """Whether a parsed document is AIPerf's (or GenAI-Perf's) summary export."""
    if not isinstance(doc, Mapping):
        return False
    blocks = _blocks(doc)
    return "aiperf_version" in doc or any(
        "unit" in _block(blocks, k) for k in ("request_latency", "time_to_first_token"))


def _error_text(entry: Mapping[str, Any]) -> str:
    details = _map(entry.get("error_details")) or entry
    head = " ".join(str(details[k]) for k in ("code", "type") if details.get(k) not in
                    (None, ""))
    message = str(details.get("cause") or details.get("message") or "")
    return f"{head}: {message}"[:300] if message else head[:300]


def error_examples(doc: Mapping[str, Any]) -> tuple[tuple[str, ...], int]:
    """The errors AIPerf's ``error_summary`` names (most frequent first), and their count."""
    entries = [_map(e) for e in doc.get("error_summary") or ()]
    entries.sort(key=lambda e: -int(_number(e.get("count")) or 1))
    failed = sum(int(_number(e.get("count")) or 1) for e in entries)
    return tuple(t for e in entries if (t := _error_text(e)))[:3], failed


def is_aiperf_line(line: Any) -> bool:
    """Whether a parsed JSONL line looks like one of AIPerf's per-request records."""
    return isinstance(line, Mapping) and isinstance(line.get("metadata"), Mapping) and \
        isinstance(line.get("metrics"), Mapping)


def _value(metrics: Mapping[str, Any], name: str, seconds: bool = False) -> Any:
    entry = _block(metrics, name)
    value = entry.get("value")
    if seconds and _number(value) is not None:
        return (_ms(entry, "value") or 0.0) / 1e3
    if seconds and isinstance(value, list):
        factor = _TO_MS[str(entry.get("unit", "ms"))] / 1e3
        return tuple(float(v) * factor for v in value)
    return value


def _phase_of(meta: Mapping[str, Any]) -> str:
    return str(meta.get("phase_kind") or meta.get("benchmark_phase")
               or meta.get("credit_phase") or _PROFILING)


def _samples(lines: Sequence[Mapping[str, Any]], osl: int | None, eos: bool | None,
             stream: bool | None) -> tuple[RequestSample, ...]:
    starts = [_map(line["metadata"]).get("request_start_ns") for line in lines]
    origin = min((s for s in starts if isinstance(s, int)), default=0)
    out = []
    for line in lines:
        meta, metrics = _map(line["metadata"]), _map(line["metrics"])
        start, end = meta.get("request_start_ns"), meta.get("request_end_ns")
        usage = _value(metrics, "usage_completion_tokens")
        osl_value = _value(metrics, "output_sequence_length")
        gaps = _value(metrics, "inter_chunk_latency", seconds=True)
        error = line.get("error")
        out.append(RequestSample(
            ok=not error and not meta.get("was_cancelled"),
            ttft_s=_value(metrics, "time_to_first_token", seconds=True),
            e2el_s=_value(metrics, "request_latency", seconds=True),
            ttfat_s=_value(metrics, "time_to_first_output_token", seconds=True),
            input_tokens=_value(metrics, "input_sequence_length"),
            output_tokens=osl_value if osl_value is not None else usage,
            reasoning_tokens=_value(metrics, "reasoning_token_count"),
            itls_s=gaps if isinstance(gaps, tuple) else None,
            start_s=(start - origin) / 1e9 if isinstance(start, int) else None,
            end_s=(end - origin) / 1e9 if isinstance(end, int) else None,
            error=_error_text(_map(error)) if isinstance(error, Mapping) else
            (str(error)[:300] if error else None),
            stream_requested=stream, chunks=_value(metrics, "http_req_chunks_received"),
            usage_output_tokens=usage,
            tokenizer_output_tokens=_value(metrics, "output_token_count"),
            requested_max_tokens=osl, ignore_eos=eos,
            warmup=_phase_of(meta) == _WARMUP,
        ))
    return tuple(out)


def _completed(blocks: Mapping[str, Any], failed: int) -> int | None:
    successful = _avg(blocks, "request_count")
    if successful is not None:
        return int(successful)
    everything = _avg(blocks, "completed_request_count")  # 1.4: failures included
    return int(everything) - failed if everything is not None else None


def read_aiperf(doc: Mapping[str, Any] | None,
                lines: Sequence[Mapping[str, Any]] | None = None) -> Dataset:
    """AIPerf's summary (and its per-request JSONL, when given) as a dataset."""
    doc = doc or {}
    blocks = _blocks(doc)
    context = _context(doc)
    osl, eos = _requested(doc)
    requests = _samples(lines, osl, eos, context.stream_requested) if lines else None
    duration_ms = _ms(_block(blocks, "benchmark_duration"), "avg")
    examples, named = error_examples(doc)
    failed = int(_avg(blocks, "error_request_count") or named)
    summary = Summary(
        completed=_completed(blocks, failed), failed=failed,
        duration_s=duration_ms / 1e3 if duration_ms else None,
        ttft_ms=_stat(blocks, "time_to_first_token"),
        tpot_ms=_stat(blocks, "inter_token_latency"),
        itl_ms=_stat(blocks, "inter_chunk_latency"), e2el_ms=_stat(blocks, "request_latency"),
        ttfat_ms=_stat(blocks, "time_to_first_output_token"),
        mean_reasoning_tokens=_avg(blocks, "reasoning_token_count"),
        mean_input_tokens=_avg(blocks, "input_sequence_length"),
        mean_output_tokens=_avg(blocks, "output_sequence_length"),
        total_output_tokens=_avg(blocks, "total_osl") or _avg(blocks, "total_output_tokens"),
        output_throughput=_avg(blocks, "output_token_throughput"),
        request_throughput=_avg(blocks, "request_throughput"),
        mean_concurrent_requests=_avg(blocks, "effective_concurrency"),
        error_examples=examples,
    )
    if not doc and requests is not None:
        summary = summary_from_samples(requests, None, context.percentiles)
    return Dataset(source="aiperf", summary=summary, requests=requests, context=context)
