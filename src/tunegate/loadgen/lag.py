"""Event-loop lag: how late the client itself is, so it knows when *it* is the bottleneck.

When the event loop is busy, ready callbacks wait their turn: requests leave late, and where
the kernel does not stamp received bytes (:mod:`.kernel_stamps`; ``kernel_receipts`` says for
how many reads it did) every receipt time taken in that window is late by the wait; where it
does, events that queued in one socket meanwhile are read together and share the newest one's
time. The probe measures exactly that wait: every ``interval`` it queues a callback with
``call_soon`` and records how long the callback waited to run. Timer oversleep is deliberately
*not* used, because epoll rounds timeouts up to whole milliseconds and would report ~1 ms of
lag on an idle loop.

The busy fraction (process CPU time / wall time) is reported beside it: a client process near
1.0 cannot keep up, whatever the probe says.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LagMonitor", "LagSummary", "percentile_99"]


def percentile_99(values: Sequence[int]) -> float:
    """NumPy's default (``linear``) 99th percentile of a non-empty ``values``, in plain Python.

    :meth:`LagMonitor.window` runs in the middle of a run, and ``np.percentile``'s first call in
    a process took 6.6 ms here (later calls 0.09 ms): one stall of the event loop, which
    joined a 5 ms stream's events in one read at the first window of every ``--workers auto``
    run. A window holds about a hundred probes, so sorting them costs microseconds.

    >>> percentile_99([0, 100])
    99.0
    """
    ordered = sorted(values)
    position = 0.99 * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


@dataclass(frozen=True, slots=True)
class LagSummary:
    """Distribution of event-loop lag over a run, in milliseconds.

    Attributes:
        samples: Number of probes.
        p50_ms / p99_ms / max_ms: Lag percentiles and maximum.
        over_1ms_fraction: Share of probes that waited more than 1 ms.
        cpu_busy_fraction: Client CPU seconds per wall second over the run (1.0 = one full core).
        peak_rss_mib: The client process's peak resident memory at the end of the run (the
            largest of its processes when several); 0 when not measured.
        kernel_receipts: Share of socket reads whose receipt time the kernel gave (the rest
            were timed when the read callback ran, late by the lag); ``None``: no reads, or
            not counted.
    """

    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    over_1ms_fraction: float
    cpu_busy_fraction: float
    peak_rss_mib: float = 0.0
    kernel_receipts: float | None = None

    @classmethod
    def empty(cls) -> LagSummary:
        return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0)

    @classmethod
    def worst(cls, summaries: list[LagSummary]) -> LagSummary:
        """The pessimistic merge of several workers' summaries (each field's maximum)."""
        if not summaries:
            return cls.empty()
        return cls(
            samples=sum(s.samples for s in summaries),
            p50_ms=max(s.p50_ms for s in summaries),
            p99_ms=max(s.p99_ms for s in summaries),
            max_ms=max(s.max_ms for s in summaries),
            over_1ms_fraction=max(s.over_1ms_fraction for s in summaries),
            cpu_busy_fraction=max(s.cpu_busy_fraction for s in summaries),
            peak_rss_mib=max(s.peak_rss_mib for s in summaries),
            kernel_receipts=min((s.kernel_receipts for s in summaries
                                 if s.kernel_receipts is not None), default=None),
        )


def _peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB, macOS bytes)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class LagMonitor:
    """Probes the running event loop's scheduling delay until stopped.

    Example:
        >>> async def main() -> LagSummary:
        ...     monitor = LagMonitor(interval_s=0.001)
        ...     monitor.start()
        ...     await asyncio.sleep(0.02)
        ...     return monitor.stop()
        >>> asyncio.run(main()).samples > 5
        True
    """

    def __init__(self, interval_s: float = 0.005) -> None:
        self._interval_s = interval_s
        # 8 bytes a probe (200 a second): a week-long run holds 1 GiB, an hour 5.5 MiB.
        self._lags_ns: array[int] = array("q")
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wall0 = 0
        self._cpu0 = 0.0
        self._running = False
        self._window_at = (0, 0.0, 0)  # wall ns, CPU s, samples at the last window()

    def start(self) -> None:
        """Start probing the current event loop."""
        self._loop = asyncio.get_running_loop()
        self._wall0 = time.monotonic_ns()
        self._cpu0 = time.process_time()
        self._running = True
        self._window_at = (self._wall0, self._cpu0, 0)
        self._schedule()

    def window(self) -> tuple[float, float]:
        """CPU busy fraction and lag p99 (ms) since the previous call (or the start).

        What a supervisor watches while the run goes on (``workers="auto"``).
        """
        wall_ns, cpu_s, first = self._window_at
        now_ns, now_cpu = time.monotonic_ns(), time.process_time()
        self._window_at = (now_ns, now_cpu, len(self._lags_ns))
        busy = (now_cpu - cpu_s) / ((now_ns - wall_ns) / 1e9) if now_ns > wall_ns else 0.0
        recent = self._lags_ns[first:]
        return busy, percentile_99(recent) / 1e6 if recent else 0.0

    def _schedule(self) -> None:
        assert self._loop is not None
        self._handle = self._loop.call_later(self._interval_s, self._probe)

    def _probe(self) -> None:
        if not self._running or self._loop is None:
            return
        queued_at = time.monotonic_ns()
        self._loop.call_soon(self._record, queued_at)

    def _record(self, queued_at: int) -> None:
        self._lags_ns.append(time.monotonic_ns() - queued_at)
        if self._running:
            self._schedule()

    def stop(self, *, kernel_receipts: float | None = None) -> LagSummary:
        """Stop probing and summarise (``kernel_receipts``: see :class:`LagSummary`)."""
        self._running = False
        if self._handle is not None:
            self._handle.cancel()
        wall_s = (time.monotonic_ns() - self._wall0) / 1e9
        cpu_s = time.process_time() - self._cpu0
        busy = cpu_s / wall_s if wall_s > 0 else 0.0
        if not self._lags_ns:
            return LagSummary(0, 0.0, 0.0, 0.0, 0.0, busy, _peak_rss_mib(), kernel_receipts)
        lags_ms = np.asarray(self._lags_ns, dtype=np.float64) / 1e6
        return LagSummary(
            samples=int(lags_ms.size),
            p50_ms=float(np.percentile(lags_ms, 50)),
            p99_ms=float(np.percentile(lags_ms, 99)),
            max_ms=float(lags_ms.max()),
            over_1ms_fraction=float(np.mean(lags_ms > 1.0)),
            cpu_busy_fraction=busy,
            peak_rss_mib=_peak_rss_mib(),
            kernel_receipts=kernel_receipts,
        )
