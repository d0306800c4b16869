"""Canonical JSON and content digests: one byte string per value, so hashes can be compared.

Two values that mean the same thing must hash the same, on any machine and in any later run
(``tunegate replay`` compares a re-derived decision's outputs with the recorded ones by hash).
The canonical form is:

- keys sorted, no whitespace (``separators=(",", ":")``), ASCII only (``\\uXXXX`` escapes);
- mapping keys must be strings (``json`` would silently turn ``1`` into ``"1"`` and make two
  different mappings collide);
- tuples become lists; ``bool`` stays ``true``/``false``; other integers (numpy's too) become
  ``int``; other reals become ``float`` written with Python's shortest round-trip ``repr``
  (the same digits on every platform since Python 3.1); ``-0.0`` stays ``-0.0``;
- NaN and infinities are refused: they are not JSON and compare unequal to themselves.

This is close to, but not, RFC 8785 (JCS): floats use Python's ``repr`` digits, not
ECMAScript's, which only matters for exponents (``1e+16`` vs ``1e16``).

Example:
    >>> canonical_json({"b": 1, "a": [1.5, None, True]})
    '{"a":[1.5,null,true],"b":1}'
    >>> digest({"a": 1}) == digest({"a": 1.0})
    False
    >>> len(digest({"a": 1}))
    64
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["canonical_json", "digest", "normalize"]

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


def normalize(obj: Any) -> JSONValue:
    """Convert ``obj`` to plain JSON types, refusing anything that would not hash stably.

    Args:
        obj: Mappings with string keys, sequences, strings, numbers, booleans and ``None``;
            objects with ``model_dump`` (pydantic models) are dumped in JSON mode first.

    Returns:
        The same value built from ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and
        ``None`` only.

    Raises:
        ValueError: A non-finite float, or a mapping key that is not a string; the message
            gives the JSON path, e.g. ``$.inputs.sigma``.
        TypeError: A value of another type.
    """
    try:
        return _plain(obj)
    except (ValueError, TypeError):
        return _checked(obj, "$")  # walk again, tracking the path, to say where it failed


_LEAVES = frozenset({str, int, bool, type(None)})
"""Exact types :func:`_checked` returns unchanged (``float`` also needs its finiteness check)."""


def _plain(obj: Any) -> JSONValue:
    """:func:`_checked` for the plain types the journal holds (most of every snapshot), without
    a path string per node or a call per leaf; anything else goes to :func:`_checked`. Same
    result; raises without a path (:func:`normalize` then walks again to name it)."""
    kind = type(obj)
    if kind in _LEAVES:
        return obj  # type: ignore[no-any-return]
    if kind is float:
        if not math.isfinite(obj):
            raise ValueError("non-finite")
        return obj  # type: ignore[no-any-return]
    if kind is dict:
        out: dict[str, JSONValue] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ValueError("non-string key")
            out[key] = value if type(value) in _LEAVES else _plain(value)
        return out
    if kind is list or kind is tuple:
        return [item if type(item) in _LEAVES else _plain(item) for item in obj]
    return _checked(obj, "$")


def _checked(obj: Any, path: str) -> JSONValue:
    """The canonical conversion, naming the JSON ``path`` of whatever it refuses."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        value = float(obj)
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value}; canonical JSON has no NaN or infinity")
        return value
    if isinstance(obj, Mapping):
        out: dict[str, JSONValue] = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ValueError(f"{path} has the non-string key {key!r}; use string keys")
            out[key] = _checked(value, f"{path}.{key}")
        return out
    if isinstance(obj, Sequence) and not isinstance(obj, bytes | bytearray):
        return [_checked(item, f"{path}[{i}]") for i, item in enumerate(obj)]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return _checked(dump(mode="json"), path)
    raise TypeError(f"{path} is a {type(obj).__name__}, which has no canonical JSON form")


def canonical_json(obj: Any) -> str:
    """Return the canonical JSON text of ``obj`` (see the module docstring for the rules).

    Args:
        obj: A JSON-like value; see :func:`normalize` for what is accepted.

    Returns:
        One line of ASCII JSON with sorted keys and no whitespace.
    """
    return json.dumps(
        normalize(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def digest(obj: Any) -> str:
    """Return the SHA-256 of ``obj``'s canonical JSON, as 64 lowercase hex digits.

    Args:
        obj: A JSON-like value; see :func:`normalize`.

    Returns:
        The hex digest.
    """
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()
