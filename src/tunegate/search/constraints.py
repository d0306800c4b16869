"""Known rules between parameters, written as short expressions and repaired before launch.

Two forms, enough for the rules engines document:

* ``"A <= B"`` / ``"A >= B"``: A and B are parameter names or numbers; a violating config is
  repaired by moving A to B (e.g. ``"max_num_seqs <= max_num_batched_tokens"``).
* ``"FLAG or A >= B"``: when the boolean FLAG is false, A >= B must hold (e.g. vLLM refuses to
  start with chunked prefill off and ``max_num_batched_tokens < max_model_len``:
  ``"enable_chunked_prefill or max_num_batched_tokens >= 4096"``).

A rule that names an unknown parameter is a configuration error, reported with the rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tunegate.errors import ConfigError
from tunegate.search.space import Config, Constraint

__all__ = ["parse_constraint", "parse_constraints"]

_COMPARE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=)\s*([A-Za-z_][\w.]*|-?\d+(?:\.\d+)?)\s*$")
_GUARDED = re.compile(r"^\s*([A-Za-z_][\w.]*)\s+or\s+(.+)$")


def _operand(token: str, names: set[str], rule: str) -> str | float:
    try:
        return float(token)
    except ValueError:
        if token not in names:
            raise ConfigError(f"constraint {rule!r}: unknown parameter {token!r}; known: "
                              f"{', '.join(sorted(names))}") from None
        return token


def _value(operand: str | float, config: Config) -> Any:
    return config.get(operand) if isinstance(operand, str) else operand


def parse_constraint(rule: str, names: Iterable[str]) -> Constraint:
    """One rule as a :class:`~tunegate.search.space.Constraint` (see the module docstring).

    Raises:
        ConfigError: The rule is not one of the two forms, or names an unknown parameter.
    """
    known = set(names)
    guard: str | None = None
    body = rule
    guarded = _GUARDED.match(rule)
    if guarded:
        guard = guarded.group(1)
        if guard not in known:
            raise ConfigError(f"constraint {rule!r}: unknown parameter {guard!r}")
        body = guarded.group(2)
    match = _COMPARE.match(body)
    if not match:
        raise ConfigError(f"constraint {rule!r}: expected 'A <= B', 'A >= B' or "
                          "'FLAG or A >= B' with parameter names or numbers")
    left_token, op, right_token = match.groups()
    left = _operand(left_token, known, rule)
    right = _operand(right_token, known, rule)
    if not isinstance(left, str):
        raise ConfigError(f"constraint {rule!r}: the left side must be a parameter")

    def repair(config: Config) -> Config | None:
        if guard is not None and bool(config.get(guard)):
            return config
        a, b = _value(left, config), _value(right, config)
        if a is None or b is None:
            return config
        if (op == "<=" and a <= b) or (op == ">=" and a >= b):
            return config
        return {**config, left: type(a)(b) if isinstance(a, int) else b}

    return Constraint(rule, repair)


def parse_constraints(rules: Iterable[str], names: Iterable[str]) -> list[Constraint]:
    known = list(names)
    return [parse_constraint(rule, known) for rule in rules]
