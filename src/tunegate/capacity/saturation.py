"""Whether an open-loop probe's server kept up: the *backlog* target every rate probe meets.

Over its capacity a server falls behind: requests arrive faster than they end, and the number in
flight grows for as long as the run lasts. A finite probe can still meet its latency targets
while that happens: an engine that admits every request (a large ``max_num_seqs``) keeps TTFT
low and lets the batch, and TPOT, creep up until its KV cache fills; a probe that ends first
"passes" at a load the server cannot sustain (the simulator's h100-8b under ``tpot_mean:60``
passed every rate up to 1000 req/s while completing 6.3 to 7.7). So a rate probe also fails when its
server falls behind: over a window of its sends, the requests in flight (counted at each
send) grow at ``g`` requests/s while ``lambda`` arrive per second, so the server serves
``mu = lambda - g``, and ``lambda / mu`` above :data:`BACKLOG_LIMIT` fails. The margin is
``log(ratio / limit)``, on the scale of the latency targets. The growth is a least-squares
slope through every send's count, far steadier than the difference of two counts.

In a steady state the count only fluctuates and the ratio is 1; over the capacity it is the
offered load over the throughput. The window starts a quarter into the probe, or later by the
median latency of the requests ending in it, so that every request ending in it was sent during
the probe, to an already filled server.
When that leaves less than a quarter of the sending time (a short probe of long requests, or a
probe sent faster than its requests last), the backlog is not judged (``None``) rather than
misjudged; the latency targets then decide alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tunegate.loadgen.records import RequestRecord

__all__ = ["BACKLOG", "BACKLOG_LIMIT", "backlog_margin", "backlog_ratio"]

BACKLOG = "backlog"
"""The implicit target's name in a probe's margins."""
BACKLOG_LIMIT = 1.1
"""Most offered load per load served: 10% more arriving than served is a queue that grows by a
tenth of the load for as long as the load lasts."""
MIN_SENDS = 40


def _window(records: Sequence[RequestRecord], measured: Sequence[RequestRecord]
            ) -> tuple[int, int] | None:
    """The window whose ends were all sent during the probe: from a quarter into the sends, or
    one latency of the requests ending there after the first send when that is later, to the
    last send; ``None`` when that leaves less than a quarter of the sending time."""
    first, last = min(r.t_send_ns for r in records), measured[-1].t_send_ns
    span = last - first
    start = max(measured[len(measured) // 4].t_send_ns, first)
    for _ in range(2):  # the latency of the requests ending in the window, then its start
        ending = [r.t_end_ns - r.t_send_ns for r in records if start < r.t_end_ns <= last]
        if not ending:
            return None
        start = max(start, first + int(np.median(ending)))
    return (start, last) if last - start >= span / 4 else None


def backlog_ratio(records: Sequence[RequestRecord]) -> float | None:
    """Offered load over the load served, ``lambda / mu``, over the window (module docstring);
    ``None`` when it cannot be judged."""
    measured = sorted((r for r in records if not r.warmup), key=lambda r: r.t_send_ns)
    if len(measured) < MIN_SENDS:
        return None
    window = _window(records, measured)
    if window is None:
        return None
    start, end = window
    sends = np.sort(np.array([r.t_send_ns for r in records], dtype=np.int64))
    ends = np.sort(np.array([r.t_end_ns for r in records], dtype=np.int64))
    at = sends[(sends > start) & (sends <= end)]
    if len(at) < MIN_SENDS // 2:
        return None
    in_flight = np.searchsorted(sends, at, side="right") - np.searchsorted(ends, at, side="right")
    seconds = (at - start) / 1e9
    growth = float(np.polyfit(seconds, in_flight.astype(np.float64), 1)[0])  # requests/s
    offered = len(at) / ((end - start) / 1e9)
    served = max(offered - growth, offered / 100)
    return offered / served


def backlog_margin(records: Sequence[RequestRecord]) -> float | None:
    """``log(ratio / BACKLOG_LIMIT)``; ``None`` when not judged."""
    ratio = backlog_ratio(records)
    if ratio is None:
        return None
    return math.log(ratio / BACKLOG_LIMIT)
