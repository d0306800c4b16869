"""Two-sided CUSUM (Page 1954) on standardised inputs.

``g+_t = max(0, g+_{t-1} + z_t - k)`` and ``g-_t = max(0, g-_{t-1} - z_t - k)``; an alarm when
either exceeds ``h``. ``k`` is half the shift (in sigmas) the chart is tuned for; ``h`` sets the
false-alarm rate. Siegmund's approximation of the in-control run length of one side,
``ARL0 ~ (exp(2 k b) - 2 k b - 1) / (2 k^2)`` with ``b = h + 1.166``, gives about 140 000
samples per side for the defaults k = 0.5, h = 10 (h = 8 would give about 9 500 two-sided: too
close to one false alarm per 5000), and a 3-sigma step is flagged after about 5 samples. The
change is located where the alarming sum last left zero.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(2)
>>> det = CUSUM(mean=0.0, std=1.0)
>>> hits = []
>>> for i, z in enumerate(np.concatenate([rng.normal(0, 1, 200), rng.normal(-3, 1, 50)])):
...     det.update(float(z))
...     if det.drift_detected:
...         hits.append((i, det.change_index))
>>> hits
[(203, 199)]
"""

from __future__ import annotations

from tunegate.errors import ConfigError
from tunegate.stats.drift.base import DriftDetector

__all__ = ["CUSUM"]


class CUSUM(DriftDetector):
    """Two-sided tabular CUSUM.

    Args:
        k: reference value (allowance) in sigmas, half the shift to detect.
        h: decision interval in sigmas.
        mean: reference mean in raw units (None: learned, self-starting).
        std: reference standard deviation (None: learned, self-starting).
        warmup: values that only feed the running estimates at the start.
        guard: the newest values kept out of the running estimates (see the base class).
    """

    def __init__(self, k: float = 0.5, h: float = 10.0, *, mean: float | None = None,
                 std: float | None = None, warmup: int = 10,
                 guard: int = 0) -> None:
        if k < 0 or h <= 0:
            raise ConfigError(f"CUSUM needs k >= 0 and h > 0, got k={k}, h={h}")
        super().__init__(mean=mean, std=std, warmup=warmup, guard=guard)
        self.k = k
        self.h = h
        self._reset()

    def _reset(self) -> None:
        self.g_pos = 0.0
        self.g_neg = 0.0
        self._start_pos = 0
        self._start_neg = 0

    def _step(self, z: float, index: int) -> int | None:
        if self.g_pos == 0.0:
            self._start_pos = index
        if self.g_neg == 0.0:
            self._start_neg = index
        self.g_pos = max(0.0, self.g_pos + z - self.k)
        self.g_neg = max(0.0, self.g_neg - z - self.k)
        if self.g_pos > self.h:
            return self._start_pos
        if self.g_neg > self.h:
            return self._start_neg
        return None
