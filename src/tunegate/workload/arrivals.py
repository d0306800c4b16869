"""Seeded arrival schedules: closed loop, or open loop at a rate (Poisson, gamma, constant).

Open-loop offsets start at 0 and add one inter-arrival interval per request:

- ``poisson``: intervals ~ Exponential(mean ``1/rate``);
- ``gamma``: intervals ~ Gamma(shape ``burstiness``, scale ``1/(rate * burstiness)``), mean
  ``1/rate`` and coefficient of variation ``1/sqrt(burstiness)`` (vLLM's ``--burstiness``:
  1 = Poisson, < 1 burstier, > 1 more regular);
- ``constant``: every interval is exactly ``1/rate``.

``rate = inf`` sends everything at once (all offsets 0). An open-loop schedule may carry a
``max_concurrency`` cap: a request whose offset has come waits for a free slot. Its offsets are
an :class:`~tunegate.workload.lazy.Offsets` (a float64 array, 8 MB for a million requests
instead of a tuple's 32 MB) whose items are the floats :func:`arrival_offsets` returns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, overload

import numpy as np
import numpy.typing as npt

from tunegate.workload.spec import ArrivalSchedule

__all__ = ["ArrivalKind", "Offsets", "arrival_offsets", "closed_loop", "open_loop"]

ArrivalKind = Literal["poisson", "gamma", "constant"]

_CHUNK = 65_536
"""Offsets converted to Python floats at a time while iterating."""


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
    return tuple(_offsets(n, rate, kind=kind, burstiness=burstiness, rng=rng).tolist())


def _offsets(
    n: int, rate: float, *, kind: ArrivalKind, burstiness: float, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
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
    offsets: npt.NDArray[np.float64] = np.concatenate(([0.0], np.cumsum(intervals)))[:n]
    return offsets


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
    offsets = Offsets(_offsets(n, rate, kind=kind, burstiness=burstiness, rng=rng))
    shape = {"poisson": 1.0, "gamma": burstiness, "constant": None}[kind]
    return ArrivalSchedule(
        offsets_s=offsets,
        max_concurrency=max_concurrency,
        kind=kind,
        request_rate=rate,
        burstiness=shape,
    )


class Offsets(Sequence[float]):
    """A read-only sequence of floats stored as one float64 array (8 bytes each, not a tuple's
    32): items and iteration give Python floats, equal to the tuple it replaces.

    Example:
        >>> o = Offsets([0.0, 0.5, 1.0])
        >>> (len(o), o[-1], list(o), o == (0.0, 0.5, 1.0))
        (3, 1.0, [0.0, 0.5, 1.0], True)
    """

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[float] | npt.NDArray[np.float64]) -> None:
        """Copy ``values`` into a read-only float64 array."""
        array = np.array(values if isinstance(values, np.ndarray) else list(values),
                         dtype=np.float64)
        if array.ndim != 1:
            raise ValueError(f"offsets must be one-dimensional, got shape {array.shape}")
        array.flags.writeable = False
        self._values = array

    @property
    def values(self) -> npt.NDArray[np.float64]:
        """The offsets as a read-only array."""
        return self._values

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Offsets: ...

    def __getitem__(self, index: int | slice) -> float | Offsets:
        if isinstance(index, slice):
            return Offsets(self._values[index])
        return float(self._values[index])

    def __iter__(self) -> Iterator[float]:
        for at in range(0, len(self._values), _CHUNK):
            chunk: list[float] = self._values[at : at + _CHUNK].tolist()
            yield from chunk

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Offsets):
            return bool(np.array_equal(self._values, other._values))
        if isinstance(other, tuple):
            return len(self) == len(other) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Offsets({len(self)} values)"

    def __reduce__(self) -> tuple[type[Offsets], tuple[npt.NDArray[np.float64]]]:
        return (Offsets, (self._values,))
