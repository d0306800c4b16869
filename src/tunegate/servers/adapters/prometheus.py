"""Prometheus text exposition -> plain data, in the shape the gauge's server checks read.

The result is keyed by metric name (the shape of the simulator's ``ServerMetrics.snapshot``):

* counter or gauge: a number; when its series differ by some label (vLLM's
  ``vllm:request_success_total{finished_reason=...}``), a mapping of those label values ->
  number. Labels equal in every series (``model_name``, ``engine``) are dropped.
* histogram: ``{"count", "sum", "buckets": {le: cumulative count}}``, summed over series.
* summary: ``{"count", "sum"}``, summed over series.

Only the names starting with a given prefix are kept when one is given. Malformed lines are
skipped (a scrape must never fail a run); ``# TYPE`` tells histograms from counters.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

__all__ = ["parse_prometheus_text"]

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _value(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _family(name: str, types: dict[str, str]) -> tuple[str, str]:
    """(family name, sample suffix) of a sample name."""
    for suffix in ("_bucket", "_count", "_sum"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) in ("histogram", "summary"):
            return base, suffix
    return name, ""


def _collapse(series: list[tuple[dict[str, str], float]]) -> Any:
    keys = {k for labels, _ in series for k in labels}
    varying = sorted(k for k in keys if len({labels.get(k) for labels, _ in series}) > 1)
    if not varying:
        return sum(v for _, v in series)
    out: dict[str, float] = defaultdict(float)
    for labels, v in series:
        out[",".join(labels.get(k, "") for k in varying)] += v
    return dict(out)


def parse_prometheus_text(text: str, prefix: str | None = None) -> dict[str, Any]:
    """Parse an exposition into ``{name: number | {label: number} | histogram}``.

    Args:
        text: The body of ``GET /metrics``.
        prefix: Keep only metric families whose name starts with it (``"vllm:"``).
    """
    types: dict[str, str] = {}
    samples: list[tuple[str, dict[str, str], float]] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        value = _value(match["value"])
        if value is None:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        samples.append((match["name"], labels, value))
    plain: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    hists: dict[str, dict[str, Any]] = {}
    for name, labels, value in samples:
        family, suffix = _family(name, types)
        if prefix is not None and not family.startswith(prefix):
            continue
        if not suffix:
            plain[family].append((labels, value))
            continue
        hist = hists.setdefault(family, {"count": 0.0, "sum": 0.0})
        if suffix == "_bucket":
            le = labels.get("le", "+Inf")
            buckets = hist.setdefault("buckets", {})
            buckets[le] = buckets.get(le, 0.0) + value
        else:
            hist[suffix[1:]] += value
    out: dict[str, Any] = {name: _collapse(series) for name, series in plain.items()}
    out.update(hists)
    return out
