"""GuideLLM reports (``benchmarks.json`` or ``.yaml``), in all three of its schemas.

GuideLLM changed its report layout twice (vllm-project/guidellm at v0.3.1, v0.5.0, v0.7.0):

* **A** (0.1-0.3): ``{"benchmarks": [...]}``; each benchmark has ``args.strategy``,
  ``request_totals``, ``run_stats`` and ``requests`` whose items carry epoch ``start_time``,
  ``first_token_time``, ``last_token_time`` and ``end_time``;
* **B** (0.4-0.6): ``metadata``, ``args`` and benchmarks with ``config.strategy``,
  ``scheduler_metrics``, ``metrics.request_totals`` and request items with
  ``request_start_time`` and ``info.timings``;
* **C** (0.7+): as B under ``metadata.version`` 2 with a run-level ``config.spec``, adding
  ``time_to_first_output_token_ms`` (the first answer token after any reasoning).

Every metric is a ``StatusDistributionSummary`` (``successful``/``errored``/``incomplete``/
``total``, each with ``mean``, ``median``, ``std_dev``, ``count``, ``percentiles``); the
``successful`` one is read. ``request_latency`` is in seconds, the rest in ms. GuideLLM's
``time_per_output_token_ms`` includes the first token (B/C) or divides by every token (A), so
its ``inter_token_latency_ms`` is tunegate's TPOT and is the one read. ``incomplete`` requests
were cut off when the run stopped: neither completed nor failed.

B and C compute ``duration`` as the *planned* measurement window (``measure_end_time -
measure_start_time``), which runs past the end of a run stopped early by ``max_requests``
(a negative ``cooldown_duration`` says so): the window is cut at the run's real end, or every
rate (and Little's law) would be computed over idle time that never happened.

The ``requests`` lists are samples (GuideLLM keeps some per status, warm-up included), so they
serve the per-request checks but never counts or arrival rates (``requests_are_sample``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.gauge.dataset import Dataset, RequestSample, RunContext, Stat, Summary

__all__ = ["is_guidellm", "read_guidellm"]

_PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
_ARRIVAL = {"poisson": "poisson", "constant": "constant"}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _dist(metrics: Mapping[str, Any], name: str, status: str = "successful") -> Mapping[str, Any]:
    return _map(_map(metrics.get(name)).get(status))


def _stat(metrics: Mapping[str, Any], name: str, scale: float = 1.0) -> Stat | None:
    dist = _dist(metrics, name)
    if not dist or not dist.get("count") or _float(dist.get("mean")) is None:
        return None
    pct = _map(dist.get("percentiles"))
    std = _float(dist.get("std_dev"))
    return Stat(
        mean=float(dist["mean"]) * scale,
        median=float(dist["median"]) * scale if _float(dist.get("median")) is not None else None,
        percentiles={p: float(pct[k]) * scale for k, p in _PCTS.items()
                     if _float(pct.get(k)) is not None},
        count=int(dist["count"]), std=std * scale if std is not None else None,
    )


def _strategy(bench: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(bench.get("config")).get("strategy")) or _map(
        _map(bench.get("args")).get("strategy"))


def _cap(strategy: Mapping[str, Any]) -> int | None:
    kind = strategy.get("type_")
    cap = {"concurrent": strategy.get("streams"), "synchronous": 1}.get(
        str(kind), strategy.get("max_concurrency"))
    return int(cap) if isinstance(cap, int | float) and cap > 0 else None


def _warmup(bench: Mapping[str, Any]) -> bool:
    config, args = _map(bench.get("config")), _map(bench.get("args"))
    warm = _map(config.get("warmup"))
    return bool(warm.get("percent") or warm.get("value") or args.get("warmup_number")
                or args.get("warmup_duration"))


def _streaming(doc: Mapping[str, Any], bench: Mapping[str, Any]) -> bool | None:
    backend = _map(_map(_map(doc.get("config")).get("spec")).get("backend")) or _map(
        _map(bench.get("config")).get("backend"))
    stream = backend.get("stream")
    if isinstance(stream, bool):
        return stream
    for item in _map(bench.get("requests")).get("successful") or ():
        raw = _map(item).get("request_args")
        if isinstance(raw, str):
            try:
                value = json.loads(raw).get("stream")
            except (ValueError, AttributeError):
                return None
            return value if isinstance(value, bool) else None
    return None


def _context(doc: Mapping[str, Any], bench: Mapping[str, Any]) -> RunContext:
    strategy = _strategy(bench)
    kind = str(strategy.get("type_"))
    return RunContext(
        max_concurrency=_cap(strategy),
        request_rate=_float(strategy.get("rate")),
        stream_requested=_streaming(doc, bench),
        percentiles=tuple(_PCTS.values()),
        warmup_excluded=1 if _warmup(bench) else 0,
        arrival=_ARRIVAL.get(kind),
        burstiness=1.0 if kind == "poisson" else None,
        rate_schedule=bool(_float(strategy.get("rampup_duration"))),
    )


def _duration(bench: Mapping[str, Any]) -> float | None:
    """The measured span: the planned window cut at the run's real end (schemas B and C)."""
    planned = _float(bench.get("duration"))
    sched = _map(bench.get("scheduler_metrics"))
    start = _float(sched.get("measure_start_time"))
    ends = [t for t in (_float(sched.get("request_end_time")), _float(sched.get("end_time")))
            if t is not None]
    if planned is None or start is None or not ends:
        return planned
    return min(planned, max(ends) - start)


