"""GuideLLM ``benchmarks.json`` (``GenerativeBenchmarksReport.model_dump()``).

Field names from vllm-project/guidellm's schemas: the report is ``{"args", "benchmarks": [...]}``;
each benchmark has ``config.strategy`` (``{"type_": "concurrent", "streams": 16}``,
``"synchronous"``, ``"constant"``/``"poisson"`` with ``rate``), ``duration`` (s), ``metrics``
(``request_totals`` and one ``StatusDistributionSummary`` per metric: ``{"successful": {"mean",
"median", "count", "total_sum", "max", "percentiles": {"p50", "p90", "p95", "p99", ...}},
"errored": ...}``) and ``requests`` (``successful``/``errored`` lists of sampled request stats
with ``time_to_first_token_ms``, ``request_latency`` in seconds, ``prompt_tokens``,
``output_tokens``, ``info.timings``). GuideLLM's ``time_per_output_token_ms`` includes the first
token; its ``inter_token_latency_ms`` is tunegate's TPOT and is the one read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.gauge.dataset import Dataset, RequestSample, RunContext, Stat, Summary

__all__ = ["read_guidellm"]

_PCTS = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


def _dist(metrics: Mapping[str, Any], name: str, status: str = "successful") -> Mapping[str, Any]:
    block = metrics.get(name) or {}
    dist = block.get(status) if isinstance(block, Mapping) else None
    return dist if isinstance(dist, Mapping) else {}


def _stat(metrics: Mapping[str, Any], name: str, scale: float = 1.0) -> Stat | None:
    dist = _dist(metrics, name)
    if not dist or not dist.get("count"):
        return None
    pct = dist.get("percentiles") or {}
    return Stat(
        mean=float(dist["mean"]) * scale, median=float(dist["median"]) * scale,
        percentiles={p: float(pct[k]) * scale for k, p in _PCTS.items() if k in pct},
        count=int(dist["count"]),
    )


def _context(bench: Mapping[str, Any]) -> RunContext:
    config = bench.get("config") or {}
    strategy = config.get("strategy") or {}
    kind = strategy.get("type_")
    cap = {"concurrent": strategy.get("streams"), "synchronous": 1}.get(str(kind),
                                                                    strategy.get("max_concurrency"))
    warm = config.get("warmup") or {}
    return RunContext(
        max_concurrency=int(cap) if cap else None,
        request_rate=float(strategy["rate"]) if strategy.get("rate") else None,
        percentiles=tuple(_PCTS.values()),
        warmup_excluded=1 if (warm.get("percent") or warm.get("value")) else 0,
    )


def _sample(req: Mapping[str, Any], ok: bool, origin: float) -> RequestSample:
    timings = (req.get("info") or {}).get("timings") or {}
    start = timings.get("request_start")
    ttft = req.get("time_to_first_token_ms")
    latency = req.get("request_latency")
    iterations = timings.get("token_iterations")
    return RequestSample(
        ok=ok,
        ttft_s=float(ttft) / 1e3 if isinstance(ttft, int | float) else None,
        e2el_s=float(latency) if isinstance(latency, int | float) else None,
        input_tokens=req.get("prompt_tokens"), output_tokens=req.get("output_tokens"),
        start_s=float(start) - origin if isinstance(start, int | float) else None,
        error=(req.get("info") or {}).get("error"),
        content_events=int(iterations) if isinstance(iterations, int) else None,
    )


def _dataset(bench: Mapping[str, Any]) -> Dataset:
    metrics = bench["metrics"]
    totals = metrics.get("request_totals") or {}
    out = _dist(metrics, "output_token_count")
    duration = bench.get("duration")
    summary = Summary(
        completed=int(totals.get("successful", _dist(metrics, "request_latency").get("count", 0))),
        failed=int(totals.get("errored", 0)),
        duration_s=float(duration) if isinstance(duration, int | float) else None,
        ttft_ms=_stat(metrics, "time_to_first_token_ms"),
        tpot_ms=_stat(metrics, "inter_token_latency_ms"),
        e2el_ms=_stat(metrics, "request_latency", scale=1e3),
        mean_input_tokens=_dist(metrics, "prompt_token_count").get("mean"),
        mean_output_tokens=out.get("mean"),
        total_output_tokens=out.get("total_sum"),
        output_throughput=_dist(metrics, "output_tokens_per_second").get("mean"),
        max_concurrent_requests=_dist(metrics, "request_concurrency").get("max"),
    )
    requests = bench.get("requests") or {}
    ok, errored = requests.get("successful") or [], requests.get("errored") or []
    starts = [((r.get("info") or {}).get("timings") or {}).get("request_start")
              for r in [*ok, *errored]]
    origin = min((s for s in starts if isinstance(s, int | float)), default=0.0)
    samples = tuple([_sample(r, True, origin) for r in ok]
                    + [_sample(r, False, origin) for r in errored])
    return Dataset(source="guidellm", summary=summary, requests=samples or None,
                   context=_context(bench))


def read_guidellm(doc: Mapping[str, Any]) -> list[tuple[str, Dataset]]:
    """One dataset per benchmark in the report, labelled by its strategy."""
    out = []
    for i, bench in enumerate(doc["benchmarks"]):
        strategy = (bench.get("config") or {}).get("strategy") or {}
        kind = strategy.get("type_", "?")
        level = strategy.get("streams") or strategy.get("rate")
        out.append((f"benchmark {i} ({kind}{f'@{level}' if level else ''})", _dataset(bench)))
    return out
