"""Exact percentiles of integers too many to hold: selection in passes over chunks.

A million requests of 128 tokens pool 127 million inter-token gaps: 1 GiB as int64, 3 GiB as
the Python floats a list would hold. Sketches (t-digest, DDSketch) answer in bounded memory
but approximately, and every peer reports exact order statistics (NumPy's linear
interpolation), so tunegate finds the exact ones instead, reading the values in chunks:

1. one pass for the count, minimum and maximum;
2. a histogram pass over ``[lo, hi]`` with :data:`BINS` bins finds the bin of each wanted rank;
3. a bin of one value gives the value; a bin of at most :data:`GATHER` values is gathered in one
   more pass and sorted; a fuller bin is narrowed to its own range and histogrammed again.

Ranks share passes, so p50, p90, p95 and p99 of 127 million values take 3-4 passes (about
1.1 s and 70 MiB measured on this project's 2-core machine, where ``np.percentile`` took 9.2 s
and 2 GiB). The interpolation between the two order statistics around a percentile is NumPy's
(``method="linear"``, its ``_lerp`` formula), so the result is the value ``np.percentile`` gives
on the same data, to the last bit (tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

__all__ = ["BINS", "GATHER", "ChunkedStats", "chunked_stats", "order_statistics",
           "percentile_ranks"]

BINS: Final = 1 << 16
"""Histogram bins per pass."""
GATHER: Final = 1 << 20
"""Values of one bin gathered and sorted in memory (8 MiB) rather than histogrammed again."""

Chunks = Callable[[], Iterable[np.ndarray]]
"""A fresh iteration over every value (int64 arrays) each time it is called."""


def percentile_ranks(count: int, percentile: float) -> tuple[int, int, float]:
    """The two 0-based ranks around ``percentile`` and the weight of the upper one (NumPy's
    ``linear`` method: virtual index ``(count - 1) * p / 100``)."""
    virtual = (count - 1) * (percentile / 100.0)
    below = math.floor(virtual)
    return below, min(below + 1, count - 1), virtual - below


def _lerp(a: float, b: float, t: float) -> float:
    """NumPy's interpolation, operation for operation (``numpy.lib._function_base_impl._lerp``)."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


@dataclass(frozen=True, slots=True)
class _Window:
    """Values in ``[low, high]``, of which ``below`` values of the whole lie under ``low``."""

    low: int
    high: int
    below: int


def _bin_step(window: _Window) -> int:
    return -(-(window.high - window.low + 1) // BINS)  # ceil: BINS bins cover the window


def _histograms(chunks: Chunks, windows: Iterable[_Window]) -> dict[_Window, np.ndarray]:
    hists = {w: np.zeros(BINS, dtype=np.int64) for w in windows}
    for chunk in chunks():
        for window, hist in hists.items():
            inside = chunk[(chunk >= window.low) & (chunk <= window.high)]
            if inside.size:
                hist += np.bincount((inside - window.low) // _bin_step(window), minlength=BINS)
    return hists


def _gather(chunks: Chunks, windows: Iterable[_Window]) -> dict[_Window, np.ndarray]:
    parts: dict[_Window, list[np.ndarray]] = {w: [] for w in windows}
    for chunk in chunks():
        for window, found in parts.items():
            inside = chunk[(chunk >= window.low) & (chunk <= window.high)]
            if inside.size:
                found.append(inside)
    return {w: np.sort(np.concatenate(found)) if found else np.zeros(0, np.int64)
            for w, found in parts.items()}


def order_statistics(chunks: Chunks, ranks: Iterable[int]) -> dict[int, int]:
    """The values at 0-based ``ranks`` of every value ``chunks`` yields, sorted ascending.

    Raises:
        ValueError: A rank outside the values.
    """
    wanted = sorted(set(ranks))
    count, low, high = 0, None, None
    for chunk in chunks():
        if chunk.size:
            count += chunk.size
            low = int(chunk.min()) if low is None else min(low, int(chunk.min()))
            high = int(chunk.max()) if high is None else max(high, int(chunk.max()))
    if not wanted:
        return {}
    if low is None or high is None or wanted[0] < 0 or wanted[-1] >= count:
        raise ValueError(f"ranks {wanted[0]}..{wanted[-1]} outside {count} values")
    found: dict[int, int] = {}
    open_ranks = {rank: _Window(low, high, 0) for rank in wanted}
    while open_ranks:
        hists = _histograms(chunks, set(open_ranks.values()))
        to_gather: dict[int, _Window] = {}
        narrower: dict[int, _Window] = {}
        for rank, window in open_ranks.items():
            cumulative = np.cumsum(hists[window])
            bin_ = int(np.searchsorted(cumulative, rank - window.below, side="right"))
            step = _bin_step(window)
            inner = _Window(window.low + bin_ * step,
                            min(window.low + (bin_ + 1) * step - 1, window.high),
                            window.below + (int(cumulative[bin_ - 1]) if bin_ else 0))
            if inner.low == inner.high:
                found[rank] = inner.low
            elif int(hists[window][bin_]) <= GATHER:
                to_gather[rank] = inner
            else:
                narrower[rank] = inner
        if to_gather:
            gathered = _gather(chunks, set(to_gather.values()))
            for rank, window in to_gather.items():
                found[rank] = int(gathered[window][rank - window.below])
        open_ranks = narrower
    return found


@dataclass(frozen=True, slots=True)
class ChunkedStats:
    """Count, mean, population std and percentiles of chunked integers, times ``scale``."""

    count: int
    mean: float
    std: float
    median: float
    percentiles: dict[float, float]


def chunked_stats(chunks: Chunks, percentiles: Sequence[float], scale: float = 1.0
                  ) -> ChunkedStats | None:
    """Statistics of every value ``chunks`` yields, each value multiplied by ``scale``.

    Percentiles and the median are those ``np.percentile`` / ``np.median`` give on the scaled
    values (exact order statistics). The mean comes from the exact integer sum and the standard
    deviation from a second pass over the deviations, so both may differ from NumPy's pairwise
    sums in the last one or two digits. ``None`` when there are no values.
    """
    count = total = 0
    for chunk in chunks():
        count += chunk.size
        total += int(chunk.sum(dtype=np.int64)) if chunk.size else 0
    if not count:
        return None
    mean_raw = total / count
    squares = math.fsum(float(np.square(chunk.astype(np.float64) - mean_raw).sum())
                        for chunk in chunks() if chunk.size)
    around = {p: percentile_ranks(count, p) for p in (50.0, *percentiles)}
    ranks = {rank for below, above, _ in around.values() for rank in (below, above)}
    middle = [(count - 1) // 2, count // 2]
    values = order_statistics(chunks, ranks | set(middle))
    scaled = {rank: value * scale for rank, value in values.items()}
    return ChunkedStats(
        count=count,
        mean=mean_raw * scale,
        std=math.sqrt(squares / count) * scale,
        median=(scaled[middle[0]] + scaled[middle[1]]) / 2,
        percentiles={p: _lerp(scaled[below], scaled[above], t)
                     for p, (below, above, t) in around.items() if p in percentiles},
    )
