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
from tunegate.gauge.foreign.values import count, error_lines, number, seconds_list

__all__ = ["is_guidellm", "read_guidellm"]

_PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
REQUIRED_METRICS = ("time_to_first_token_ms", "request_latency", "output_token_count")
"""Distributions every GuideLLM version writes for every benchmark (a report without them was
cut short, or is not a GuideLLM report)."""
_ARRIVAL = {"poisson": "poisson", "constant": "constant"}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _float(value: Any, name: str = "value") -> float | None:
    return number(value, name)


def _dist(metrics: Mapping[str, Any], name: str, status: str = "successful") -> Mapping[str, Any]:
    return _map(_map(metrics.get(name)).get(status))


def _stat(metrics: Mapping[str, Any], name: str, scale: float = 1.0) -> Stat | None:
    dist = _dist(metrics, name)
    field = f"metrics.{name}.successful"
    n = count(dist.get("count"), f"{field}.count")
    mean = _float(dist.get("mean"), f"{field}.mean")
    if not n or mean is None:
        return None
    pct = _map(dist.get("percentiles"))
    median, std = _float(dist.get("median"), f"{field}.median"), _float(
        dist.get("std_dev"), f"{field}.std_dev")
    percentiles = {p: v * scale for k, p in _PCTS.items()
                   if (v := _float(pct.get(k), f"{field}.percentiles.{k}")) is not None}
    return Stat(mean=mean * scale, median=median * scale if median is not None else None,
                percentiles=percentiles, count=n, std=std * scale if std is not None else None)


def _strategy(bench: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(_map(bench.get("config")).get("strategy")) or _map(
        _map(bench.get("args")).get("strategy"))


def _cap(strategy: Mapping[str, Any]) -> int | None:
    kind = strategy.get("type_")
    cap = {"concurrent": strategy.get("streams"), "synchronous": 1}.get(
        str(kind), strategy.get("max_concurrency"))
    return count(cap, "strategy.streams / max_concurrency") or None


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
        request_rate=_float(strategy.get("rate"), "strategy.rate"),
        stream_requested=_streaming(doc, bench),
        percentiles=tuple(_PCTS.values()),
        warmup_excluded=1 if _warmup(bench) else 0,
        arrival=_ARRIVAL.get(kind),
        burstiness=1.0 if kind == "poisson" else None,
        rate_schedule=bool(_float(strategy.get("rampup_duration"), "strategy.rampup_duration")),
    )


def _duration(bench: Mapping[str, Any]) -> float | None:
    """The measured span: the planned window cut at the run's real end (schemas B and C)."""
    planned = _float(bench.get("duration"), "duration")
    sched = _map(bench.get("scheduler_metrics"))
    start = _float(sched.get("measure_start_time"), "scheduler_metrics.measure_start_time")
    ends = [t for key in ("request_end_time", "end_time")
            if (t := _float(sched.get(key), f"scheduler_metrics.{key}")) is not None]
    if planned is None or start is None or not ends:
        return planned
    return min(planned, max(ends) - start)


def _sample(req: Mapping[str, Any], ok: bool, origin: float, where: str) -> RequestSample:
    info = _map(req.get("info"))
    timings = _map(info.get("timings"))

    def time(key: str, source: Mapping[str, Any] = req) -> float | None:
        return _float(source.get(key), f"{where}.{key}")

    start = time("start_time") or time("request_start_time") or time("request_start", timings)
    last = time("last_token_time") or time("last_token_iteration", timings)
    end = time("end_time") or time("request_end_time")
    ttft, latency = time("time_to_first_token_ms"), time("request_latency")
    ttfat = time("time_to_first_output_token_ms")
    error = req.get("error") or info.get("error")
    return RequestSample(
        ok=ok,
        ttft_s=ttft / 1e3 if ttft is not None else None,
        e2el_s=last - start if last is not None and start is not None else latency,
        ttfat_s=ttfat / 1e3 if ttfat is not None else None,
        input_tokens=count(req.get("prompt_tokens"), f"{where}.prompt_tokens"),
        output_tokens=count(req.get("output_tokens"), f"{where}.output_tokens"),
        start_s=start - origin if start is not None else None,
        end_s=end - origin if end is not None else None,
        error=str(error)[:300] if error else None,
        content_events=count(timings.get("token_iterations"), f"{where}.token_iterations"),
    )