def _seconds(value: Any, origin: float) -> float | None:
    number = _float(value)
    return number - origin if number is not None else None


def _sample(req: Mapping[str, Any], ok: bool, origin: float) -> RequestSample:
    info = _map(req.get("info"))
    timings = _map(info.get("timings"))
    start = _float(req.get("start_time")) or _float(req.get("request_start_time")) or _float(
        timings.get("request_start"))
    last = _float(req.get("last_token_time")) or _float(timings.get("last_token_iteration"))
    ttft, latency = _float(req.get("time_to_first_token_ms")), _float(req.get("request_latency"))
    ttfat = _float(req.get("time_to_first_output_token_ms"))
    iterations = timings.get("token_iterations")
    error = req.get("error") or info.get("error")
    return RequestSample(
        ok=ok,
        ttft_s=ttft / 1e3 if ttft is not None else None,
        e2el_s=last - start if last is not None and start is not None else latency,
        ttfat_s=ttfat / 1e3 if ttfat is not None else None,
        input_tokens=req.get("prompt_tokens"), output_tokens=req.get("output_tokens"),
        start_s=start - origin if start is not None else None,
        end_s=_seconds(req.get("end_time") or req.get("request_end_time"), origin),
        error=str(error)[:300] if error else None,
        content_events=int(iterations) if isinstance(iterations, int) else None,
    )


def _samples(bench: Mapping[str, Any]) -> tuple[RequestSample, ...] | None:
    requests = _map(bench.get("requests"))
    ok = [_map(r) for r in requests.get("successful") or ()]
    errored = [_map(r) for r in requests.get("errored") or ()]
    starts = [_float(r.get("start_time")) or _float(r.get("request_start_time"))
              for r in [*ok, *errored]]
    origin = min((s for s in starts if s is not None), default=0.0)
    samples = [_sample(r, True, origin) for r in ok] + [_sample(r, False, origin)
                                                         for r in errored]
    return tuple(samples) or None


def _totals(bench: Mapping[str, Any], metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(metrics.get("request_totals")) or _map(bench.get("request_totals"))


def _errors(bench: Mapping[str, Any]) -> tuple[str, ...]:
    errored = _map(bench.get("requests")).get("errored") or ()
    found = [str(_map(r).get("error") or _map(_map(r).get("info")).get("error") or "")
             for r in errored]
    return tuple(sorted({e.strip().splitlines()[-1][:300] for e in found if e.strip()}))[:3]


def _dataset(doc: Mapping[str, Any], bench: Mapping[str, Any]) -> Dataset:
    metrics = _map(bench["metrics"])
    totals = _totals(bench, metrics)
    out = _dist(metrics, "output_token_count")
    completed = totals.get("successful", _dist(metrics, "request_latency").get("count", 0))
    summary = Summary(
        completed=int(completed),
        failed=int(totals.get("errored", 0)),
        duration_s=_duration(bench),
        ttft_ms=_stat(metrics, "time_to_first_token_ms"),
        tpot_ms=_stat(metrics, "inter_token_latency_ms"),
        e2el_ms=_stat(metrics, "request_latency", scale=1e3),
        ttfat_ms=_stat(metrics, "time_to_first_output_token_ms"),
        mean_input_tokens=_float(_dist(metrics, "prompt_token_count").get("mean")),
        mean_output_tokens=_float(out.get("mean")),
        total_output_tokens=_float(out.get("total_sum")),
        output_throughput=_float(_dist(metrics, "output_tokens_per_second").get("mean")),
        max_concurrent_requests=_float(_dist(metrics, "request_concurrency").get("max")),
        error_examples=_errors(bench),
    )
    return Dataset(source="guidellm", summary=summary, requests=_samples(bench),
                   context=_context(doc, bench), requests_are_sample=True)


def is_guidellm(doc: Any) -> bool:
    """A GuideLLM report: a ``benchmarks`` list whose entries carry ``metrics``."""
    benchmarks = doc.get("benchmarks") if isinstance(doc, Mapping) else None
    return isinstance(benchmarks, list) and bool(benchmarks) and all(
        isinstance(b, Mapping) and isinstance(b.get("metrics"), Mapping) for b in benchmarks)


def read_guidellm(doc: Mapping[str, Any]) -> list[tuple[str, Dataset]]:
    """One dataset per benchmark in the report, labelled by its strategy."""
    out = []
    benchmarks: Sequence[Mapping[str, Any]] = doc["benchmarks"]
    for i, bench in enumerate(benchmarks):
        strategy = _strategy(bench)
        kind = strategy.get("type_", "?")
        level = strategy.get("streams") or strategy.get("rate")
        out.append((f"benchmark {i} ({kind}{f'@{level}' if level else ''})",
                    _dataset(doc, bench)))
    return out
