"""tunegate's own result file: vLLM keys, plus ``records`` (``--save-detailed``) and context.

With ``records`` the dataset is rebuilt from the full records (every field a check can use);
without, the vLLM reader's summary is used. The context comes from tunegate's own keys:
``stream``, ``percentiles``, ``warmup_requests``, ``client`` (event-loop lag), and, for simulator
runs, ``server_metrics`` and ``roofline``. The file's own ``validation`` block is not trusted:
the data is validated again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tunegate.gauge.dataset import Dataset, RooflineLimits, RunContext
from tunegate.gauge.foreign.vllm import read_vllm, vllm_context
from tunegate.gauge.from_records import dataset_from_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord

__all__ = ["read_tunegate"]


def _lag(client: Any) -> LagSummary | None:
    if not isinstance(client, Mapping) or not client.get("event_loop_lag_p99_ms"):
        return None  # simulator runs write zeros: there was no client
    return LagSummary(
        samples=1, p50_ms=float(client.get("event_loop_lag_p50_ms") or 0.0),
        p99_ms=float(client["event_loop_lag_p99_ms"]),
        max_ms=float(client.get("event_loop_lag_max_ms") or 0.0),
        over_1ms_fraction=0.0, cpu_busy_fraction=float(client.get("cpu_busy_fraction") or 0.0),
    )


def _context(doc: Mapping[str, Any]) -> RunContext:
    base = vllm_context(doc)
    roofline = doc.get("roofline")
    stream = doc.get("stream")
    return replace(
        base,
        stream_requested=stream if isinstance(stream, bool) else None,
        percentiles=tuple(float(p) for p in doc.get("percentiles") or base.percentiles),
        warmup_excluded=int(doc.get("warmup_requests") or 0),
        lag=_lag(doc.get("client")),
        server_metrics=doc.get("server_metrics"),
        roofline=RooflineLimits(**roofline) if isinstance(roofline, Mapping) else None,
    )


def read_tunegate(doc: Mapping[str, Any]) -> Dataset:
    """A tunegate result as a dataset."""
    context = _context(doc)
    records = doc.get("records")
    if isinstance(records, list) and records:
        parsed = [RequestRecord.from_dict(r) for r in records]
        return dataset_from_records(parsed, context, source="tunegate")
    return replace(read_vllm(doc), source="tunegate", context=context)
