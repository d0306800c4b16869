"""The accept threshold: t = max(multiplier x sigma_baseline, floor), by default max(2 sigma, 3%).

A change is worth accepting only when its improvement is at least twice the run-to-run noise
measured on this machine now: with sigma = 2% the bar is 4%, with sigma = 5% it is 10%. A fixed
3% bar silently assumes the noise is constant, and it is not: it moves with the machine and
its load.

Why the floor: on an unusually quiet machine 2 sigma can shrink to 0.5%, and a statistically
significant 0.5% is still not worth a configuration change (it will not survive the next driver
update, a different request mix, or a noisier neighbour). The floor keeps "significant" from
turning into "trivial". Both constants are configurable; the record says which one was binding.

The threshold is a bar for the *size* of the estimated improvement; whether the improvement is
real at all is the test's job (compare.py, sequential.py), and the gate requires both.

Example (seeded):

>>> import numpy as np
>>> from tunegate.stats.noise import estimate_noise
>>> rng = np.random.default_rng(3)
>>> noisy = estimate_noise(100 * (1 + 0.03 * rng.standard_normal(12)))
>>> t = ThresholdPolicy().threshold(noisy.sigma)
>>> round(t.value, 4), t.binding
(0.095, 'noise')
>>> ThresholdPolicy().threshold(0.004).value, ThresholdPolicy().threshold(0.004).binding
(0.03, 'floor')
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from tunegate.errors import ConfigError

__all__ = ["DEFAULT_FLOOR", "DEFAULT_MULTIPLIER", "Threshold", "ThresholdPolicy"]

DEFAULT_MULTIPLIER = 2.0
DEFAULT_FLOOR = 0.03


@dataclass(frozen=True)
class Threshold:
    """One computed threshold and how it came about.

    Attributes:
        value: the bar for the relative improvement (0.04 = 4%).
        sigma: relative sigma_baseline it was computed from.
        multiplier: the noise multiplier (2 by default).
        floor: the lower bound (0.03 by default).
        binding: ``"noise"`` when multiplier x sigma set the bar, ``"floor"`` otherwise.
    """

    value: float
    sigma: float
    multiplier: float
    floor: float
    binding: Literal["noise", "floor"]

    def to_dict(self) -> dict[str, float | str]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass(frozen=True)
class ThresholdPolicy:
    """``t = max(multiplier * sigma, floor)``.

    Attributes:
        multiplier: how many baseline sigmas an improvement must reach (>= 0).
        floor: the smallest relative improvement ever worth accepting (>= 0).
    """

    multiplier: float = DEFAULT_MULTIPLIER
    floor: float = DEFAULT_FLOOR

    def __post_init__(self) -> None:
        for name in ("multiplier", "floor"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"threshold {name} must be a finite number >= 0, got {value}")

    def threshold(self, sigma: float) -> Threshold:
        """The accept threshold for a metric whose relative baseline noise is ``sigma``.

        Args:
            sigma: relative run-to-run standard deviation (0.02 = 2%).

        Raises:
            ConfigError: sigma negative or not finite.
        """
        if not math.isfinite(sigma) or sigma < 0:
            raise ConfigError(f"sigma_baseline must be a finite number >= 0, got {sigma}")
        noise_bar = self.multiplier * sigma
        if noise_bar >= self.floor:
            return Threshold(noise_bar, sigma, self.multiplier, self.floor, "noise")
        return Threshold(self.floor, sigma, self.multiplier, self.floor, "floor")
