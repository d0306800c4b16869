"""Capacity under SLOs: the most load a deployment takes while meeting its latency targets.

- :mod:`.plan` what is searched (knob, targets, range, resolution, probe size, budget).
- :mod:`.probe` one validated benchmark at one load -> margins, their errors, a verdict.
- :mod:`.search` where the next probe goes and when to stop (pure, replayable).
- :mod:`.runner` the loop over a :class:`~tunegate.capacity.probe.ProbeSource`.
- :mod:`.result` the answer, its interval, the probes and the saturation curve (JSON).

The statistics of the interval are :mod:`tunegate.stats.boundary`; the targets and their
margins :mod:`tunegate.metrics.slo_spec`. A source that runs probes through ``tunegate bench``
(the simulator or a URL) is :class:`tunegate.api.BenchProbes`.
"""

from __future__ import annotations

from tunegate.capacity.plan import CapacityPlan, requests_for
from tunegate.capacity.probe import Probe, ProbeRun, ProbeSource
from tunegate.capacity.result import FORMAT, CapacityResult
from tunegate.capacity.runner import find_capacity

__all__ = ["FORMAT", "CapacityPlan", "CapacityResult", "Probe", "ProbeRun", "ProbeSource",
           "find_capacity", "requests_for"]
