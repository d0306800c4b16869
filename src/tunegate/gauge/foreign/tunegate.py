"""tunegate's own result file: vLLM keys, plus ``records`` (``--save-detailed``) and context.

With ``records`` the dataset is rebuilt from the full records (every field a check can use);
without, the vLLM reader's summary is used. The context comes from tunegate's own keys:
``stream``, ``percentiles``, ``warmup_requests``, ``client`` (event-loop lag), ``server_metrics``
(the server's own ``/metrics`` over the run; older files hold the simulator's flat vLLM-named
snapshot, converted to the block) and, for simulator runs, ``roofline``. The file's own
``validation`` block is not trusted: the data is validated again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tunegate.gauge.dataset import Dataset, RooflineLimits, RunContext, engine_of_metrics
from tunegate.gauge.foreign.vllm import vllm_context, vllm_summary
from tunegate.gauge.from_records import dataset_from_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.server_metrics import as_block

__all__ = ["read_tunegate"]


def _lag(client: Any) -> LagSummary | None:
    if not isinstance(client, Mapping) or not client.get("event_loop_lag_p99_ms"):
        return None  # simulator runs write zeros: there was no client
    return LagSummary(
        samples=1, p50_ms=float(client.get("event_loop_lag_p50_ms") or 0.0),
        p99_ms=float(client["event_loop_lag_p99_ms"]),
        max_ms=float(client.get("event_loop_lag_max_ms") or 0.0),
        over_1ms_fraction=0.0, cpu_busy_fraction=float(client.get("cpu_busy_fraction") or 0.0),
        kernel_receipts=_share(client.get("kernel_receipts")),
    )


def _share(value: Any) -> float | None:
    """A share in [0, 1]; anything else (absent in files older than the field) is unknown."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


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
        server_metrics=(server := as_block(doc.get("server_metrics"))),
        engine=engine_of_metrics(server),
        roofline=RooflineLimits(**roofline) if isinstance(roofline, Mapping) else None,
    )


def _record(index: int, raw: Any) -> RequestRecord:
    """``records[index]`` read back; a malformed one is a ``ValueError`` naming it."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"records[{index}] is {type(raw).__name__}, not a request record")
    try:
        return RequestRecord.from_dict(dict(raw))
    except KeyError as exc:
        raise ValueError(f"records[{index}]: no field {exc}") from None
    except ValueError as exc:
        raise ValueError(f"records[{index}]: {exc}") from None


def read_tunegate(doc: Mapping[str, Any]) -> Dataset:
    """A tunegate result as a dataset."""
    context = _context(doc)
    records = doc.get("records")
    if isinstance(records, list) and records:
        parsed = [_record(i, r) for i, r in enumerate(records)]
        return dataset_from_records(parsed, context, source="tunegate")
    # tunegate writes a true instantaneous peak under vLLM's key (not vLLM's per-second count)
    return Dataset(source="tunegate", summary=vllm_summary(doc, exact_peak=True),
                   context=context)
