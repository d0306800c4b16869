"""Two recorded runs' environments side by side (``tunegate kb diff A B``).

Every fingerprint field of both runs, in the contract's order, each marked by what
:func:`tunegate.fingerprint.compare` makes of it: ``same``; ``differs`` (known on both sides,
different, a soft field such as the driver); ``invalidates`` (known on both sides, different,
one of the fields that make a result inapplicable: engine, model, accelerator, workload,
benchmark); ``unconfirmed`` (unknown on one side or both: the match cannot be confirmed). The
verdict is the comparison's: ``exact``, ``partial`` or ``invalid``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tunegate.fingerprint import FIELDS, Fingerprint, compare
from tunegate.knowledge.record import RunRecord

__all__ = ["FieldRow", "Mark", "RunDiff", "diff_runs"]

Mark = Literal["same", "differs", "invalidates", "unconfirmed"]


@dataclass(frozen=True)
class FieldRow:
    """One fingerprint field in both runs.

    Attributes:
        name: The field.
        a: Its JSON form (``value``, ``source``, ``how``) in the first run.
        b: The same in the second run.
        mark: ``same``, ``differs``, ``invalidates`` or ``unconfirmed`` (module docstring).
    """

    name: str
    a: dict[str, Any]
    b: dict[str, Any]
    mark: Mark

    def to_json(self) -> dict[str, Any]:
        """``{"name", "a", "b", "mark"}``."""
        return {"name": self.name, "a": self.a, "b": self.b, "mark": self.mark}


@dataclass(frozen=True)
class RunDiff:
    """Two runs' fingerprints compared.

    Attributes:
        a: The first run's id.
        b: The second run's id.
        verdict: ``exact``, ``partial`` or ``invalid``.
        fields: Every field, in :data:`~tunegate.fingerprint.FIELDS` order.
    """

    a: str
    b: str
    verdict: Literal["exact", "partial", "invalid"]
    fields: list[FieldRow]

    @property
    def invalidating(self) -> list[str]:
        """The fields that make the verdict ``invalid``."""
        return [row.name for row in self.fields if row.mark == "invalidates"]

    def to_json(self) -> dict[str, Any]:
        """The comparison as one JSON document."""
        return {"a": self.a, "b": self.b, "verdict": self.verdict,
                "invalidating": self.invalidating,
                "fields": [row.to_json() for row in self.fields]}


def diff_runs(a: RunRecord, b: RunRecord) -> RunDiff:
    """Compare ``a``'s fingerprint with ``b``'s (a record's fingerprint is always valid:
    :class:`RunRecord` checks it when it is built)."""
    first, second = Fingerprint.from_json(a.fingerprint), Fingerprint.from_json(b.fingerprint)
    comparison = compare(first, second)
    differences = {d.name: d for d in comparison.differences}
    rows = []
    for name in FIELDS:
        left, right = first.fields[name], second.fields[name]
        difference = differences.get(name)
        mark: Mark = ("same" if difference is None
                      else "invalidates" if difference.invalidates
                      else "differs" if left.known and right.known else "unconfirmed")
        rows.append(FieldRow(name, left.to_json(), right.to_json(), mark))
    return RunDiff(a.id, b.id, comparison.verdict, rows)
