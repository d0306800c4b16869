"""What a capacity search looks for, and what it may spend."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tunegate.errors import ConfigError
from tunegate.metrics.slo_spec import SloSpec

__all__ = ["LOAD_UNITS", "CapacityPlan", "Knob", "requests_for"]

Knob = Literal["rate", "concurrency"]
LOAD_UNITS: dict[str, str] = {"rate": "req/s", "concurrency": "streams"}
DEFAULT_RANGE: dict[str, tuple[float, float]] = {"rate": (0.05, 1000.0),
                                                 "concurrency": (1.0, 1024.0)}
"""``min_load``, ``max_load`` when not given."""

MIN_PROBE_REQUESTS = 200
"""Fewest measured requests per probe, whatever the targets."""
WAVES = 4
"""Fewest measured requests per stream of a closed-loop probe."""
MIN_RATE_PROBE_REQUESTS = 500
"""Fewest per rate probe: whether the server keeps up (the backlog,
:mod:`tunegate.capacity.saturation`) is read from the growth of the requests in flight, which
over 200 requests read 0.98-1.07 on a server at two thirds of its capacity (h100-8b, 6 req/s),
too close to the 1.1 limit."""
BEYOND_QUANTILE = 10
"""Requests a probe needs beyond its highest quantile (p99: 1000), so that quantile is read
from ten values, not from one."""


def requests_for(slos: tuple[SloSpec, ...], by: str = "concurrency") -> int:
    """Measured requests per probe the targets need: at least :data:`BEYOND_QUANTILE` beyond
    the highest quantile or attainment share, and :data:`MIN_PROBE_REQUESTS`
    (:data:`MIN_RATE_PROBE_REQUESTS` by rate)."""
    qs = [s.q for s in slos if s.stat != "mean" and s.q is not None]
    beyond = max((math.ceil(round(BEYOND_QUANTILE / (1 - q), 6)) for q in qs), default=0)
    least = MIN_RATE_PROBE_REQUESTS if by == "rate" else MIN_PROBE_REQUESTS
    return max(least, beyond)


@dataclass(frozen=True, slots=True, init=False)
class CapacityPlan:
    """A capacity search.

    Attributes:
        by: The load knob: ``rate`` (open-loop Poisson arrivals, req/s, no concurrency cap, so
            a request waiting for the server waits inside its TTFT) or ``concurrency`` (closed
            loop, whole streams).
        slos: The targets every probe is held to.
        start: First load; ``None``: what a short burst (the anchor) sustained: its
            throughput by rate, its mean number in flight by concurrency.
        min_load, max_load: The range searched. A target missed at ``min_load`` gives capacity
            0; one met at ``max_load`` gives "at least ``max_load``".
        resolution: Stop once the interval is within +-``resolution`` of the estimate.
        confidence: Of the interval.
        probe_requests: Measured requests per probe (:func:`requests_for` by default; a closed
            loop measures at least :data:`WAVES` per stream, :meth:`probe_size`).
        warmup: Requests sent first in each probe, measured and left out (a closed loop at
            least one per stream).
        max_probes: Most probes (the anchor not counted).
        budget_s: Most benchmark-seconds in all (virtual seconds on the simulator).
        seed: Workload seed of the first probe; probe ``i`` uses ``seed + i``, so repeated
            loads see fresh requests and arrivals.
        stop_below: A load the answer only matters above: the search stops (``below``) once
            its whole interval lies below it. The tuner sets it to what a candidate must
            beat, so a config that cannot win is not measured to the resolution.
    """

    by: Knob
    slos: tuple[SloSpec, ...]
    start: float | None
    min_load: float
    max_load: float
    resolution: float
    confidence: float
    probe_requests: int
    warmup: int
    max_probes: int
    budget_s: float | None
    seed: int
    stop_below: float | None

    def __init__(self, by: Knob, slos: tuple[SloSpec, ...], *, start: float | None = None,
                 min_load: float | None = None, max_load: float | None = None,
                 resolution: float = 0.05, confidence: float = 0.95,
                 probe_requests: int | None = None, warmup: int | None = None,
                 max_probes: int = 20, budget_s: float | None = None, seed: int = 0,
                 stop_below: float | None = None) -> None:
        """``None`` takes the default: the knob's range (:data:`DEFAULT_RANGE`),
        :func:`requests_for` the targets, 5% warm-up (at least 10)."""
        low, high = DEFAULT_RANGE[by]
        low = low if min_load is None else min_load
        requests = requests_for(slos, by) if probe_requests is None else probe_requests
        given = {"by": by, "slos": tuple(slos), "start": start, "min_load": low,
                 "max_load": max(high, 10 * low) if max_load is None else max_load,
                 "resolution": resolution, "confidence": confidence,
                 "probe_requests": requests,
                 "warmup": max(10, math.ceil(0.05 * requests)) if warmup is None else warmup,
                 "max_probes": max_probes, "budget_s": budget_s, "seed": seed,
                 "stop_below": stop_below}
        for name, value in given.items():
            object.__setattr__(self, name, value)
        self._check()

    def _check(self) -> None:
        if not self.slos:
            raise ConfigError("--slo: a capacity search needs at least one target")
        if not 0 < self.min_load < self.max_load or not math.isfinite(self.max_load):
            raise ConfigError(f"--min-load {self.min_load:g} and --max-load "
                              f"{self.max_load:g}: need 0 < min < max, both finite")
        if self.by == "concurrency" and (self.min_load != int(self.min_load)
                                         or self.max_load != int(self.max_load)):
            raise ConfigError("--min-load/--max-load: concurrency is a whole number of streams")
        if self.start is not None and not self.min_load <= self.start <= self.max_load:
            raise ConfigError(f"--start {self.start:g} is outside [--min-load, --max-load] = "
                              f"[{self.min_load:g}, {self.max_load:g}]")
        if not 0.005 <= self.resolution <= 0.5:
            raise ConfigError(f"--resolution {self.resolution:g}: give 0.005 to 0.5 (0.05 = "
                              "an interval within +-5%)")
        if not 0.5 <= self.confidence < 1:
            raise ConfigError(f"--confidence {self.confidence:g}: give 0.5 to 0.999")
        if self.probe_requests < 20:
            raise ConfigError(f"--probe-requests {self.probe_requests}: at least 20")
        if self.warmup < 0:
            raise ConfigError(f"--num-warmup {self.warmup}: 0 or more")
        if self.max_probes < 2:
            raise ConfigError(f"--max-probes {self.max_probes}: at least 2 (a pass and a fail)")
        if self.budget_s is not None and not self.budget_s > 0:
            raise ConfigError(f"--budget {self.budget_s:g}: a positive number of seconds")

    def probe_size(self, load: float) -> tuple[int, int]:
        """Measured and warm-up requests of a probe at ``load``. A closed loop of ``c`` streams
        needs a wave of ``c`` to fill before measuring, and several waves measured: at least
        ``c`` warm-up and ``WAVES * c`` measured requests (fewer requests than streams would
        never reach that concurrency at all)."""
        if self.by == "rate":
            return self.probe_requests, self.warmup
        streams = round(load)
        return max(self.probe_requests, WAVES * streams), max(self.warmup, streams)

    @property
    def unit(self) -> str:
        return LOAD_UNITS[self.by]

    def to_json(self) -> dict[str, object]:
        return {"by": self.by, "unit": self.unit, "start": self.start,
                "min_load": self.min_load, "max_load": self.max_load,
                "resolution": self.resolution, "confidence": self.confidence,
                "probe_requests": self.probe_requests, "warmup": self.warmup,
                "max_probes": self.max_probes, "budget_s": self.budget_s, "seed": self.seed,
                "stop_below": self.stop_below}
