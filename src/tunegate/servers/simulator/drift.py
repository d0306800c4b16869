"""Known changes of a simulated machine with its age: a throughput step and a KV-cache leak.

These are the ground truth a drift detector is scored against (the ``drift-*`` scenarios). They
are changes of the *system*, not of the measurement, so unlike :mod:`.noise` they apply with
``noise=False`` too: the noise-free run of an old machine is the degraded truth, not the
nominal one. Both are functions of **machine age** ``elapsed_before_s + t`` (``t``: engine
time of this run), like the noise model's slow drift, so a sequence of runs that passes the
accumulated age (:attr:`VirtualRun.elapsed_after_s`, ``VirtualSimulator.elapsed_s``) sees a
change happen once, at its onset, whichever run it falls in.

* **Step** (``step_at_s``, ``step_throughput_factor``): from machine age ``step_at_s`` on,
  every engine step takes ``1 / step_throughput_factor`` times as long (a clock throttled, a
  noisy neighbour on the node), so throughput is multiplied by ``step_throughput_factor``:
  0.92 is a step of -8%. A run that straddles the onset is slowed from its first step at or
  after it.
* **KV-cache leak** (``kv_leak_start_s``, ``kv_leak_per_hour``): from ``kv_leak_start_s`` on,
  blocks are lost to a leak at a fixed rate in time, ``kv_leak_per_hour`` of the KV pool per
  hour (a bug that keeps a reference to some freed blocks). A leaked block is never free again,
  so ``vllm:kv_cache_usage_perc`` (``1 - free / total``, as vLLM computes it) rises steadily and,
  once the usable pool is smaller than what the workload holds at its peak, sequences are
  preempted (``vllm:num_preemptions_total``). The leak only takes blocks that are free at a
  step's start (blocks in use are lost as they are released), and it stops when one
  ``max_model_len`` sequence's worth of blocks is left: the engine keeps serving, one
  preemption after another, instead of deadlocking (a real one would hang or crash there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DriftConfig"]


@dataclass(frozen=True, slots=True)
class DriftConfig:
    """A scenario's known changes with machine age (see the module docstring).

    Attributes:
        step_at_s: Machine age of the throughput step, seconds; ``None`` = no step.
        step_throughput_factor: Throughput after the step over throughput before (0.92 = -8%).
        kv_leak_start_s: Machine age at which the KV-cache leak begins; ``None`` = no leak.
        kv_leak_per_hour: Fraction of the KV pool the leak takes per hour of machine age.

    Example:
        >>> d = DriftConfig(step_at_s=3600.0, step_throughput_factor=0.8)
        >>> d.slowdown(3599.0), d.slowdown(3600.0)
        (1.0, 1.25)
        >>> DriftConfig(kv_leak_start_s=0.0, kv_leak_per_hour=0.5).leaked_blocks(3600.0, 1000, 10)
        500
    """

    step_at_s: float | None = None
    step_throughput_factor: float = 1.0
    kv_leak_start_s: float | None = None
    kv_leak_per_hour: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.step_throughput_factor <= 10.0:
            raise ValueError(
                f"step_throughput_factor must be in (0, 10], got {self.step_throughput_factor}"
            )
        if self.kv_leak_per_hour < 0.0:
            raise ValueError(f"kv_leak_per_hour must be >= 0, got {self.kv_leak_per_hour}")
        for name in ("step_at_s", "kv_leak_start_s"):
            value = getattr(self, name)
            if value is not None and value < 0.0:
                raise ValueError(f"{name} must be >= 0 or None, got {value}")

    @property
    def has_step(self) -> bool:
        """Whether the step changes anything."""
        return self.step_at_s is not None and self.step_throughput_factor != 1.0

    @property
    def has_leak(self) -> bool:
        """Whether the leak takes any block."""
        return self.kv_leak_start_s is not None and self.kv_leak_per_hour > 0.0

    @property
    def active(self) -> bool:
        """Whether the machine changes with age at all (``False``: the engine skips this)."""
        return self.has_step or self.has_leak

    def slowdown(self, age_s: float) -> float:
        """Multiplier of step durations at machine age ``age_s`` (1.0 before the step)."""
        if self.step_at_s is None or age_s < self.step_at_s:
            return 1.0
        return 1.0 / self.step_throughput_factor

    def leaked_blocks(self, age_s: float, num_blocks: int, reserve_blocks: int) -> int:
        """Blocks lost to the leak by machine age ``age_s``.

        Args:
            age_s: Machine age, seconds.
            num_blocks: Size of the KV pool.
            reserve_blocks: Blocks the leak never takes (one ``max_model_len`` sequence).
        """
        if self.kv_leak_start_s is None or age_s <= self.kv_leak_start_s:
            return 0
        hours = (age_s - self.kv_leak_start_s) / 3600.0
        lost = math.floor(num_blocks * self.kv_leak_per_hour * hours)
        return max(0, min(lost, num_blocks - reserve_blocks))

    def leak_saturation_age_s(self, num_blocks: int, reserve_blocks: int) -> float | None:
        """Machine age at which the leak has taken all it can (``None`` without a leak)."""
        if not self.has_leak or self.kv_leak_start_s is None:
            return None
        lost = max(0, num_blocks - reserve_blocks)
        return self.kv_leak_start_s + 3600.0 * lost / (num_blocks * self.kv_leak_per_hour)
