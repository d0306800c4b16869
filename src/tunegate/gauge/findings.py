"""What a gauge check reports: a finding with a stable code, its evidence and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Finding", "Severity", "ValidationReport"]


class Severity(StrEnum):
    ERROR = "error"
    """The data cannot answer the question it claims to answer."""
    WARNING = "warning"
    """Suspicious: read the affected figures with care."""
    INFO = "info"
    """Worth knowing; changes nothing."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's verdict.

    Attributes:
        code: Stable snake_case identifier (e.g. ``ttft_equals_e2el``); tools may rely on it.
        severity: How much it undermines the data.
        message: One or two sentences for a person.
        evidence: The numbers that triggered it.
        remedy: What to do about it.
        invalidates: Metrics this finding makes meaningless (e.g. ``["ttft", "tpot", "itl"]``).
        derived_from: Codes of findings this one was computed through. A derived finding is not
            independent evidence: it may be a consequence of the other one.
    """

    code: str
    severity: Severity
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str = ""
    invalidates: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "evidence": self.evidence,
            "remedy": self.remedy,
            "invalidates": list(self.invalidates),
            "derived_from": list(self.derived_from),
        }


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """All findings of one validation; ``valid`` is false when any finding is an error.

    Attributes:
        findings: What the checks found, gauge-breaking ones first.
        not_checked: ``(code, reason)`` for each check that could not run on this data.
    """

    findings: tuple[Finding, ...]
    not_checked: tuple[tuple[str, str], ...] = ()

    @property
    def valid(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def invalid_metrics(self) -> set[str]:
        return {m for f in self.findings if f.severity is Severity.ERROR for m in f.invalidates}

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "invalid_metrics": sorted(self.invalid_metrics),
            "findings": [f.to_dict() for f in self.findings],
            "not_checked": dict(self.not_checked),
        }
