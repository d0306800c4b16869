"""Page-Hinkley test (Page 1954; Hinkley 1971), two-sided, on standardised inputs.

With the running mean ``zbar_t`` of the standardised values, ``m+_t = sum (z_i - zbar_i - delta)``
and ``M+_t = min_i m+_i``; an upward change is signalled when ``m+_t - M+_t > lambda`` (and
symmetrically downward). Unlike CUSUM it needs no reference mean: the running mean is the
reference. The change is located just after the time of the minimum (maximum).

Defaults are in sigmas (``delta = 0.5``, ``lambda = 10``), not in raw units as in river.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(4)
>>> det = PageHinkley(mean=0.0, std=1.0)
>>> hits = []
>>> for i, z in enumerate(np.concatenate([rng.normal(0, 1, 300), rng.normal(3, 1, 50)])):
...     det.update(float(z))
...     if det.drift_detected:
...         hits.append((i, det.change_index))
>>> hits
[(304, 299)]
"""

from __future__ import annotations

from tunegate.errors import ConfigError
from tunegate.stats.drift.base import DriftDetector

__all__ = ["PageHinkley"]


class PageHinkley(DriftDetector):
    """Two-sided Page-Hinkley test.

    Args:
        delta: magnitude tolerated (in sigmas) before a deviation counts.
        threshold: lambda, the alarm threshold in sigmas.
        mean: reference mean in raw units (None: learned, self-starting).
        std: reference standard deviation (None: learned, self-starting).
        warmup: values that only feed the running estimates at the start.
        guard: the newest values kept out of the running estimates (see the base class).
    """

    def __init__(self, delta: float = 0.5, threshold: float = 10.0, *,
                 mean: float | None = None, std: float | None = None, warmup: int = 10,
                 guard: int = 0) -> None:
        if delta < 0 or threshold <= 0:
            raise ConfigError(
                f"Page-Hinkley needs delta >= 0 and threshold > 0, got {delta}, {threshold}")
        super().__init__(mean=mean, std=std, warmup=warmup, guard=guard)
        self.delta = delta
        self.threshold = threshold
        self._reset()

    def _reset(self) -> None:
        self._n = 0
        self._zbar = 0.0
        self._up = 0.0
        self._down = 0.0
        self._up_min = 0.0
        self._down_max = 0.0
        self._up_at = 0
        self._down_at = 0

    def _step(self, z: float, index: int) -> int | None:
        if self._n == 0:
            self._up_at = self._down_at = index
        self._n += 1
        self._zbar += (z - self._zbar) / self._n
        self._up += z - self._zbar - self.delta
        self._down += z - self._zbar + self.delta
        if self._up < self._up_min:
            self._up_min, self._up_at = self._up, index + 1
        if self._down > self._down_max:
            self._down_max, self._down_at = self._down, index + 1
        if self._up - self._up_min > self.threshold:
            return self._up_at
        if self._down_max - self._down > self.threshold:
            return self._down_at
        return None
