"""Series over a bench result's requests: per-request latencies, requests in flight and output
throughput over time.

Everything here is computed from the document's ``records`` (``--save-detailed``: every
request's timestamps, :class:`~tunegate.loadgen.records.RequestRecord`), the way the summary
computes its figures: latencies from the complete measured (non-warm-up) requests with
:mod:`tunegate.metrics.definitions`, requests in flight from each measured request's send and
end times, output throughput from the tokens' receipt times, binned. Without records, latencies
fall back on vLLM's per-request arrays (``ttfts``, ``itls``; seconds). Times are seconds since
the first send of a measured request. :mod:`~tunegate.report.bench_page` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tunegate.errors import InputFileError
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.definitions import NS_PER_MS, NS_PER_S, e2el_ns, itl_ns, tpot_ns, ttft_ns
from tunegate.report.charts import MAX_POINTS, finite

__all__ = ["in_flight_series", "latency_values", "output_throughput_series", "records_of"]


def records_of(doc: Mapping[str, Any], *, source: str = "the result") -> list[RequestRecord]:
    """The document's ``records`` (``--save-detailed``), warm-up ones included; ``[]`` when it
    has none.

    Raises:
        InputFileError: ``records`` is not a list of request records, or a record's field has
            the wrong type (named, with its index: a damaged or hand-edited file; the page is
            not drawn from guesses).
    """
    raw = doc.get("records")
    if raw is None:
        return []
    fix = ("the file is damaged or was edited: rerun the benchmark with --save-detailed, or "
           "remove its 'records' to report the summary only")
    if not isinstance(raw, list):
        raise InputFileError(f"{source}: 'records' is {type(raw).__name__}, not a list of "
                             f"request records; {fix}")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(RequestRecord.from_dict(dict(item)))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputFileError(f"{source}: records[{i}]: {exc}; {fix}") from exc
    return out


def _measured_ok(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """Complete, non-warm-up records: the ones the summary's latencies are computed from."""
    return [r for r in records if not r.warmup and r.outcome.is_success]


def latency_values(records: Sequence[RequestRecord], doc: Mapping[str, Any],
                    metric: str) -> list[float] | None:
    """Per-request values of ``metric`` in ms, as the summary computes them (complete measured
    requests; ITL pooled over every gap); from the vLLM arrays when there are no records.
    ``None`` when the document holds no per-request data for it."""
    ok = _measured_ok(records)
    if records:
        to_ms = 1.0 / NS_PER_MS
        if metric == "itl":
            return [g * to_ms for r in ok for g in itl_ns(r)]
        fn = {"ttft": ttft_ns, "tpot": tpot_ns, "e2el": e2el_ns}[metric]
        return [v * to_ms for r in ok if (v := fn(r)) is not None]
    if metric == "ttft" and isinstance(doc.get("ttfts"), list):
        return [f * 1000.0 for v in doc["ttfts"] if (f := finite(v)) is not None]
    if metric == "itl" and isinstance(doc.get("itls"), list):
        return [f * 1000.0 for gaps in doc["itls"] if isinstance(gaps, list)
                for v in gaps if (f := finite(v)) is not None]
    return None


def in_flight_series(records: Sequence[RequestRecord], *,
                     max_points: int = MAX_POINTS) -> tuple[list[float], list[float], str]:
    """Requests in flight over time: ``(t_s, count, label)``.

    Computed from the measured (non-warm-up) records, as the summary's
    ``max_concurrent_requests`` is: each request counts from its ``t_send_ns`` to its
    ``t_end_ns``; events at the same instant are merged (ends before sends, a slot handed on
    is not counted twice), and ``count[i]`` holds from ``t_s[i]`` until the next time (a step
    line). Times are seconds since the first send. When there are more steps than
    ``max_points``, time is cut into ``max_points // 2`` equal bins and each bin gives the
    most requests in flight within it (so the peak survives), labelled ``"max per bin"``.
    """
    measured = [r for r in records if not r.warmup]
    if not measured:
        return [], [], ""
    t0 = min(r.t_send_ns for r in measured)
    deltas: dict[int, int] = {}
    for r in measured:
        deltas[r.t_send_ns] = deltas.get(r.t_send_ns, 0) + 1
        end = max(r.t_end_ns, r.t_send_ns)
        deltas[end] = deltas.get(end, 0) - 1
    times, counts, running = [], [], 0
    for t in sorted(deltas):
        running += deltas[t]
        times.append((t - t0) / NS_PER_S)
        counts.append(float(running))
    if len(times) <= max_points:
        return times, counts, "in flight"
    n_bins = max(1, max_points // 2)
    span = times[-1] or 1.0
    edges = np.linspace(0.0, span, n_bins + 1)
    peak = np.zeros(n_bins)
    # the count holding at a bin's start carries in from the last step before it
    idx = np.searchsorted(np.asarray(times), edges[:-1], side="right") - 1
    arr = np.asarray(counts)
    peak[:] = np.where(idx >= 0, arr[np.clip(idx, 0, None)], 0.0)
    which = np.minimum(np.searchsorted(edges, np.asarray(times), side="right") - 1, n_bins - 1)
    np.maximum.at(peak, which, arr)
    return [float(e) for e in edges[:-1]], [float(p) for p in peak], "in flight (max per bin)"


def output_throughput_series(records: Sequence[RequestRecord], *,
                             bins: int = 120) -> tuple[list[float], list[float], float]:
    """Output tokens per second over time: ``(bin start t_s, tok/s, bin width s)``.

    Computed from the complete measured records (those the summary's ``output_throughput``
    counts): each record's ``output_tokens`` are spread evenly over its content events'
    receipt times (``content_times_ns``; one event per token when the server streams token by
    token, so exact then), or put at its last content time when it has no event list; the
    tokens received in each of ``bins`` equal time bins, divided by the bin width. Times are
    seconds since the first send of a measured request. The bins' tokens add up to the
    summary's ``total_output_tokens``.
    """
    measured = [r for r in records if not r.warmup]
    ok = _measured_ok(records)
    if not ok:
        return [], [], 0.0
    t0 = min(r.t_send_ns for r in measured)
    stamps: list[float] = []
    weights: list[float] = []
    for r in ok:
        tokens = r.output_tokens or 0
        if tokens <= 0:
            continue
        times = r.content_times_ns or ([r.t_last_ns] if r.t_last_ns is not None else [r.t_end_ns])
        share = tokens / len(times)
        stamps += [(t - t0) / NS_PER_S for t in times]
        weights += [share] * len(times)
    if not stamps:
        return [], [], 0.0
    end = max(max(stamps), 1e-9)
    width = end / bins
    edges = np.linspace(0.0, end, bins + 1)
    sums, _ = np.histogram(np.asarray(stamps), bins=edges, weights=np.asarray(weights))
    return [float(e) for e in edges[:-1]], [float(s / width) for s in sums], float(width)
