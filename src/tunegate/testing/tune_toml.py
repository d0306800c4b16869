"""A small ``tunegate tune`` config for tests, and a TOML writer for the shapes configs use.

:func:`small_tune_config` is the config most tuning tests start from: a ``simulator-virtual``
run on scenario ``"fast"`` (virtual time, about a second a run), a synthetic workload of 16
requests of 64 tokens in and 16 out at concurrency 4, one parameter (:data:`MAX_NUM_SEQS`),
objective ``output_throughput`` and a gate of 2 repeats. A test names only what it changes::

    config = small_tune_config(run={"budget": 4}, space=[MAX_NUM_SEQS, CHUNKED_PREFILL],
                               report={"plots": False})
    path.write_text(to_toml(config), encoding="utf-8")

:func:`to_toml` writes tables, arrays of tables, strings, ints, floats, bools and lists of
those scalars, so that ``tomllib.loads(to_toml(config)) == config``; anything else (``None``,
dates, a list mixing tables and scalars) is a ``TypeError``.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["CHUNKED_PREFILL", "MAX_NUM_SEQS", "small_tune_config", "to_toml"]

MAX_NUM_SEQS: Mapping[str, Any] = MappingProxyType({
    "name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
    "low": 2, "high": 64, "default": 8,
})
"""The ``[[space]]`` entry of :func:`small_tune_config`: ``max_num_seqs`` on a log scale, 2..64,
default 8. ``{**MAX_NUM_SEQS, "high": 3}`` is the same parameter with other bounds."""

CHUNKED_PREFILL: Mapping[str, Any] = MappingProxyType({
    "name": "enable_chunked_prefill", "kind": "bool", "layer": "features", "default": True,
})
"""A second ``[[space]]`` entry: ``enable_chunked_prefill``, a bool, default true."""

_DEFAULT: Mapping[str, Any] = MappingProxyType({
    "run": {"budget": 3, "seed": 3, "recheck_every": 0},
    "server": {"adapter": "simulator-virtual", "scenario": "fast"},
    "workload": {"dataset": "synthetic", "num_requests": 16, "input_tokens": "64",
                 "output_tokens": "16", "concurrency": 4},
    "space": [MAX_NUM_SEQS],
    "objective": {"metric": "output_throughput"},
    "gate": {"repeats": 2, "initial_repeats": 2},
})

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def small_tune_config(**sections: Any) -> dict[str, Any]:
    """The common small tuning config as a fresh dict, with ``sections`` applied.

    The default has ``[run]`` (budget 3, seed 3, recheck_every 0), ``[server]``, ``[workload]``,
    ``[[space]]`` (:data:`MAX_NUM_SEQS` only), ``[objective]`` and ``[gate]``; no ``[report]``,
    ``[knowledge]`` or ``[search]``. A section given as a mapping *updates* the default's table
    one level deep (``run={"budget": 4}`` changes the budget and keeps the seed;
    ``server={"options": {...}}`` adds ``[server.options]``) or adds the table when the default
    has none (``report={"plots": False}``). Any other value (``space=[...]``) *replaces* the
    section. The result shares nothing with the defaults or the arguments.
    """
    config: dict[str, Any] = _plain(_DEFAULT)
    for name, section in sections.items():
        current = config.get(name)
        if isinstance(section, Mapping) and isinstance(current, dict):
            current.update(_plain(section))
        else:
            config[name] = _plain(section)
    return config


def to_toml(config: Mapping[str, Any]) -> str:
    """``config`` as TOML text that :func:`tomllib.loads` reads back equal to it.

    A mapping becomes a table, a non-empty list of mappings an array of tables; strings, ints,
    floats, bools and lists of them are values. Keys that are not bare are quoted.
    """
    lines: list[str] = []
    _table(config, (), lines, header=None)
    return "\n".join(lines).lstrip("\n") + "\n"


def _plain(value: Any) -> Any:
    """A deep copy with every mapping a ``dict`` and every list or tuple a ``list``."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return copy.deepcopy(value)


def _is_table_array(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) > 0
            and all(isinstance(item, Mapping) for item in value))


def _table(table: Mapping[str, Any], path: tuple[str, ...], lines: list[str],
           header: str | None) -> None:
    """Append ``table``: its header (none for the root), its values, then its sub-tables."""
    if header is not None:
        lines.extend(["", header])
    for key, value in table.items():
        if not isinstance(value, Mapping) and not _is_table_array(value):
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in table.items():
        dotted = ".".join(_key(part) for part in (*path, key))
        if isinstance(value, Mapping):
            _table(value, (*path, key), lines, header=f"[{dotted}]")
        elif _is_table_array(value):
            for item in value:
                _table(item, (*path, key), lines, header=f"[[{dotted}]]")


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys are strings, not {type(key).__name__}: {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Sequence) and not any(isinstance(item, Mapping) for item in value):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"no TOML value for {type(value).__name__}: {value!r}")


def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out: list[str] = []
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
