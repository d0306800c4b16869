"""``[capacity]`` of a tune config: the capacity search each config's evaluation runs when
``[objective] metric = "capacity"`` (:mod:`tunegate.capacity`; the run's side in
:mod:`tunegate.tuner.capacity_eval`).

The fields are ``tunegate capacity``'s flags under the same names (``slo``, ``by``,
``min_load``...); the workload is the config's ``[workload]`` with each probe's load in place
of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from tunegate.errors import ConfigError
from tunegate.metrics.slo_spec import DEFAULT_ATTAINMENT, parse_slo_specs
from tunegate.tuner.config_search import Strict
from tunegate.tuner.metric_names import CAPACITY
from tunegate.workload.config import WorkloadConfig

if TYPE_CHECKING:  # the capacity stage loads SciPy: imported where a plan is built
    from tunegate.capacity import CapacityPlan

__all__ = ["CAPACITY", "CapacitySection", "capacity_objective_complaint"]


class CapacitySection(Strict):
    """What each evaluation's capacity search looks for (``tunegate capacity``'s flags)."""

    slo: list[str] = Field(min_length=1, description="targets, as --slo takes them: "
                           "'ttft_p99:500', 'p99_ttft_ms<=500', or bare 'ttft:500 tpot:50' "
                           "(one attainment target)")
    attainment: float = Field(default=DEFAULT_ATTAINMENT, gt=0, lt=1,
                              description="share of requests the bare bounds must hold for")
    by: Literal["rate", "concurrency"] = Field(default="rate", description="the load knob: "
                                               "open-loop req/s or closed-loop streams")
    min_load: float | None = Field(default=None, gt=0)
    max_load: float | None = Field(default=None, gt=0)
    start: float | None = Field(default=None, gt=0, description="the first load of a search "
                                "that starts from no kept capacity (default: what a short "
                                "burst sustains); see start_from")
    start_from: Literal["auto", "kept", "burst"] = Field(
        default="auto", description="where the searches after the first start: at the kept "
        "capacity (a candidate's raised by [gate] floor), or where a burst of the config says; "
        "auto: the burst by rate, the kept capacity by concurrency (the cheaper of the two in "
        "the README's measurements)")
    resolution: float = 0.05
    confidence: float = 0.95
    probe_requests: int | None = None
    warmup: int | None = None
    max_probes: int = 20
    budget_s: float | None = Field(default=None, description="most benchmark-seconds per "
                                   "evaluation")

    @property
    def starts_from(self) -> Literal["kept", "burst"]:
        """``start_from`` with ``auto`` resolved: a rate burst's throughput lands near a rate
        capacity, while a burst's number in flight says little about a concurrency capacity."""
        if self.start_from != "auto":
            return self.start_from
        return "burst" if self.by == "rate" else "kept"

    @field_validator("slo", mode="before")
    @classmethod
    def _one_string_or_many(cls, value: object) -> object:
        """``slo = "ttft_p99:500 tpot_mean:50"`` as the command line spells it, or a list."""
        return value.split() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _plan_builds(self) -> CapacitySection:
        try:
            self.plan(seed=0)
        except ConfigError as exc:  # the plan's messages name the flags; name the fields
            raise ValueError(_as_fields(str(exc))) from None
        return self

    def plan(self, *, seed: int, start: float | None = None,
             stop_below: float | None = None) -> CapacityPlan:
        """The search plan (``start``: this evaluation's first load, else ``[capacity] start``;
        ``stop_below``: the load below which its answer no longer matters).

        Raises:
            ConfigError: A target or a range the search refuses.
        """
        from tunegate.capacity import CapacityPlan

        slos = parse_slo_specs(self.slo, attainment=self.attainment, option="capacity.slo")
        settings: dict[str, Any] = {"min_load": self.min_load, "max_load": self.max_load,
                    "resolution": self.resolution, "confidence": self.confidence,
                    "probe_requests": self.probe_requests, "warmup": self.warmup,
                    "max_probes": self.max_probes, "budget_s": self.budget_s, "seed": seed,
                    "stop_below": stop_below}
        plan = CapacityPlan(self.by, slos, start=self.start, **settings)
        if start is None:
            return plan
        # a kept capacity may lie at (or, raised by the threshold, past) the range's edge
        first = min(max(start, plan.min_load), plan.max_load)
        if self.by == "concurrency":
            first = float(max(round(first), plan.min_load))
        return CapacityPlan(self.by, slos, start=first, **settings)


