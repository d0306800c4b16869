"""What a soak is asked to do: how long, cut into which windows, judged how strictly."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from tunegate.errors import ConfigError

__all__ = ["DEFAULT_WINDOW_S", "MAX_SOAK_S", "SoakPlan"]

DEFAULT_WINDOW_S = 60.0
"""A window long enough that its percentiles rest on hundreds of requests, short enough that a
step is located to the minute."""
MAX_SOAK_S = 7 * 24 * 3600.0
"""Longest soak (7 days), as for one benchmark."""


@dataclass(frozen=True, slots=True)
class SoakPlan:
    """A soak's length and judgement.

    Attributes:
        duration_s: Total load time, seconds; ``duration_s // window_s`` windows are measured
            (a remainder shorter than a window is not run: a short window would be noisier
            than the rest and look like a change).
        window_s: Load time of one window, seconds. Each window is one benchmark: it stops
            sending at ``window_s`` and lets the requests in flight finish.
        tolerance: Relative worsening of a service objective that makes the verdict
            ``degraded`` (:meth:`tunegate.stats.drift.SoakWatch.verdict`).
        alpha: Significance of the trend tests and of the end-of-soak confirmation.
    """

    duration_s: float
    window_s: float = DEFAULT_WINDOW_S
    tolerance: float = 0.05
    alpha: float = 0.01

    def __post_init__(self) -> None:
        for name in ("duration_s", "window_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                flag = "--" + name.removesuffix("_s")
                raise ConfigError(f"{flag}: {value:g} s is not a positive number of seconds")
        if self.duration_s > MAX_SOAK_S:
            raise ConfigError(f"--duration: {self.duration_s:g} s is longer than 7 days "
                              f"({MAX_SOAK_S:g} s); split the soak")
        if self.window_s > self.duration_s:
            raise ConfigError(
                f"--window: {self.window_s:g} s is longer than --duration {self.duration_s:g} "
                "s; a soak needs many windows (default 60 s) to tell a change from noise")
        if not 0.0 <= self.tolerance < 1.0:
            raise ConfigError(f"--tolerance: {self.tolerance:g} must lie in [0, 1) (0.05 = 5%)")
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"alpha: {self.alpha:g} must lie in (0, 1)")

    @property
    def windows(self) -> int:
        """How many windows the soak measures."""
        return max(1, int(self.duration_s / self.window_s + 1e-9))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "windows": self.windows}
