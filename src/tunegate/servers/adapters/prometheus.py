"""Prometheus text exposition -> one flat dict keyed by metric name (what verification reads).

Parsed by ``prometheus_client``'s text parser through :func:`tunegate.loadgen.exposition.
parse_exposition` (the parser the benchmark's telemetry uses), then flattened:

* counter or gauge: a number; when its series differ by some label (vLLM's
  ``vllm:request_success_total{finished_reason=...}``), a mapping of those label values ->
  number. Labels equal in every series (``model_name``, ``engine``) are dropped.
* histogram: ``{"count", "sum", "buckets": {le: cumulative count}}``, summed over series.
* summary: ``{"count", "sum"}``, summed over series.

Counters are keyed as ``prometheus_client`` names their samples, always with ``_total``. Only
the names starting with a given prefix are kept when one is given. Malformed lines are skipped
(a scrape must never fail a run). The benchmark's own record of a run is richer (deltas, gauge
peaks, restarts): see :mod:`tunegate.loadgen.server_metrics`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tunegate.loadgen.exposition import Histogram, LabelSet, parse_exposition

__all__ = ["parse_prometheus_text"]


def _varying(keys: list[LabelSet]) -> list[str]:
    names = sorted({k for labels in keys for k, _ in labels})
    return [n for n in names if len({dict(labels).get(n) for labels in keys}) > 1]


def _collapse(series: dict[LabelSet, float]) -> float | dict[str, float]:
    varying = _varying(list(series))
    if not varying:
        return sum(series.values())
    out: dict[str, float] = defaultdict(float)
    for labels, value in series.items():
        as_dict = dict(labels)
        out[",".join(as_dict.get(k, "") for k in varying)] += value
    return dict(out)


def _summed(series: list[Histogram], with_buckets: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"count": sum(h.count for h in series),
                           "sum": sum(h.sum for h in series)}
    if with_buckets:
        buckets: dict[str, float] = defaultdict(float)
        for h in series:
            for le, v in h.buckets.items():
                buckets[le] += v
        out["buckets"] = dict(buckets)
    return out


def parse_prometheus_text(text: str, prefix: str | None = None) -> dict[str, Any]:
    """Parse an exposition into ``{name: number | {label: number} | histogram}``.

    Args:
        text: The body of ``GET /metrics``.
        prefix: Keep only metric families whose name starts with it (``"vllm:"``).
    """
    scrape = parse_exposition(text, (prefix,) if prefix is not None else None)
    out: dict[str, Any] = {}
    for name, family in scrape.families.items():
        values = list(family.series.values())
        hists = [v for v in values if isinstance(v, Histogram)]
        if hists:
            out[name] = _summed(hists, family.kind == "histogram")
        else:
            out[name] = _collapse({k: v for k, v in family.series.items()
                                   if isinstance(v, float)})
    return out
