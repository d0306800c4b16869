"""Whether two fingerprints describe the same environment: ``exact``, ``partial`` or ``invalid``.

The rule, field by field over :data:`~tunegate.fingerprint.fields.FIELDS`:

* an invalidating field (:data:`INVALIDATING`: engine, model, accelerator identity, workload,
  benchmark) that is not the same on both sides makes the comparison ``invalid``: different,
  or unknown on a side, so nothing confirms that the other result measured the same thing
  (an engine that reports no version may have been upgraded since); never trusted;
* otherwise any difference makes it ``partial``: a soft field differs (a driver, the kernel,
  Python, tunegate) or is unknown on a side (an unknown never counts as equal, not even to
  another unknown);
* otherwise ``exact``.

A known ``null`` (a field that does not apply, such as a CPU's driver) equals another known
``null``. A boolean equals only a boolean (``True`` is not ``1``).

Example:
    >>> from tunegate.fingerprint.fields import FIELDS, Fingerprint, measured
    >>> a = Fingerprint({name: measured("x", "test") for name in FIELDS})
    >>> compare(a, a).verdict
    'exact'
    >>> b = a.replace({"host.kernel": measured("y", "test")})
    >>> compare(a, b).verdict, compare(a, b).differences[0].describe()
    ('partial', "host.kernel: 'x' -> 'y'")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tunegate.fingerprint.fields import FIELDS, Field, Fingerprint

__all__ = ["INVALIDATING", "Comparison", "Difference", "Verdict", "compare"]

INVALIDATING: frozenset[str] = frozenset({
    "engine.name", "engine.version", "model.name", "model.digest", "accelerator.kind",
    "accelerator.name", "accelerator.count", "accelerator.memory_mib", "workload.digest",
    "benchmark.digest",
})
"""Fields whose known change means a result no longer applies."""

Verdict = Literal["exact", "partial", "invalid"]


def _same(a: Field, b: Field) -> bool:
    """Both known and equal (a boolean only equals a boolean)."""
    if not (a.known and b.known):
        return False
    if isinstance(a.value, bool) or isinstance(b.value, bool):
        return type(a.value) is type(b.value) and a.value == b.value
    return a.value == b.value


@dataclass(frozen=True, slots=True)
class Difference:
    """One field that does not match.

    Attributes:
        name: The field.
        before: Its value in the first fingerprint.
        after: Its value in the second.
        invalidates: In :data:`INVALIDATING` (and not the same: different, or unknown on a
            side).
    """

    name: str
    before: Field
    after: Field
    invalidates: bool

    def describe(self) -> str:
        """One line: ``name: before -> after``, unknowns with their reason."""
        def show(field: Field) -> str:
            return repr(field.value) if field.known else f"unknown ({field.how})"

        suffix = " (invalidates)" if self.invalidates else ""
        return f"{self.name}: {show(self.before)} -> {show(self.after)}{suffix}"

    def to_json(self) -> dict[str, Any]:
        """JSON form: the name, both fields and whether it invalidates."""
        return {"name": self.name, "before": self.before.to_json(),
                "after": self.after.to_json(), "invalidates": self.invalidates}


@dataclass(frozen=True, slots=True)
class Comparison:
    """The verdict of :func:`compare` and the fields behind it.

    Attributes:
        verdict: ``exact``, ``partial`` or ``invalid``.
        differences: Every field that does not match, in :data:`FIELDS` order.
    """

    verdict: Verdict
    differences: list[Difference]

    @property
    def invalidating(self) -> list[Difference]:
        """The differences that make the comparison ``invalid``."""
        return [d for d in self.differences if d.invalidates]

    def to_json(self) -> dict[str, Any]:
        """JSON form: the verdict and the differences."""
        return {"verdict": self.verdict, "differences": [d.to_json() for d in self.differences]}


def compare(a: Fingerprint, b: Fingerprint) -> Comparison:
    """Compare two fingerprints by the rule of the module docstring."""
    differences = []
    for name in FIELDS:
        before, after = a.fields[name], b.fields[name]
        if _same(before, after):
            continue
        invalidates = name in INVALIDATING  # different, or not confirmed equal
        differences.append(Difference(name, before, after, invalidates))
    verdict: Verdict = ("invalid" if any(d.invalidates for d in differences)
                        else "partial" if differences else "exact")
    return Comparison(verdict, differences)
