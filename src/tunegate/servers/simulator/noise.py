"""Measurement noise and slow drift, seeded.

A step's duration is multiplied by ``window_factor(k) * drift(t) * jitter``:

* ``window_factor``: lognormal with sigma ``sigma`` (default 2%), drawn once per window of
  ``window_s`` seconds of engine time (default 900 s, longer than one benchmark run, so one run
  sees about one draw: run-to-run noise of about ``sigma``, what the seed article reports).
* ``drift``: ``1 + drift_per_hour * (elapsed_before_s + t) / 3600``: slow slowdown (thermal
  state, fragmentation) as a function of **machine age**, not of this engine's clock:
  ``elapsed_before_s`` is how long the machine had been running before this run started, so a
  sequence of runs that passes the accumulated time sees a steady trend across runs (what a drift
  detector must find). Window draws are indexed by engine time of this run.
* ``jitter``: per-step lognormal with sigma ``step_jitter`` (averages out within a run).

With ``enabled=False`` every factor is exactly 1: the ground truth. A scenario's known changes
with machine age (a throughput step, a KV-cache leak) are not noise and live in :mod:`.drift`:
they apply with noise off too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["FrontendLatency", "NoiseConfig", "NoiseModel"]

_BATCH = 4096


@dataclass(frozen=True, slots=True)
class NoiseConfig:
    """Noise parameters of a scenario (see the module docstring)."""

    sigma: float = 0.02
    window_s: float = 900.0
    step_jitter: float = 0.01
    drift_per_hour: float = 0.01


class NoiseModel:
    """Seeded multiplicative noise for step durations.

    Args:
        config: Noise parameters.
        seed: An integer or a sequence of integers (e.g. ``(seed, repeat, config_key)``).
        enabled: ``False``: every factor is exactly 1.
        elapsed_before_s: Machine age at engine time 0 (drift only).

    Example:
        >>> m = NoiseModel(NoiseConfig(), seed=1)
        >>> round(m.factor(0.0), 6) == round(NoiseModel(NoiseConfig(), seed=1).factor(0.0), 6)
        True
        >>> NoiseModel(NoiseConfig(), seed=1, enabled=False).factor(123.0)
        1.0
    """

    def __init__(
        self,
        config: NoiseConfig,
        seed: int | Sequence[int],
        *,
        enabled: bool = True,
        elapsed_before_s: float = 0.0,
    ) -> None:
        if elapsed_before_s < 0:
            raise ValueError(f"elapsed_before_s must be >= 0, got {elapsed_before_s}")
        self.config = config
        self.enabled = enabled
        self.elapsed_before_s = float(elapsed_before_s)
        key = [seed] if isinstance(seed, int) else list(seed)
        self._window_rng = np.random.default_rng([*key, 1])
        self._jitter_rng = np.random.default_rng([*key, 2])
        self._windows: list[float] = []
        self._jitter: list[float] = []
        self._pos = 0

    def window_factor(self, t_s: float) -> float:
        """The factor of the window containing engine time ``t_s``."""
        k = int(t_s // self.config.window_s) if t_s > 0 else 0
        while len(self._windows) <= k:
            self._windows.append(float(self._window_rng.lognormal(0.0, self.config.sigma)))
        return self._windows[k]

    def factor(self, t_s: float) -> float:
        """Multiplier for a step starting at engine time ``t_s`` (1.0 when disabled)."""
        if not self.enabled:
            return 1.0
        if self._pos >= len(self._jitter):
            self._jitter = self._jitter_rng.lognormal(0.0, self.config.step_jitter, _BATCH).tolist()
            self._pos = 0
        jitter = self._jitter[self._pos]
        self._pos += 1
        return self.window_factor(t_s) * self.drift(t_s) * jitter

    def drift(self, t_s: float) -> float:
        """Drift factor at engine time ``t_s`` (machine age ``elapsed_before_s + t_s``).

        Example:
            >>> m = NoiseModel(NoiseConfig(drift_per_hour=0.01), 0, elapsed_before_s=7200.0)
            >>> round(m.drift(0.0), 4)
            1.02
        """
        if not self.enabled:
            return 1.0
        return 1.0 + self.config.drift_per_hour * (self.elapsed_before_s + t_s) / 3600.0


class FrontendLatency:
    """Per-request host-side latency before the scheduler sees a request (seeded lognormal).

    Part of the system, not of the measurement: with noise off the draws come from a fixed
    stream, so the ground truth is a function of configuration and workload only.

    Example:
        >>> f = FrontendLatency(1.0, 0.0, seed=3)
        >>> f.next_ns()
        1000000000
    """

    def __init__(self, mean_s: float, sigma: float, seed: int | Sequence[int]) -> None:
        self.mean_s = mean_s
        self.sigma = sigma
        key = [seed] if isinstance(seed, int) else list(seed)
        self._rng = np.random.default_rng([*key, 3])
        self._buf: list[int] = []
        self._pos = 0

    def next_ns(self) -> int:
        """The next request's latency in integer nanoseconds."""
        if self.mean_s <= 0.0:
            return 0
        if self.sigma <= 0.0:
            return round(self.mean_s * 1e9)
        if self._pos >= len(self._buf):
            mu = -0.5 * self.sigma**2  # mean of the lognormal factor is exactly 1
            draws = self._rng.lognormal(mu, self.sigma, _BATCH) * self.mean_s * 1e9
            self._buf = np.rint(draws).astype(np.int64).tolist()
            self._pos = 0
        value = self._buf[self._pos]
        self._pos += 1
        return value
