"""What a search optimises: up to five objectives, and SLOs as outcome constraints.

An :class:`Objective` names a metric and whether higher or lower is better. An
:class:`OutcomeConstraint` is an SLO on a measured metric (``p99_ttft_ms <= 3000``): the
surrogate models it like an objective and the acquisition only rewards configs likely to meet
it; the delivery only recommends configs that met it.

A search has at most five objectives (hypervolume-based acquisition and a Pareto front a
person can read both degrade past that): more is a :class:`ConfigError`, with the
advice to aggregate or layer them first.

Example:
    >>> objectives = check_objectives([Objective("goodput"), Objective("p99_ttft_ms", "lower")])
    >>> [o.sign for o in objectives]
    [1.0, -1.0]
    >>> parse_outcome_constraint("p99_ttft_ms <= 3000").satisfied({"p99_ttft_ms": 2500.0})
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from tunegate.errors import ConfigError

__all__ = ["MAX_OBJECTIVES", "Objective", "OutcomeConstraint", "check_objectives",
           "parse_outcome_constraint"]

MAX_OBJECTIVES = 5
"""At most this many objectives: hypervolume acquisition and a readable front degrade past it."""

_RULE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=)\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Objective:
    """One metric to optimise.

    Attributes:
        metric: The measured metric's name (``request_goodput``, ``mean_tpot_ms``).
        direction: ``higher`` or ``lower`` is better.
    """

    metric: str
    direction: Literal["higher", "lower"] = "higher"

    @property
    def sign(self) -> float:
        """+1 for ``higher``, -1 for ``lower``: ``sign * value`` is always maximised."""
        return 1.0 if self.direction == "higher" else -1.0


@dataclass(frozen=True, slots=True)
class OutcomeConstraint:
    """An SLO on a measured metric: ``metric op bound`` must hold.

    Attributes:
        metric: The metric's name.
        op: ``<=`` (an upper bound, e.g. latency) or ``>=`` (a lower bound).
        bound: The limit, in the metric's unit.
    """

    metric: str
    op: Literal["<=", ">="]
    bound: float

    def slack(self, value: float) -> float:
        """Distance to the bound, >= 0 when met (in the metric's unit)."""
        return self.bound - value if self.op == "<=" else value - self.bound

    def satisfied(self, values: Mapping[str, float | None]) -> bool:
        """Whether ``values`` meets this SLO (a missing value does not)."""
        value = values.get(self.metric)
        return value is not None and self.slack(float(value)) >= 0

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


def parse_outcome_constraint(rule: str) -> OutcomeConstraint:
    """``"METRIC <= NUMBER"`` or ``"METRIC >= NUMBER"`` as an :class:`OutcomeConstraint`.

    Raises:
        ConfigError: The rule is not of that form.
    """
    match = _RULE.match(rule)
    if not match:
        raise ConfigError(f"SLO {rule!r}: expected 'METRIC <= NUMBER' or 'METRIC >= NUMBER', "
                          "e.g. 'p99_ttft_ms <= 3000'")
    metric, op, bound = match.groups()
    return OutcomeConstraint(metric, "<=" if op == "<=" else ">=", float(bound))


def check_objectives(objectives: Iterable[Objective]) -> tuple[Objective, ...]:
    """The objectives, validated: one to five, no metric twice.

    Raises:
        ConfigError: None, more than :data:`MAX_OBJECTIVES`, or a metric named twice.
    """
    out = tuple(objectives)
    if not out:
        raise ConfigError("a search needs at least one objective")
    if len(out) > MAX_OBJECTIVES:
        names = ", ".join(o.metric for o in out)
        raise ConfigError(
            f"{len(out)} objectives ({names}): at most {MAX_OBJECTIVES} are supported; aggregate "
            "some into one (e.g. goodput under SLOs) or move them to outcome constraints (SLOs)")
    metrics = [o.metric for o in out]
    twice = sorted({m for m in metrics if metrics.count(m) > 1})
    if twice:
        raise ConfigError(f"objective metric named twice: {', '.join(twice)}")
    return out
