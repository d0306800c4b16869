"""Fault injection: the ways a real engine process fails, switchable per scenario or per run.

A tuner must survive these (roll back, mark the environment abnormal), so the simulator must be
able to produce them on purpose, reproducibly (every random draw comes from the run's seed).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from tunegate.errors import ConfigError, ServerError

__all__ = ["FaultConfig", "check_start"]


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Faults to inject.

    Attributes:
        start_failure_prob: Probability that the engine fails to start (seeded draw).
        slow_start_s: Extra start-up time before the port is bound (HTTP) / reported (virtual).
        crash_after_requests: The engine dies after this many finished requests; in-flight
            streams are cut (``truncated``) and later connections are refused.
        lying_health: ``/health`` answers 200 while every completion fails with HTTP 500.
    """

    start_failure_prob: float = 0.0
    slow_start_s: float = 0.0
    crash_after_requests: int | None = None
    lying_health: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.start_failure_prob <= 1.0:
            raise ConfigError(
                f"start_failure_prob={self.start_failure_prob!r} is invalid; "
                "valid values: a probability in [0, 1]"
            )
        if self.slow_start_s < 0:
            raise ConfigError(
                f"slow_start_s={self.slow_start_s!r} is invalid; valid values: seconds >= 0"
            )
        if self.crash_after_requests is not None and self.crash_after_requests < 0:
            raise ConfigError(
                f"crash_after_requests={self.crash_after_requests!r} is invalid; "
                "valid values: an integer >= 0"
            )

    def merged(self, other: FaultConfig | None) -> FaultConfig:
        """``other``'s non-default fields override this config's."""
        if other is None:
            return self
        default = FaultConfig()
        changes = {
            name: getattr(other, name)
            for name in FaultConfig.__slots__
            if getattr(other, name) != getattr(default, name)
        }
        return replace(self, **changes)


def check_start(faults: FaultConfig, seed: int, attempt: int = 0) -> None:
    """Raise like a failed engine start when the seeded draw says so.

    Each ``attempt`` draws afresh, so a retry succeeds with probability ``1 - p`` whatever the
    earlier attempts did; the same ``(seed, attempt)`` always gives the same outcome.

    Args:
        faults: The fault configuration.
        seed: The run's seed.
        attempt: Start attempt number (0 for the first start).

    Raises:
        ServerError: The simulated start failed (message as an engine would log it).
    """
    if faults.start_failure_prob > 0.0:
        draw = random.Random(f"start-failure:{seed}:{attempt}").random()
        if draw < faults.start_failure_prob:
            raise ServerError(
                "simulated engine failed to start: worker process exited during device "
                f"initialisation (injected fault, start_failure_prob={faults.start_failure_prob}, "
                f"attempt {attempt})"
            )
