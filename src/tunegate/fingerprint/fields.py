"""The fingerprint's data model and its JSON form (``tunegate-fingerprint/1``).

::

    {"format": "tunegate-fingerprint/1",
     "fields": {"<name>": {"value": <str|int|float|bool|null>,
                            "source": "measured" | "configured" | "unknown",
                            "how": "<where it came from, or why it is unknown>"}}}

Every name of :data:`FIELDS` is always present. A field says where its value came from:

* ``measured``: read from the environment (a probe, an endpoint, a file). A field that does
  not apply (a CPU has no driver or CUDA runtime) is ``null`` and ``measured``, with ``how``
  saying why: it matches another such ``null``.
* ``configured``: taken from what the user configured (a scenario, a workload, an adapter).
* ``unknown``: could not be determined (a probe failed, a server gave no version); the value
  is ``null`` and ``how`` says why. Nothing is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "FIELDS",
    "FORMAT",
    "SOURCES",
    "Field",
    "Fingerprint",
    "Source",
    "Value",
    "configured",
    "measured",
    "not_applicable",
    "unknown",
]

FORMAT = "tunegate-fingerprint/1"
"""The ``format`` key of the JSON form."""

FIELDS: tuple[str, ...] = (
    "engine.name", "engine.version", "model.name", "model.digest",
    "accelerator.kind", "accelerator.name", "accelerator.count", "accelerator.memory_mib",
    "accelerator.driver", "accelerator.runtime",
    "host.cpu", "host.cores", "host.kernel", "host.python", "host.tunegate",
    "workload.digest", "benchmark.digest",
)
"""Every field name, in the order the JSON form writes them."""

Source = Literal["measured", "configured", "unknown"]
SOURCES: tuple[Source, ...] = ("measured", "configured", "unknown")
Value = str | int | float | bool | None


def _check_value(value: object) -> str | None:
    """Why ``value`` cannot be a field value, or ``None`` when it can."""
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    return f"{type(value).__name__} {value!r} is not a string, number, boolean or null"


@dataclass(frozen=True, slots=True)
class Field:
    """One fact about the environment and where it came from.

    Attributes:
        value: A string, number, boolean, or ``None`` (unknown, or not applicable).
        source: ``measured``, ``configured`` or ``unknown``.
        how: Where the value came from, or why it is unknown (never a secret).

    Raises:
        ValueError: The source is not one of :data:`SOURCES`, the value is not a plain JSON
            scalar (or not finite), or an unknown field carries a value.
    """

    value: Value
    source: Source
    how: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source {self.source!r} is invalid; valid: {', '.join(SOURCES)}")
        problem = _check_value(self.value)
        if problem is not None:
            raise ValueError(f"value: {problem}")
        if self.source == "unknown" and self.value is not None:
            raise ValueError(f"an unknown field has no value (got {self.value!r})")
        if not isinstance(self.how, str):
            raise ValueError(f"how: {self.how!r} is not a string")

    @property
    def known(self) -> bool:
        """The value is determined (measured or configured), ``None`` included."""
        return self.source != "unknown"

    def to_json(self) -> dict[str, Any]:
        """``{"value": ..., "source": ..., "how": ...}``."""
        return {"value": self.value, "source": self.source, "how": self.how}


def measured(value: Value, how: str) -> Field:
    """A value read from the environment."""
    return Field(value, "measured", how)


def configured(value: Value, how: str) -> Field:
    """A value taken from configuration."""
    return Field(value, "configured", how)


def unknown(why: str) -> Field:
    """A value that could not be determined, and why."""
    return Field(None, "unknown", why)


def not_applicable(why: str) -> Field:
    """A field that does not apply here (``null``, measured): it matches another such ``null``."""
    return Field(None, "measured", why)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The environment a result was measured in: every field of :data:`FIELDS`.

    Attributes:
        fields: Name -> :class:`Field`, read-only, in :data:`FIELDS` order.

    Raises:
        ValueError: A name of :data:`FIELDS` is missing, or an unknown name is given.
    """

    fields: Mapping[str, Field]

    def __post_init__(self) -> None:
        missing = [name for name in FIELDS if name not in self.fields]
        extra = sorted(set(self.fields) - set(FIELDS))
        if missing:
            raise ValueError(f"fingerprint field {missing[0]!r} is missing")
        if extra:
            raise ValueError(f"fingerprint field {extra[0]!r} is unknown; valid fields: "
                             f"{', '.join(FIELDS)}")
        for name in FIELDS:
            if not isinstance(self.fields[name], Field):
                raise ValueError(f"fingerprint field {name!r} is not a Field")
        ordered = {name: self.fields[name] for name in FIELDS}
        object.__setattr__(self, "fields", MappingProxyType(ordered))

    def replace(self, changes: Mapping[str, Field]) -> Fingerprint:
        """A copy with the fields in ``changes`` replaced.

        Raises:
            ValueError: A name in ``changes`` is not a field.
        """
        return Fingerprint({**self.fields, **changes})

    def to_json(self) -> dict[str, Any]:
        """The JSON form (module docstring)."""
        return {"format": FORMAT,
                "fields": {name: field.to_json() for name, field in self.fields.items()}}

    @classmethod
    def from_json(cls, obj: Any) -> Fingerprint:
        """Read the JSON form back.

        Raises:
            ValueError: ``obj`` is not a fingerprint of this format; the message names the
                field and what is wrong with it.
        """
        if not isinstance(obj, Mapping):
            raise ValueError(f"a fingerprint is a JSON object, not {type(obj).__name__}")
        if obj.get("format") != FORMAT:
            raise ValueError(f"fingerprint format {obj.get('format')!r} is not {FORMAT!r}")
        raw = obj.get("fields")
        if not isinstance(raw, Mapping):
            raise ValueError("fingerprint 'fields' is missing or not a JSON object")
        fields: dict[str, Field] = {}
        for name in FIELDS:
            if name not in raw:
                raise ValueError(f"fingerprint field {name!r} is missing")
            fields[name] = _field_from_json(name, raw[name])
        extra = sorted(set(raw) - set(FIELDS))
        if extra:
            raise ValueError(f"fingerprint field {extra[0]!r} is unknown; valid fields: "
                             f"{', '.join(FIELDS)}")
        return cls(fields)


def _field_from_json(name: str, raw: Any) -> Field:
    if not isinstance(raw, Mapping):
        raise ValueError(f"fingerprint field {name!r}: not a JSON object")
    for key in ("value", "source", "how"):
        if key not in raw:
            raise ValueError(f"fingerprint field {name!r}: {key!r} is missing")
    extra = sorted(set(raw) - {"value", "source", "how"})
    if extra:
        raise ValueError(f"fingerprint field {name!r}: key {extra[0]!r} is unknown")
    try:
        return Field(raw["value"], raw["source"], raw["how"])
    except ValueError as exc:
        raise ValueError(f"fingerprint field {name!r}: {exc}") from None
