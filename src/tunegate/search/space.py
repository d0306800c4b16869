"""The search space: typed parameters in the article's five layers, with traffic lights.

Every parameter carries a *layer* (what kind of knob it is) and a *traffic light* (what the
tuner may do with it), the classification the article puts on the first page of the operator
manual:

* ``forbidden``: never changed by the tuner (model, dtype, quantisation, ...);
* ``must_change``: a known-required fix applied before tuning starts (e.g. streaming in the
  benchmark, chunked prefill on a pathological engine); it has one required value;
* ``must_run``: a check that always runs (not a knob; listed for the manual);
* ``situational``: the tunable space the search explores.

Values map to and from the unit interval so designs (Sobol, LHS) and surrogates work on
``[0, 1]^d``: ints and floats linearly, ``log_int`` on a log scale, bools and categoricals by
equal-width bins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tunegate.errors import ConfigError

__all__ = ["Config", "Constraint", "Layer", "Light", "Param", "SearchSpace"]

Config = dict[str, Any]


class Layer(StrEnum):
    MEMORY_CONCURRENCY = "memory_concurrency"
    SCHEDULING = "scheduling"
    FEATURES = "features"
    PARALLELISM = "parallelism"
    ENVIRONMENT = "environment"


class Light(StrEnum):
    FORBIDDEN = "forbidden"
    MUST_CHANGE = "must_change"
    MUST_RUN = "must_run"
    SITUATIONAL = "situational"


_KINDS = ("int", "log_int", "float", "bool", "categorical")


@dataclass(frozen=True, slots=True)
class Param:
    """One engine parameter.

    Attributes:
        name: The engine's name (``max_num_seqs``).
        kind: ``int``, ``log_int``, ``float``, ``bool`` or ``categorical``.
        layer: One of the five layers.
        light: Its traffic light.
        low / high: Bounds for numeric kinds (inclusive).
        choices: Values of a categorical.
        default: The value used when the tuner does not set it (the baseline's value).
        required: For ``must_change``: the value that must be applied.
        reason: Why it has this light (shown in the manual).
    """

    name: str
    kind: str
    layer: Layer
    light: Light = Light.SITUATIONAL
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    default: Any = None
    required: Any = None
    reason: str = ""

    def __post_init__(self) -> None:
        where = f"parameter {self.name!r}"
        if self.kind not in _KINDS:
            raise ConfigError(f"{where}: kind {self.kind!r} is not one of {', '.join(_KINDS)}")
        if self.kind in ("int", "log_int", "float"):
            if self.low is None or self.high is None or not self.low <= self.high:
                raise ConfigError(f"{where}: needs low <= high (got {self.low}, {self.high})")
            if not (math.isfinite(self.low) and math.isfinite(self.high)):
                raise ConfigError(f"{where}: needs finite bounds (got {self.low}, {self.high})")
            if self.kind != "float" and not (float(self.low).is_integer()
                                             and float(self.high).is_integer()):
                raise ConfigError(f"{where}: {self.kind} bounds must be whole numbers "
                                  f"(got {self.low}, {self.high})")
            if self.kind == "log_int" and self.low < 1:
                raise ConfigError(f"{where}: log_int needs low >= 1 (got {self.low})")
        if self.kind == "categorical" and not self.choices:
            raise ConfigError(f"{where}: a categorical needs choices")
        if self.light is Light.MUST_CHANGE and self.required is None:
            raise ConfigError(f"{where}: must_change needs the required value")

    @property
    def values(self) -> tuple[Any, ...]:
        """The discrete values of a bool or categorical."""
        return (False, True) if self.kind == "bool" else self.choices

    def from_unit(self, u: float) -> Any:
        """The value at position ``u`` in [0, 1]."""
        u = min(max(u, 0.0), 1.0)
        if self.kind in ("bool", "categorical"):
            values = self.values
            return values[min(int(u * len(values)), len(values) - 1)]
        assert self.low is not None and self.high is not None
        if self.kind == "float":  # rounded for readable configs, kept inside the bounds
            return min(self.high, max(self.low, round(self.low + u * (self.high - self.low), 4)))
        if self.kind == "log_int":
            lo, hi = math.log(self.low), math.log(self.high + 1)
            return int(min(self.high, max(self.low, math.floor(math.exp(lo + u * (hi - lo))))))
        return int(min(self.high, self.low + math.floor(u * (self.high - self.low + 1))))

    def to_unit(self, value: Any) -> float:
        """Position of ``value`` in [0, 1] (the centre of its bin for discrete kinds)."""
        if self.kind in ("bool", "categorical"):
            values = self.values
            return (values.index(value) + 0.5) / len(values)
        assert self.low is not None and self.high is not None
        if self.kind == "float":
            span = self.high - self.low
            return 0.5 if span == 0 else (float(value) - self.low) / span
        if self.kind == "log_int":
            lo, hi = math.log(self.low), math.log(self.high + 1)
            return (math.log(float(value) + 0.5) - lo) / (hi - lo)
        return (float(value) - self.low + 0.5) / (self.high - self.low + 1)

    def contains(self, value: Any) -> bool:
        if self.kind in ("bool", "categorical"):
            return value in self.values
        assert self.low is not None and self.high is not None
        return isinstance(value, int | float) and self.low <= value <= self.high


@dataclass(frozen=True, slots=True)
class Constraint:
    """A known rule between parameters, repaired before launch or rejected.

    ``repair`` returns the config made valid, or ``None`` when it cannot be repaired; a config
    that already meets the rule comes back unchanged. It may change only searched
    (``situational``) parameters, and only to values inside their bounds
    (:meth:`SearchSpace.repair` raises ``AssertionError`` otherwise).
    """

    description: str
    repair: Callable[[Config], Config | None]


@dataclass(frozen=True)
class SearchSpace:
    """Parameters plus constraints; only ``situational`` parameters are searched."""

    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ConfigError(f"parameters defined twice: {', '.join(sorted(duplicates))}")

    @property
    def tunable(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.light is Light.SITUATIONAL)

    @property
    def dims(self) -> int:
        return len(self.tunable)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def fixed(self) -> Config:
        """Values the tuner never searches: defaults of forbidden, required of must_change."""
        out: Config = {}
        for p in self.params:
            if p.light is Light.FORBIDDEN and p.default is not None:
                out[p.name] = p.default
            elif p.light is Light.MUST_CHANGE:
                out[p.name] = p.required
        return out

    def default(self) -> Config:
        """The baseline: every parameter at its default (must_change not yet applied)."""
        return {p.name: p.default for p in self.params if p.default is not None}

    def from_unit(self, point: Sequence[float]) -> Config:
        """A full config from a point of ``[0, 1]^dims`` (fixed values included)."""
        if len(point) != self.dims:
            raise ValueError(f"point has {len(point)} coordinates for {self.dims} dimensions")
        config = {**self.default(), **self.fixed()}
        for param, u in zip(self.tunable, point, strict=True):
            config[param.name] = param.from_unit(float(u))
        return config

    def to_unit(self, config: Mapping[str, Any]) -> list[float]:
        return [p.to_unit(config[p.name]) for p in self.tunable]

    def repair(self, config: Config) -> Config | None:
        """Apply every constraint's repair in order, again until none changes anything (a
        repair for one rule can break another); ``None`` if one cannot be satisfied or they
        keep pulling against each other.

        Raises:
            AssertionError: A repair moved a parameter that is not searched, or moved one
                outside its bounds (a bug in the repair: never a proposal to run).
        """
        current = dict(config)
        for _ in range(2 * len(self.constraints) + 1):
            changed = False
            for constraint in self.constraints:
                repaired = constraint.repair(current)
                if repaired is None:
                    return None
                changed = changed or repaired != current
                current = repaired
            if not changed:  # every rule met the config as it was: done
                self._check_moves(config, current)
                return current
        return None

    def _check_moves(self, original: Mapping[str, Any], repaired: Mapping[str, Any]) -> None:
        for name, value in repaired.items():
            if name in original and original[name] == value:
                continue
            param = next((p for p in self.params if p.name == name), None)
            if param is None or param.light is not Light.SITUATIONAL:
                raise AssertionError(f"a constraint repair set {name} = {value!r}, which is "
                                     "not a searched parameter")
            if not param.contains(value):
                allowed = (list(param.values) if param.kind in ("bool", "categorical")
                           else f"[{param.low:g}, {param.high:g}]")
                raise AssertionError(f"a constraint repair set {name} = {value!r}, outside "
                                     f"its values {allowed}")

    def check_forbidden(self, config: Mapping[str, Any]) -> None:
        """Raise if ``config`` changes a forbidden parameter."""
        for p in self.params:
            if p.light is Light.FORBIDDEN and p.name in config and p.default is not None \
                    and config[p.name] != p.default:
                raise ConfigError(
                    f"parameter {p.name!r} is forbidden to change ({p.reason or 'no reason'}) "
                    f"but the config sets {config[p.name]!r} instead of {p.default!r}"
                )

    def by_layer(self) -> dict[Layer, list[Param]]:
        out: dict[Layer, list[Param]] = {}
        for p in self.params:
            out.setdefault(p.layer, []).append(p)
        return out

    @classmethod
    def of(cls, params: Iterable[Param], constraints: Iterable[Constraint] = ()) -> SearchSpace:
        return cls(tuple(params), tuple(constraints))
