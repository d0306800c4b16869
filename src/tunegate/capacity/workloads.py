"""The workload of each probe: the user's workload with the search's load in place of its own.

Every source builds its probes here (``tunegate capacity`` through ``bench``, the tuner through
its engine), so a probe at one load is the same requests whoever runs it.
"""

from __future__ import annotations

import math
from typing import Any

from tunegate.capacity.plan import CapacityPlan
from tunegate.workload.config import WorkloadConfig

__all__ = ["ANCHOR_REQUESTS", "anchor_workload", "probe_knob", "probe_workload"]

ANCHOR_REQUESTS = 200
"""Requests of the anchor burst (fewer when the plan's probes are smaller)."""


def probe_knob(plan: CapacityPlan, load: float) -> dict[str, Any]:
    """The workload fields that set ``load``: an open-loop rate, or whole streams."""
    return {"request_rate": load} if plan.by == "rate" else {"concurrency": round(load)}


def _with(base: WorkloadConfig, fields: dict[str, Any], seed: int) -> WorkloadConfig:
    """``base`` with its own load replaced by ``fields`` (and its arrival law kept only for
    an open loop)."""
    config = base.model_dump(exclude={"concurrency", "request_rate"})
    config.update(fields, seed=seed)
    if config.get("request_rate") is None:
        config.pop("arrival", None)
        config.pop("burstiness", None)
    return WorkloadConfig(**config)


def probe_workload(base: WorkloadConfig, plan: CapacityPlan, load: float,
                   seed: int) -> WorkloadConfig:
    """The workload of a probe at ``load`` (:meth:`CapacityPlan.probe_size` requests).

    Raises:
        pydantic.ValidationError: The workload cannot be built at that load.
    """
    requests, warmup = plan.probe_size(load)
    return _with(base, {**probe_knob(plan, load), "num_requests": requests,
                        "num_warmup": warmup}, seed)


def anchor_workload(base: WorkloadConfig, plan: CapacityPlan, seed: int) -> WorkloadConfig:
    """The anchor: every request at once, no warm-up (what the server sustains flat out)."""
    return _with(base, {"request_rate": math.inf, "num_warmup": 0,
                        "num_requests": min(plan.probe_requests, ANCHOR_REQUESTS)}, seed)
