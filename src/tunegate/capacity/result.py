"""A capacity search's answer: the load, its interval, every probe, and the saturation curve.

JSON format ``tunegate-capacity/1`` (``tunegate capacity --json`` / ``--out``):

* ``capacity``, ``ci_low``, ``ci_high``: the largest load meeting every target, and its
  interval at ``confidence`` (``ci_high`` is ``null`` when every probe passed: "at least").
* ``status``: why the search ended: ``resolved`` (interval within +-resolution),
  ``max_probes`` / ``budget_spent`` (the interval as it stands, wider), ``at_least`` (met at the
  top of the range), ``zero`` (missed at the bottom: capacity 0, the evidence in ``probes``),
  ``server_died`` (the server stopped answering; the capacity is bounded below that load),
  ``invalid_probes`` (the gauge rejected the probes), ``interrupted``.
* ``fit``: how the interval was made: ``probit`` (the probit model of pass/fail against log
  load, profile-likelihood interval; ``spread`` is the fitted run-to-run spread of the passing
  load), ``zero`` or ``at_least``.
* ``probes``: every probe in run order, invalid ones included with the gauge's findings.
* ``curve``: one row per load probed (replicates averaged): throughput and each target's
  statistic, the saturation curve.
* ``benchmark_seconds``: time spent benchmarking (virtual seconds on the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunegate.capacity.plan import CapacityPlan
from tunegate.capacity.probe import Probe
from tunegate.stats.boundary import Boundary

__all__ = ["FORMAT", "Anchor", "CapacityResult"]

FORMAT = "tunegate-capacity/1"


@dataclass(frozen=True, slots=True)
class Anchor:
    """The burst a search starts from: every request at once. ``throughput``: requests ended
    per second; ``concurrency``: the mean number in flight (the sum of the requests' latencies
    over the burst's length, Little's law)."""

    throughput: float
    concurrency: float
    requests: int
    benchmark_s: float

    def load(self, by: str) -> float:
        """Where a search by ``by`` starts."""
        return self.throughput if by == "rate" else self.concurrency

    def to_json(self) -> dict[str, Any]:
        return {"request_throughput": round(self.throughput, 6),
                "mean_in_flight": round(self.concurrency, 3), "requests": self.requests,
                "benchmark_s": round(self.benchmark_s, 3)}


def _round(value: float | None, by: str) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    if by == "concurrency":
        return float(math.floor(value + 1e-9))
    return float(f"{value:.4g}")


@dataclass(frozen=True, slots=True)
class CapacityResult:
    """The answer (module docstring)."""

    plan: CapacityPlan
    target: str
    status: str
    capacity: float | None
    ci_low: float | None
    ci_high: float | None
    boundary: Boundary
    probes: tuple[Probe, ...]
    anchor: Anchor | None
    benchmark_s: float

    @classmethod
    def build(cls, plan: CapacityPlan, target: str, probes: Sequence[Probe],
              boundary: Boundary, status: str, anchor: Anchor | None) -> CapacityResult:
        """The numbers ``boundary`` gives, in load units, for the search's ``status``."""
        spent = sum(p.benchmark_s for p in probes) + (anchor.benchmark_s if anchor else 0.0)
        capacity: float | None
        low: float | None
        high: float | None
        if boundary.kind == "none":
            capacity = low = high = None
        elif boundary.kind == "zero":
            capacity, low, high = 0.0, 0.0, math.exp(boundary.high)
        elif boundary.kind == "at_least":
            capacity = low = math.exp(boundary.root)
            high = None
        else:
            capacity = math.exp(boundary.root)
            low = math.exp(boundary.low) if math.isfinite(boundary.low) else 0.0
            high = math.exp(boundary.high) if math.isfinite(boundary.high) else None
        died = [p.load for p in probes if p.stop == "server_died"]
        if died and capacity is not None:  # whatever the fit says, not at or above that load
            capacity = min(capacity, min(died))
            high = min(died) if high is None else min(high, min(died))
        if capacity is not None and low is not None:
            low = min(low, capacity)
        if capacity is not None and high is not None:
            high = max(high, capacity)
        return cls(plan, target, status, _round(capacity, plan.by), _round(low, plan.by),
                   _round(high, plan.by), boundary, tuple(probes), anchor, spent)

    @property
    def binding(self) -> str | None:
        """The target that limits the capacity: binding at the probes nearest the answer."""
        valid = [p for p in self.probes if p.verdict != "invalid"]
        if not valid:
            return None
        centre = math.exp(self.boundary.root) if math.isfinite(self.boundary.root) else 1.0
        return min(valid, key=lambda p: abs(math.log(p.load / centre))).binding

    def curve(self) -> list[dict[str, Any]]:
        """One row per load probed, replicates averaged (invalid probes left out)."""
        rows: list[dict[str, Any]] = []
        valid = [p for p in self.probes if p.verdict != "invalid"]
        for load in sorted({p.load for p in valid}):
            at = [p for p in valid if p.load == load]
            row: dict[str, Any] = {"load": load, "probes": len(at),
                                   "passed": sum(p.verdict == "pass" for p in at)}
            for key in at[0].stats:
                numbers = [p.stats[key] for p in at if p.stats.get(key) is not None]
                row[key] = (round(float(np.mean([float(n) for n in numbers if n is not None])),
                                  6) if numbers else None)
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        b = self.boundary
        return {
            "format": FORMAT, "target": self.target, "by": self.plan.by,
            "unit": self.plan.unit, "capacity": self.capacity, "ci_low": self.ci_low,
            "ci_high": self.ci_high, "confidence": self.plan.confidence,
            "status": self.status, "binding_slo": self.binding,
            "slos": [s.to_json() for s in self.plan.slos],
            "fit": {"kind": b.kind, "spread": b.spread, "misordered_pairs": b.misordered},
            "benchmark_seconds": round(self.benchmark_s, 3),
            "plan": self.plan.to_json(),
            "anchor": self.anchor.to_json() if self.anchor else None,
            "probes": [p.to_json() for p in self.probes],
            "curve": self.curve(),
        }