def capacity_objective_complaint(objective: str, direction: str,
                                 section: CapacitySection | None, workload: WorkloadConfig, *,
                                 named_elsewhere: Sequence[str],
                                 beside: Sequence[str]) -> str | None:
    """What is wrong with the capacity objective's settings, or ``None``.

    ``metric = "capacity"`` makes every evaluation a capacity search under ``[capacity]``: a
    load the search chooses, no single repeat whose other metrics a guardrail, an extra
    objective or an SLO could read. Those are refused, and capacity anywhere but
    ``[objective]``.

    Args:
        objective, direction: ``[objective]``.
        section: ``[capacity]``.
        workload: ``[workload]``, which every probe's workload is built from.
        named_elsewhere: The metrics named outside ``[objective]`` (guardrails, extra
            objectives, attribution metrics).
        beside: The sections set that judge one repeat's metrics (``[[guardrails]]``,
            ``[search] slos``...).
    """
    if objective != CAPACITY:
        if CAPACITY in named_elsewhere:
            return ("capacity is an [objective] metric only: it is the answer of a whole "
                    "capacity search, not a figure of one repeat")
        if section is not None:
            return (f"[capacity] is set but [objective] metric is {objective!r}; set metric = "
                    '"capacity" to tune for it, or remove [capacity]')
        return None
    if section is None:
        return ('[objective] metric = "capacity" needs a [capacity] section with at least its '
                'targets, e.g. slo = ["ttft_p99:500", "tpot_mean:50"]')
    if direction != "higher":
        return ('[objective] metric = "capacity": direction must be "higher" (more load '
                "within the targets)")
    probes = _probes_build(workload, section)
    if probes is not None:
        return probes
    if beside:
        return (f"{', '.join(beside)}: not with the capacity objective; its latency targets "
                "are [capacity] slo, and each evaluation is a search over loads, not one "
                "repeat those could read")
    return None


def _probes_build(workload: WorkloadConfig, section: CapacitySection) -> str | None:
    """Why a probe at ``min_load`` or ``max_load`` could not be built from ``[workload]``
    (more requests or streams than a benchmark takes), or ``None``: refused when the config
    loads, not in the middle of a search."""
    import pydantic

    from tunegate.capacity.workloads import probe_workload

    plan = section.plan(seed=0)
    for name, load in (("min_load", plan.min_load), ("max_load", plan.max_load)):
        try:
            probe_workload(workload, plan, load, 0)
        except pydantic.ValidationError as exc:
            requests, warmup = plan.probe_size(load)
            why = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ")
                            for e in exc.errors())
            return (f"capacity.{name} {load:g}: a probe there would be {requests} requests "
                    f"({warmup} warm-up) at {load:g} {plan.unit}, which a benchmark refuses: "
                    f"{why}")
    return None


def _as_fields(message: str) -> str:
    """The plan's complaint in the config's words (``--min-load`` -> ``min_load``)."""
    for flag, name in (("--slo", "slo"), ("--min-load", "min_load"), ("--max-load", "max_load"),
                       ("--start", "start"), ("--resolution", "resolution"),
                       ("--confidence", "confidence"), ("--probe-requests", "probe_requests"),
                       ("--num-warmup", "warmup"), ("--max-probes", "max_probes"),
                       ("--budget", "budget_s")):
        message = message.replace(flag, name)
    return message