def _samples(bench: Mapping[str, Any], index: int) -> tuple[RequestSample, ...] | None:
    requests = _map(bench.get("requests"))
    lists = {status: [_map(r) for r in seconds_list(requests.get(status) or [], status)]
             for status in ("successful", "errored")}
    for status, items in lists.items():
        _complete(items, f"benchmarks[{index}].requests.{status}")
    starts = [number(r.get("start_time") or r.get("request_start_time"), "request start")
              for items in lists.values() for r in items]
    origin = min((s for s in starts if s is not None), default=0.0)
    samples = [_sample(r, status == "successful", origin,
                       f"benchmarks[{index}].requests.{status}[{i}]")
               for status, items in lists.items() for i, r in enumerate(items)]
    return tuple(samples) or None


def _complete(items: Sequence[Mapping[str, Any]], where: str) -> None:
    """Every sampled request carries the keys all its siblings carry.

    A YAML report cut short is still YAML: the cut shows as a request missing keys every
    other request has, and half a request must not be judged as a whole one.

    Raises:
        ValueError: A request lacks a key its siblings all have.
    """
    if len(items) < 2:
        return
    common = set.intersection(*(set(r) for r in items[:-1]))
    for i, item in enumerate(items):
        missing = sorted(common - set(item))
        if missing:
            raise ValueError(f"{where}[{i}] lacks {', '.join(missing[:3])} that every other "
                             "request has: the report looks cut short")


def _totals(bench: Mapping[str, Any], metrics: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(metrics.get("request_totals")) or _map(bench.get("request_totals"))


def _errors(bench: Mapping[str, Any]) -> tuple[str, ...]:
    errored = _map(bench.get("requests")).get("errored") or ()
    return error_lines([_map(r).get("error") or _map(_map(r).get("info")).get("error")
                        for r in errored])


def _dataset(doc: Mapping[str, Any], bench: Mapping[str, Any], index: int) -> Dataset:
    metrics = _map(bench["metrics"])
    missing = [name for name in REQUIRED_METRICS if not _dist(metrics, name)]
    if missing:
        raise ValueError(f"benchmarks[{index}].metrics lacks {', '.join(missing)}, which every "
                         "GuideLLM version writes: the report looks cut short")
    totals = _totals(bench, metrics)
    out = _dist(metrics, "output_token_count")
    completed = count(totals.get("successful"), "request_totals.successful")
    if completed is None:
        completed = count(_dist(metrics, "request_latency").get("count"),
                          "metrics.request_latency.successful.count") or 0
    summary = Summary(
        completed=completed,
        failed=count(totals.get("errored"), "request_totals.errored") or 0,
        duration_s=_duration(bench),
        ttft_ms=_stat(metrics, "time_to_first_token_ms"),
        tpot_ms=_stat(metrics, "inter_token_latency_ms"),
        e2el_ms=_stat(metrics, "request_latency", scale=1e3),
        ttfat_ms=_stat(metrics, "time_to_first_output_token_ms"),
        mean_input_tokens=_float(_dist(metrics, "prompt_token_count").get("mean"),
                                 "metrics.prompt_token_count.successful.mean"),
        mean_output_tokens=_float(out.get("mean"), "metrics.output_token_count.successful.mean"),
        total_output_tokens=_float(out.get("total_sum"),
                                   "metrics.output_token_count.successful.total_sum"),
        output_throughput=_float(_dist(metrics, "output_tokens_per_second").get("mean"),
                                 "metrics.output_tokens_per_second.successful.mean"),
        max_concurrent_requests=_float(_dist(metrics, "request_concurrency").get("max"),
                                       "metrics.request_concurrency.successful.max"),
        error_examples=_errors(bench),
    )
    return Dataset(source="guidellm", summary=summary, requests=_samples(bench, index),
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
                    _dataset(doc, bench, i)))
    return out
