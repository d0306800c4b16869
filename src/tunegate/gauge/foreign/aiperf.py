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
from tunegate.gauge.foreign.values import count, number, seconds_list

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


def _number(value: Any, name: str = "value") -> float | None:
    return number(value, name)


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


def _ms(block: Mapping[str, Any], key: str, name: str = "metric") -> float | None:
    value = _number(block.get(key), f"{name}.{key}")
    if value is None:
        return None
    unit = str(block.get("unit", "ms"))
    if unit not in _TO_MS:
        raise ValueError(f"unknown time unit {unit!r}")
    return value * _TO_MS[unit]


def _stat(blocks: Mapping[str, Any], name: str) -> Stat | None:
    block = _block(blocks, name)
    if _number(block.get("avg"), f"{name}.avg") is None:
        return None  # absent, or AIPerf's empty block (count 0, avg null): no such tokens
    pcts = {p: v for p in _PERCENTILES if (v := _ms(block, f"p{p:g}", name)) is not None}
    return Stat(mean=_ms(block, "avg", name), median=pcts.get(50.0), percentiles=pcts,
                count=count(block.get("count"), f"{name}.count"), std=_ms(block, "std", name))


def _avg(blocks: Mapping[str, Any], name: str) -> float | None:
    return _number(_block(blocks, name).get("avg"), f"{name}.avg")


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
        warmup = sum(count(p.get("requests"), "input_config.phases[].requests") or 0
                     for p in phases if _phase_kind(p) == _WARMUP)
        return (profiling[0] if profiling else {}), warmup
    loadgen = _map(config.get("loadgen"))
    rate_mode = str(loadgen.get("request_rate_mode") or "")
    return ({"concurrency": loadgen.get("concurrency"), "rate": loadgen.get("request_rate"),
             "type": rate_mode.split("_")[0] or None},
            count(loadgen.get("warmup_request_count"),
                  "input_config.loadgen.warmup_request_count") or 0)


def _agentic(config: Mapping[str, Any]) -> bool:
    loadgen = _map(config.get("loadgen"))
    return bool(config.get("scenario")) or any(k.startswith("trajectory_start") for k in loadgen)


def _context(doc: Mapping[str, Any]) -> RunContext:
    config = _map(doc.get("input_config"))
    streaming = _map(config.get("endpoint")).get("streaming")
    load, warmup = _load(config)
    cap = count(load.get("concurrency"), "concurrency")
    rate = _number(load.get("rate"), "rate")
    kind = str(load.get("type") or "")
    return RunContext(
        max_concurrency=cap if cap and not _agentic(config) else None,
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
    counts = [count(e.get("count"), "error_summary[].count") for e in entries]
    counted = sorted(zip(entries, [1 if c is None else c for c in counts], strict=True),
                     key=lambda pair: -pair[1])
    entries = [entry for entry, _ in counted]
    failed = sum(n for _, n in counted)
    return tuple(t for e in entries if (t := _error_text(e)))[:3], failed


def is_aiperf_line(line: Any) -> bool:
    """Whether a parsed JSONL line looks like one of AIPerf's per-request records."""
    return isinstance(line, Mapping) and isinstance(line.get("metadata"), Mapping) and \
        isinstance(line.get("metrics"), Mapping)


def _entry(metrics: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _block(metrics, name)


def _time_s(metrics: Mapping[str, Any], name: str, where: str) -> float | None:
    """One per-request time in seconds, unit converted; checked to be a number."""
    entry = _entry(metrics, name)
    ms = _ms(entry, "value", f"{where}: metrics.{name}")
    return ms / 1e3 if ms is not None else None


def _gaps_s(metrics: Mapping[str, Any], name: str, where: str) -> tuple[float, ...] | None:
    entry = _entry(metrics, name)
    value = entry.get("value")
    if value is None:
        return None
    field = f"{where}: metrics.{name}.value"
    unit = str(entry.get("unit", "ms"))
    if unit not in _TO_MS:
        raise ValueError(f"{field}: unknown time unit {unit!r}")
    factor = _TO_MS[unit] / 1e3
    return tuple((number(v, field) or 0.0) * factor for v in seconds_list(value, field))


def _tokens(metrics: Mapping[str, Any], name: str, where: str) -> int | None:
    return count(_entry(metrics, name).get("value"), f"{where}: metrics.{name}.value")


def _ns(value: Any) -> int | None:
    """A nanosecond timestamp (``true`` is not one, though Python calls it an int)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _phase_of(meta: Mapping[str, Any]) -> str:
    return str(meta.get("phase_kind") or meta.get("benchmark_phase")
               or meta.get("credit_phase") or _PROFILING)


def _samples(lines: Sequence[Mapping[str, Any]], osl: int | None, eos: bool | None,
             stream: bool | None) -> tuple[RequestSample, ...]:
    starts = [_ns(_map(line["metadata"]).get("request_start_ns")) for line in lines]
    origin = min((s for s in starts if s is not None), default=0)
    out = []
    for i, line in enumerate(lines, start=1):
        where = f"line {i}"
        meta, metrics = _map(line["metadata"]), _map(line["metrics"])
        start, end = _ns(meta.get("request_start_ns")), _ns(meta.get("request_end_ns"))
        usage = _tokens(metrics, "usage_completion_tokens", where)
        osl_value = _tokens(metrics, "output_sequence_length", where)
        error = line.get("error")
        out.append(RequestSample(
            ok=not error and not meta.get("was_cancelled"),
            ttft_s=_time_s(metrics, "time_to_first_token", where),
            e2el_s=_time_s(metrics, "request_latency", where),
            ttfat_s=_time_s(metrics, "time_to_first_output_token", where),
            input_tokens=_tokens(metrics, "input_sequence_length", where),
            output_tokens=osl_value if osl_value is not None else usage,
            reasoning_tokens=_tokens(metrics, "reasoning_token_count", where),
            itls_s=_gaps_s(metrics, "inter_chunk_latency", where),
            start_s=(start - origin) / 1e9 if start is not None else None,
            end_s=(end - origin) / 1e9 if end is not None else None,
            error=_error_text(_map(error)) if isinstance(error, Mapping) else
            (str(error)[:300] if error else None),
            stream_requested=stream,
            chunks=_tokens(metrics, "http_req_chunks_received", where),
            usage_output_tokens=usage,
            tokenizer_output_tokens=_tokens(metrics, "output_token_count", where),
            requested_max_tokens=osl, ignore_eos=eos,
            warmup=_phase_of(meta) == _WARMUP,
        ))
    return tuple(out)


def _completed(blocks: Mapping[str, Any], failed: int) -> int | None:
    successful = count(_avg(blocks, "request_count"), "request_count.avg")
    if successful is not None:
        return successful
    everything = count(_avg(blocks, "completed_request_count"), "completed_request_count.avg")
    return max(everything - failed, 0) if everything is not None else None  # 1.4: incl. failed


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
    failed = count(_avg(blocks, "error_request_count"), "error_request_count.avg") or named
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
