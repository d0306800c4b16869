"""Checks of plain JSON data that name the path of what is wrong (``trials[3].value: ...``),
and the UTC timestamps the knowledge base sorts by. Each check returns its value or raises
:class:`ValueError` with a one-line message starting with the path."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["got", "json_data", "mapping", "non_empty", "number", "numbers", "required",
           "sortable_utc", "utc_now", "whole"]


def utc_now() -> str:
    """The current time as ISO 8601 UTC with microseconds (``2024-05-01T12:00:00.000000Z``)."""
    return sortable_utc(datetime.now(UTC).isoformat())


def sortable_utc(text: str) -> str:
    """``text`` (ISO 8601 with a zero UTC offset) in one fixed-width form whose string order
    is time order, which is how the store sorts runs newest first.

    Raises:
        ValueError: ``text`` is not ISO 8601, has no offset, or is not UTC.

    Example:
        >>> sortable_utc("2024-05-01T12:00:00+00:00")
        '2024-05-01T12:00:00.000000Z'
    """
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected an ISO 8601 UTC time such as '2024-05-01T12:00:00Z', "
                         f"got {text!r}") from None
    if moment.utcoffset() is None or moment.utcoffset() != UTC.utcoffset(None):
        raise ValueError(f"expected a UTC time (ending in Z or +00:00), got {text!r}")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def got(value: Any) -> str:
    """``got <type> <repr>``, cut to 200 characters, for the end of a message."""
    return f"got {type(value).__name__} {value!r}"[:200]


def non_empty(value: Any, where: str) -> str:
    """A string with at least one character."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: expected a non-empty string, {got(value)}")
    return value


def whole(value: Any, where: str) -> int:
    """An integer >= 0 (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: expected a whole number >= 0, {got(value)}")
    return value


def number(value: Any, where: str) -> float:
    """A finite int or float (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a finite number, {got(value)}")
    return value


def mapping(value: Any, where: str) -> dict[str, Any]:
    """A JSON object (a dict)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, {got(value)}")
    return value


def numbers(value: Any, where: str) -> None:
    """Every value of the object ``value`` is a finite number."""
    for key, item in mapping(value, where).items():
        number(item, f"{where}.{key}")


def json_data(value: Any, where: str) -> None:
    """``value`` is plain JSON: strings, finite numbers, booleans, null, lists, objects with
    string keys (what a document can hold without loss)."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        number(value, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            json_data(item, f"{where}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where}: keys must be strings, got {key!r}")
            json_data(item, f"{where}.{key}")
    else:
        raise ValueError(f"{where}: not JSON data, {got(value)}")


def required(doc: Mapping[str, Any], key: str, where: str = "") -> Any:
    """``doc[key]``, or an error naming the missing key."""
    if key not in doc:
        raise ValueError(f"{where}{key}: missing")
    return doc[key]
