"""Known rules between parameters, written as short expressions and repaired before launch.

Two forms, enough for the rules engines document:

* ``"A <= B"`` / ``"A >= B"``: A is a parameter, B a parameter or a number
  (e.g. ``"max_num_seqs <= max_num_batched_tokens"``).
* ``"FLAG or A >= B"``: when the boolean FLAG is false, A >= B must hold (e.g. vLLM refuses to
  start with chunked prefill off and ``max_num_batched_tokens < max_model_len``:
  ``"enable_chunked_prefill or max_num_batched_tokens >= 4096"``).

**Checked when the config is loaded.** A rule naming an unknown parameter, comparing a
parameter whose values are not numbers, or guarded by a parameter that is not a bool is a
:class:`~tunegate.errors.ConfigError`. So is a rule that no config of the space can meet
(``max_num_seqs >= 1000`` on a space searching it in [8, 128]), and rules that cannot all hold
at once (``A <= 10`` and ``A >= 20``): the tuner would otherwise propose configs outside the
declared bounds, or none. The check is exact for these forms: a parameter's values are its
bounds (whole numbers for ``int`` and ``log_int``), its choices, or the one value the tuner
gives it when it is not searched (``forbidden``/``must_run``: its default; ``must_change``: its
required value); propagating the bounds through the comparisons until nothing changes leaves
every range non-empty exactly when all parameters at their lowest remaining value meet every
rule (each guard tried on and off, up to :data:`MAX_GUARDS` guards).

**Repair** moves a violating config to one that meets the rule, changing only searched
(``situational``) parameters and only to values inside their bounds: first A to the value
nearest B that meets the rule, else B to the value nearest A, else both to where their ranges
meet, else the guard flag is switched on; a config it cannot fix that way is ``None`` (the
proposer draws another point). A rule on a parameter with no value in the config (a
``forbidden`` one without a default) is not enforced.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunegate.errors import ConfigError
from tunegate.search.space import Config, Constraint, Light, Param

__all__ = ["MAX_GUARDS", "parse_constraint", "parse_constraints"]

MAX_GUARDS = 12
"""Guards tried on and off in every combination when checking rules together (4096 cases);
with more, the joint check is skipped and repair rejects the configs it cannot fix."""

_COMPARE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=)\s*([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?)\s*$")
_GUARDED = re.compile(r"^\s*([A-Za-z_][\w.]*)\s+or\s+(.+)$")
_NUMERIC = ("int", "log_int", "float")
_MAX_ROUNDS = 10_000


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and (isinstance(value, bool) or math.isfinite(value))


def _values(param: Param) -> tuple[Any, ...]:
    """The values a parameter that is not a searched number takes in proposed configs: its
    choices when searched, else the one value the tuner gives it."""
    if param.light is Light.SITUATIONAL:
        return param.values
    return (param.required if param.light is Light.MUST_CHANGE else param.default,)


@dataclass(frozen=True, slots=True)
class _Domain:
    """The values a parameter takes in the configs the tuner proposes.

    ``step``: ``real`` (every number in [low, high]), ``int`` (the whole numbers in it) or
    ``set`` (``choices``, sorted, as the parameter's own values). ``movable``: a repair may
    change it (a searched parameter).
    """

    low: float
    high: float
    step: Literal["real", "int", "set"]
    choices: tuple[Any, ...] = ()
    movable: bool = False

    @classmethod
    def of(cls, param: Param) -> _Domain | None:
        """``param``'s values; ``None`` when it has none (not searched and no value)."""
        if param.kind in _NUMERIC and param.light is Light.SITUATIONAL:
            assert param.low is not None and param.high is not None
            return cls(param.low, param.high, "real" if param.kind == "float" else "int",
                       movable=True)
        values = tuple(v for v in _values(param) if v is not None)
        if not values:
            return None
        if all(_is_number(v) for v in values):
            values = tuple(sorted(values))
        return cls(values[0], values[-1], "set", values, param.light is Light.SITUATIONAL)

    @classmethod
    def point(cls, value: float) -> _Domain:
        return cls(value, value, "set", (value,))

    def at_most(self, x: float) -> Any:
        """The largest value <= ``x``, or ``None``."""
        if self.step == "set":
            below = [c for c in self.choices if c <= x]
            return below[-1] if below else None
        top = min(x, self.high)
        if self.step == "int":
            top = math.floor(top)
        return None if top < self.low else (int(top) if self.step == "int" else float(top))

    def at_least(self, x: float) -> Any:
        """The smallest value >= ``x``, or ``None``."""
        if self.step == "set":
            above = [c for c in self.choices if c >= x]
            return above[0] if above else None
        bottom = max(x, self.low)
        if self.step == "int":
            bottom = math.ceil(bottom)
        return None if bottom > self.high else (
            int(bottom) if self.step == "int" else float(bottom))

    def within(self, low: float, high: float) -> _Domain | None:
        """The values in [low, high], or ``None`` when there are none."""
        if self.step == "set":
            kept = tuple(c for c in self.choices if low <= c <= high)
            return _Domain(kept[0], kept[-1], "set", kept, self.movable) if kept else None
        first, last = self.at_least(low), self.at_most(high)
        if first is None or last is None or first > last:
            return None
        return _Domain(first, last, self.step, (), self.movable)

    def contains(self, value: Any) -> bool:
        if self.step == "set":
            return any(value == c and type(value) is type(c) for c in self.choices)
        if not _is_number(value) or isinstance(value, bool) or not self.low <= value <= self.high:
            return False
        return self.step == "real" or float(value).is_integer()

    def __str__(self) -> str:
        if not self.movable:
            return f"fixed at {self.low!r}"
        if self.step == "set":
            return f"one of {list(self.choices)}"
        return f"searched in [{self.low:g}, {self.high:g}]"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One parsed rule: ``guard or left op right``."""

    text: str
    guard: str | None
    left: str
    op: Literal["<=", ">="]
    right: str | float

    def holds(self, a: Any, b: Any) -> bool:
        return bool(a <= b) if self.op == "<=" else bool(a >= b)


def _parse(rule: str, params: Mapping[str, Param]) -> _Rule:
    known = ", ".join(sorted(params))
    guard: str | None = None
    body = rule
    guarded = _GUARDED.match(rule)
    if guarded:
        guard = guarded.group(1)
        if guard not in params:
            raise ConfigError(f"constraint {rule!r}: unknown parameter {guard!r}; known: {known}")
        if params[guard].kind != "bool":
            raise ConfigError(f"constraint {rule!r}: the guard {guard!r} must be a bool "
                              f"parameter (it is {params[guard].kind})")
        body = guarded.group(2)
    match = _COMPARE.match(body)
    if not match:
        raise ConfigError(f"constraint {rule!r}: expected 'A <= B', 'A >= B' or "
                          "'FLAG or A >= B' with parameter names or numbers")
    left_token, op, right_token = match.groups()
    operands: list[str | float] = []
    for token in (left_token, right_token):
        try:
            operands.append(float(token))
            continue
        except ValueError:
            pass
        if token not in params:
            raise ConfigError(f"constraint {rule!r}: unknown parameter {token!r}; known: {known}")
        param = params[token]
        values = () if param.kind in _NUMERIC and param.light is Light.SITUATIONAL \
            else _values(param)
        if any(v is not None and not _is_number(v) for v in values):
            raise ConfigError(f"constraint {rule!r}: {token!r} takes values that are not "
                              f"numbers ({', '.join(map(repr, values))}); a rule compares numbers")
        operands.append(token)
    left, right = operands
    if not isinstance(left, str):
        raise ConfigError(f"constraint {rule!r}: the left side must be a parameter")
    return _Rule(rule, guard, left, "<=" if op == "<=" else ">=", right)


def _domains(params: Iterable[Param]) -> dict[str, _Domain | None]:
    return {p.name: _Domain.of(p) for p in params}


def _guard_can_be_on(rule: _Rule, domains: Mapping[str, _Domain | None]) -> bool:
    if rule.guard is None:
        return False
    domain = domains[rule.guard]
    return domain is not None and any(bool(c) for c in domain.choices)


def _switchable(name: str, domains: Mapping[str, _Domain | None]) -> bool:
    domain = domains[name]
    return domain is not None and len(domain.choices) > 1


def _operand(side: str | float, domains: Mapping[str, _Domain | None]) -> _Domain | None:
    return domains[side] if isinstance(side, str) else _Domain.point(side)


def _propagate(rules: Sequence[_Rule], domains: dict[str, _Domain | None]) -> bool:
    """Narrow the ranges through ``rules`` until nothing changes; whether every one is left
    non-empty (then every parameter at its lowest remaining value meets every rule)."""
    for _ in range(_MAX_ROUNDS):
        changed = False
        for rule in rules:
            left, right = _operand(rule.left, domains), _operand(rule.right, domains)
            if left is None or right is None:
                continue  # a parameter without a value: the rule is not enforced
            if rule.op == "<=":
                new_left, new_right = left.within(-math.inf, right.high), \
                    right.within(left.low, math.inf)
            else:
                new_left, new_right = left.within(right.low, math.inf), \
                    right.within(-math.inf, left.high)
            if new_left is None or new_right is None:
                return False
            if new_left != left:
                domains[rule.left], changed = new_left, True
            if isinstance(rule.right, str) and new_right != right:
                domains[rule.right], changed = new_right, True
        if not changed:
            return True
    return True  # pragma: no cover - bounds only move to finitely many values


def _possible(rules: Sequence[_Rule], params: Iterable[Param]) -> bool:
    """Whether some config of the space meets every rule (exact; see the module docstring)."""
    base = _domains(params)
    guards = sorted({r.guard for r in rules
                     if r.guard is not None and _switchable(r.guard, base)})
    if len(guards) > MAX_GUARDS:
        return True
    for setting in itertools.product((False, True), repeat=len(guards)):
        domains = dict(base)
        for guard, on in zip(guards, setting, strict=True):
            domains[guard] = _Domain.point(on)
        active = [r for r in rules if not _guard_can_be_on(r, domains)]
        if _propagate(active, domains):
            return True
    return False


def _impossible(rule: _Rule, params: Mapping[str, Param]) -> str:
    """Why no config meets ``rule`` alone, for the error message."""
    domains = _domains(params.values())
    parts = []
    for side in (rule.left, rule.right):
        if isinstance(side, str) and side not in parts:
            parts.append(f"{side} is {domains[side]}")
    if rule.guard is not None:
        parts.append(f"{rule.guard} is {domains[rule.guard] or 'never set'}")
    return "; ".join(parts)


def _repair(rule: _Rule, domains: Mapping[str, _Domain | None]) -> Constraint:
    left, op, right, guard = rule.left, rule.op, rule.right, rule.guard
    guard_domain = domains[guard] if guard is not None else None

    def value(side: str | float, config: Config) -> Any:
        return config.get(side) if isinstance(side, str) else side

    def moved(config: Config, changes: dict[str, Any]) -> Config:
        for name, new in changes.items():
            domain = domains[name]
            if domain is None or not domain.movable or not domain.contains(new):
                raise AssertionError(f"constraint {rule.text!r}: repair would set {name} to "
                                     f"{new!r}, outside its values ({domain})")
        return {**config, **changes}

    def repair(config: Config) -> Config | None:
        if guard is not None and bool(config.get(guard)):
            return config
        a, b = value(left, config), value(right, config)
        if a is None or b is None or rule.holds(a, b):
            return config
        lower = op == "<="
        left_domain = domains[left]
        right_domain = domains[right] if isinstance(right, str) else None
        if left_domain is not None and left_domain.movable:
            new = left_domain.at_most(b) if lower else left_domain.at_least(b)
            if new is not None:
                return moved(config, {left: new})
        if right_domain is not None and right_domain.movable and right != left:
            assert isinstance(right, str)
            new = right_domain.at_least(a) if lower else right_domain.at_most(a)
            if new is not None:
                return moved(config, {right: new})
            if left_domain is not None and left_domain.movable:
                edge = right_domain.at_most(right_domain.high) if lower else \
                    right_domain.at_least(right_domain.low)
                new = left_domain.at_most(edge) if lower else left_domain.at_least(edge)
                if new is not None:
                    return moved(config, {left: new, right: edge})
        if guard is not None and guard_domain is not None and guard_domain.movable:
            return moved(config, {guard: True})
        return None

    return Constraint(rule.text, repair)


def parse_constraint(rule: str, params: Sequence[Param]) -> Constraint:
    """One rule as a :class:`~tunegate.search.space.Constraint` (see the module docstring).

    Raises:
        ConfigError: The rule is not one of the two forms, names an unknown parameter, compares
            values that are not numbers, or no config of the space can meet it.
    """
    return parse_constraints([rule], params)[0]


def _checked(rule: str, params: Sequence[Param]) -> _Rule:
    by_name = {p.name: p for p in params}
    parsed = _parse(rule, by_name)
    if not _possible([parsed], params):
        raise ConfigError(f"constraint {rule!r}: no config of the space can meet it "
                          f"({_impossible(parsed, by_name)}); widen the bounds or drop the rule")
    return parsed


def parse_constraints(rules: Iterable[str], params: Sequence[Param]) -> list[Constraint]:
    """Every rule (see :func:`parse_constraint`), and checked together.

    Raises:
        ConfigError: As :func:`parse_constraint`, or the rules cannot all hold at once.
    """
    texts = list(rules)
    parsed = [_checked(rule, params) for rule in texts]
    if len(texts) > 1 and not _possible(parsed, params):
        raise ConfigError("constraints " + ", ".join(map(repr, texts)) + ": no config of the "
                          "space meets them all at once; drop or loosen one")
    # Repairs move values within the ranges the unguarded rules leave (every config meeting
    # all rules lies in them), so that one rule's repair does not undo another's.
    narrowed = _domains(params)
    _propagate([r for r in parsed if r.guard is None], narrowed)
    return [_repair(rule, narrowed) for rule in parsed]
