"""A report's values, checked as they are read: numbers, counts, lists.

Every reader takes its numbers through these functions, so a hostile or broken file (a count of
-3, ``"abc"`` where seconds belong, a 400-digit integer, ``Infinity`` requests) is refused as a
broken structure naming the field, never read as a plausible figure and never a traceback. The
caller turns the ``ValueError`` into a usage error naming the file (``load_report``).

``None`` and NaN mean "the report did not say" (tools write NaN for the mean of nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["count", "error_lines", "number", "seconds_list"]


def number(value: Any, name: str = "value", *, allow_inf: bool = False) -> float | None:
    """A report's number: ``None`` for null and NaN.

    Args:
        value: The raw value.
        name: The field, for the message.
        allow_inf: Infinity is meaningful (an unbounded ``request_rate``, written ``"inf"`` or
            ``Infinity``); anywhere else an infinite figure is a broken report.

    Raises:
        ValueError: Not a number (a string, a list, ``true``), too large for a float, or
            infinite where that means nothing.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"'{name}' must be a number, got {value!r}")
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity", "+inf"):
        result = math.inf
    elif isinstance(value, int | float):
        try:
            result = float(value)
        except OverflowError:
            raise ValueError(f"'{name}' is too large to be a number "
                             f"({len(str(abs(int(value))))} digits)") from None
    else:
        raise ValueError(f"'{name}' must be a number, got {str(value)[:40]!r}")
    if math.isnan(result):
        return None
    if math.isinf(result) and not allow_inf:
        raise ValueError(f"'{name}' must be finite, got {value!r}")
    return result


def count(value: Any, name: str) -> int | None:
    """A count (requests, tokens): a finite, non-negative whole number, or ``None``.

    Raises:
        ValueError: Negative, fractional beyond float rounding, infinite, or not a number.
    """
    result = number(value, name)
    if result is None:
        return None
    if result < 0 or abs(result - round(result)) > 1e-6:
        raise ValueError(f"'{name}' must be a non-negative whole number, got {value!r}")
    return round(result)


def seconds_list(value: Any, name: str) -> Sequence[Any]:
    """A per-request array: a list (its entries are checked where they are read).

    Raises:
        ValueError: Not a list.
    """
    if not isinstance(value, list):
        raise ValueError(f"'{name}' must be a list, got {type(value).__name__}")
    return value


def error_lines(errors: Sequence[Any], most: int = 3) -> tuple[str, ...]:
    """The distinct failure messages of a per-request ``errors`` array, last line of each
    (a traceback's last line names the exception), most frequent first; ``""`` is success."""
    found: dict[str, int] = {}
    for error in errors:
        lines = str(error).strip().splitlines() if error else []
        if lines:
            key = lines[-1][:300]
            found[key] = found.get(key, 0) + 1
    return tuple(sorted(found, key=lambda e: -found[e]))[:most]
