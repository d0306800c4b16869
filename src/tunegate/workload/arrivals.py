"""Seeded arrival schedules: closed loop, or open loop at a rate (Poisson, gamma, constant).

Open-loop offsets start at 0 and add one inter-arrival interval per request:

- ``poisson``: intervals ~ Exponential(mean ``1/rate``);
- ``gamma``: intervals ~ Gamma(shape ``burstiness``, scale ``1/(rate * burstiness)``), mean
  ``1/rate`` and coefficient of variation ``1/sqrt(burstiness)`` (vLLM's ``--burstiness``:
  1 = Poisson, < 1 burstier, > 1 more regular);
- ``constant``: every interval is exactly ``1/rate``.

``rate = inf`` sends everything at once (all offsets 0). An open-loop schedule may carry a
``max_concurrency`` cap: a request whose offset has come waits for a free slot.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from tunegate.workload.spec import ArrivalSchedule

__all__ = ["ArrivalKind", "arrival_offsets", "closed_loop", "open_loop"]

ArrivalKind = Literal["poisson", "gamma", "constant"]


def closed_loop(concurrency: int) -> ArrivalSchedule:
    """Closed loop: ``concurrency`` requests in flight, each starting when a slot frees.

    Example:
        >>> schedule = closed_loop(16)
        >>> (schedule.offsets_s, schedule.max_concurrency, schedule.kind)
        (None, 16, 'closed')
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    return ArrivalSchedule(offsets_s=None, max_concurrency=concurrency, kind="closed")


def arrival_offsets(
    n: int,
    rate: float,
    *,
    kind: ArrivalKind = "poisson",
    burstiness: float = 1.0,
    rng: np.random.Generator,
) -> tuple[float, ...]:
    """Send offsets in seconds for ``n`` requests, the first at 0.

    Args:
        n: Number of requests.
        rate: Mean requests per second (``> 0``; ``inf`` = all at once).
        kind: Interval distribution (see the module docstring).
        burstiness: Gamma shape; used only by ``kind="gamma"``.
        rng: Generator for the intervals (unused by ``constant`` and ``rate=inf``).

    Returns:
        ``n`` non-decreasing offsets.

    Example:
        >>> arrival_offsets(3, 2.0, kind="constant", rng=np.random.default_rng(0))
        (0.0, 0.5, 1.0)
    """
    if not rate > 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise ValueError(f"burstiness must be a finite number > 0, got {burstiness}")
    gaps = max(n - 1, 0)
    if math.isinf(rate):
        intervals = np.zeros(gaps)
    elif kind == "poisson":
        intervals = rng.exponential(1.0 / rate, size=gaps)
    elif kind == "gamma":
        intervals = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=gaps)
    elif kind == "constant":
        intervals = np.full(gaps, 1.0 / rate)
    else:
        raise ValueError(f"unknown arrival kind {kind!r}; use poisson, gamma or constant")
    offsets = np.concatenate(([0.0], np.cumsum(intervals)))[:n]
    return tuple(float(x) for x in offsets)


def open_loop(
    n: int,
    rate: float,
    *,
    kind: ArrivalKind = "poisson",
    burstiness: float = 1.0,
    rng: np.random.Generator,
    max_concurrency: int | None = None,
) -> ArrivalSchedule:
    """Open-loop schedule of ``n`` requests at ``rate`` per second, optionally capped.

    Args:
        n: Number of requests (warm-up included).
        rate: Mean requests per second (``inf`` = all at once).
        kind: Interval distribution.
        burstiness: Gamma shape (recorded as 1.0 for ``poisson``, ``None`` for ``constant``).
        rng: Generator for the intervals.
        max_concurrency: Optional cap on requests in flight.

    Returns:
        The schedule, with ``kind``, ``request_rate`` and ``burstiness`` recorded.
    """
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    offsets = arrival_offsets(n, rate, kind=kind, burstiness=burstiness, rng=rng)
    shape = {"poisson": 1.0, "gamma": burstiness, "constant": None}[kind]
    return ArrivalSchedule(
        offsets_s=offsets,
        max_concurrency=max_concurrency,
        kind=kind,
        request_rate=rate,
        burstiness=shape,
    )
