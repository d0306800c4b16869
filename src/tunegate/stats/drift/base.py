"""The shared drift-detector interface: ``update(x)``, ``drift_detected``, ``change_index``.

Every detector sees *standardised* inputs, so one set of defaults works for throughput in tok/s
and for TTFT in ms (river's Page-Hinkley defaults are in raw units; ours are in sigmas):

- ``mean`` and ``std`` given (e.g. from a :class:`~tunegate.stats.noise.NoiseEstimate` of the
  baseline): ``z = (x - mean) / std``.
- not given: *self-starting* standardisation (Hawkins 1987). Each value is standardised by the
  running mean and standard deviation of the k values before it,
  ``T = (x - mean_k) / (s_k sqrt(1 + 1/k))``, which is Student-t with k - 1 degrees of freedom
  for normal in-control data, and mapped to a standard normal score ``z = Phi^-1(F_t(T))``. So
  ``z`` is exactly N(0, 1) while nothing changes, however few values were seen, and the false
  alarm rates of the defaults hold without a long warm-up (a plug-in estimate from 30 values
  would make CUSUM's false-alarm rate several times higher: measured in the tests). The first
  ``warmup`` values only feed the running estimates. (A given ``std`` with a learned mean uses
  ``(x - mean_k) / (std sqrt(1 + 1/k))``.)

Guard band (``guard = g``): the running estimates leave out the ``g`` newest values, so a value
is scored against the values up to ``g`` before it. Without it, a step feeds its own first
windows into the reference: each one pulls the running mean towards the new level and inflates
the spread, so the next scores shrink, and a step soon after the warm-up (a short soak's
reference is short) can fade before a second detector alarms. With it, the first ``g`` values of
a new regime are all scored against the old one. While nothing changes the score is exactly as
calibrated (a value is still independent of the values it is scored against); the reference is
``g`` values shorter. Scoring starts once ``warmup`` values were seen, the guarded ones included
(``warmup >= guard + 3``: at least three in the reference).

After a detection the next ``update`` starts afresh on the new regime (running estimates and
detector state reset; a given ``mean`` is no longer assumed). ``change_index`` is the 0-based
position, in everything passed to ``update`` since construction, of the first sample the
detector attributes to the new regime: *when* it changed, not only *that* it changed.

Example (seeded; any detector works the same way):

>>> import numpy as np
>>> from tunegate.stats.drift import CUSUM
>>> rng = np.random.default_rng(1)
>>> stream = np.concatenate([rng.normal(100, 2, 300), rng.normal(106, 2, 100)])
>>> det = CUSUM()
>>> alarms = []
>>> for i, x in enumerate(stream):
...     det.update(float(x))
...     if det.drift_detected:
...         alarms.append((i, det.change_index))
>>> alarms
[(303, 297)]
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque

from scipy import special

from tunegate.errors import ConfigError

__all__ = ["DriftDetector"]


class DriftDetector(ABC):
    """Base class: standardisation, warm-up, reset after drift, and the change bookkeeping.

    Args:
        mean: reference mean in raw units (None: learn it, self-starting).
        std: reference standard deviation in raw units (None: learn it, self-starting).
        warmup: values that only feed the running estimates before detection starts (>= 3).
        guard: the newest values kept out of the running estimates (module docstring).
    """

    def __init__(self, *, mean: float | None = None, std: float | None = None,
                 warmup: int = 10, guard: int = 0) -> None:
        if std is not None and (not math.isfinite(std) or std <= 0):
            raise ConfigError(f"drift detector std must be > 0, got {std}")
        if mean is not None and not math.isfinite(mean):
            raise ConfigError(f"drift detector mean must be finite, got {mean}")
        if warmup < 3:
            raise ConfigError(f"warmup must be at least 3 samples, got {warmup}")
        if guard < 0 or warmup < guard + 3:
            raise ConfigError(f"guard must lie in [0, warmup - 3], got {guard} with warmup "
                              f"{warmup}")
        self.guard = guard
        self._given_mean = mean
        self._given_std = std
        self.warmup = warmup
        self._seen = 0
        self._drift = False
        self._change_index: int | None = None
        self._start_fresh(mean)

    def _start_fresh(self, mean: float | None) -> None:
        self._mean = mean
        self._guarded: deque[float] = deque()
        self._k = 0
        self._run_mean = 0.0
        self._run_m2 = 0.0

    @property
    def drift_detected(self) -> bool:
        """True right after the ``update`` that detected a change (False again on the next)."""
        return self._drift

    @property
    def change_index(self) -> int | None:
        """0-based index of the first sample of the new regime, for the last detection."""
        return self._change_index

    @property
    def n_seen(self) -> int:
        """Samples passed to :meth:`update` so far."""
        return self._seen

    def _standardise(self, x: float) -> float | None:
        """The standard normal score of ``x`` given what came before (None while warming up)."""
        k = self._k
        z: float | None = None
        if self._mean is not None and self._given_std is not None:
            z = (x - self._mean) / self._given_std
        elif k + len(self._guarded) >= self.warmup:
            if self._given_std is not None:
                z = (x - self._run_mean) / (self._given_std * math.sqrt(1.0 + 1.0 / k))
            else:
                if self._mean is not None:  # known mean: spread around it, k degrees of freedom
                    s2 = (self._run_m2 + k * (self._run_mean - self._mean) ** 2) / k
                    t, df = (x - self._mean) / math.sqrt(s2) if s2 > 0 else 0.0, k
                else:
                    s2 = self._run_m2 / (k - 1)
                    t = (x - self._run_mean) / math.sqrt(s2 * (1.0 + 1.0 / k)) if s2 > 0 else 0.0
                    df = k - 1
                p = min(max(float(special.stdtr(df, t)), 1e-300), 1.0 - 1e-16)
                z = float(special.ndtri(p))
        self._guarded.append(x)
        if len(self._guarded) > self.guard:
            self._absorb(self._guarded.popleft())
        return z

    def _absorb(self, x: float) -> None:
        """Add ``x`` to the running mean and spread (Welford)."""
        self._k += 1
        delta = x - self._run_mean
        self._run_mean += delta / self._k
        self._run_m2 += delta * (x - self._run_mean)

    def update(self, x: float) -> None:
        """Feed one raw observation; afterwards check :attr:`drift_detected`."""
        if not math.isfinite(x):
            raise ConfigError(f"drift detector got a non-finite value {x}")
        index = self._seen
        self._seen += 1
        if self._drift:  # the previous update detected a change: start on the new regime
            self._drift = False
            self._start_fresh(None)
            self._reset()
        z = self._standardise(x)
        if z is None:
            return
        located = self._step(z, index)
        if located is not None:
            self._drift = True
            self._change_index = located

    @abstractmethod
    def _step(self, z: float, index: int) -> int | None:
        """Consume one standardised value; return the change index on a detection."""

    @abstractmethod
    def _reset(self) -> None:
        """Forget the detector-specific state (called when a new regime starts)."""
