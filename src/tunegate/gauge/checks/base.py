"""What a check is, and the small helpers every check shares.

A check is a function ``(dataset, prior) -> Finding | NotChecked | None``: ``prior`` holds the
findings of the checks that ran before it (by code), so a check computed from a field another
check invalidated can say it is derived (``derived_from``) instead of posing as new evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import BoolArray, FloatArray

__all__ = ["Check", "CheckResult", "NotChecked", "broken", "count", "mean", "median", "rel_close"]


@dataclass(frozen=True, slots=True)
class NotChecked:
    """A check that could not run, and why.

    Attributes:
        reason: For a person ("the report has no per-request data").
        needs_requests: True when per-request data would have made it possible.
    """

    reason: str
    needs_requests: bool = False


CheckResult = Finding | NotChecked | None
Check = Callable[[Dataset, Mapping[str, Finding]], CheckResult]

BROKEN_TTFT = ("ttft_equals_e2el", "ttft_missing")
"""Findings that make TTFT (and everything computed from it) meaningless."""


def broken(prior: Mapping[str, Finding], codes: Sequence[str] = BROKEN_TTFT) -> tuple[str, ...]:
    """The codes among ``codes`` that were reported as errors."""
    return tuple(c for c in codes if c in prior and prior[c].severity is Severity.ERROR)


def rel_close(a: float, b: float, rel: float = 1e-3, absolute: float = 1e-6) -> bool:
    """``|a - b| <= max(absolute, rel x max(|a|, |b|))``."""
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


def count(mask: BoolArray) -> int:
    """How many rows ``mask`` selects."""
    return int(np.count_nonzero(mask))


def mean(values: Sequence[float] | FloatArray) -> float:
    """Arithmetic mean (NaN for no values)."""
    array = np.asarray(values, dtype=np.float64)
    return float(np.mean(array)) if array.size else float("nan")


def median(values: Sequence[float] | FloatArray) -> float:
    """Median (NaN for no values)."""
    array = np.asarray(values, dtype=np.float64)
    return float(np.median(array)) if array.size else float("nan")
