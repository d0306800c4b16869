"""The typed vocabulary of a tuning run: what a proposal is, how a trial ended, why a run ended.

These values are written to the journal, ``decisions.jsonl`` and ``summary.json`` as their
string values, and read back by the summary, the report and the CLI, so nobody matches a
human-readable sentence to learn what happened: the CLI maps :class:`EndReason` to an exit
code, the summary groups trials by :class:`TrialVerdict`, and the story tells a remedy from a
Bayesian proposal by :class:`ProposalKind`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["Candidate", "EndReason", "ProposalKind", "TrialVerdict"]


class ProposalKind(StrEnum):
    """Where a candidate came from."""

    REMEDY = "remedy"
    """A known fix for a gauge finding on the baseline, tried before the search; it gets the
    full evidence and is never stopped early by rank."""
    SEARCH = "search"
    """The proposer's choice (design point, model-based, random, sweep)."""


class TrialVerdict(StrEnum):
    """How one trial ended (``trials_log``, ``summary.json`` ``history``)."""

    BASELINE = "BASELINE"
    ACCEPT = "ACCEPT"
    REJECT = "REJECT"
    INCONCLUSIVE = "INCONCLUSIVE"
    SLO_MISSED = "SLO_MISSED"
    """The gate accepted it, but it misses an SLO the kept config meets: rolled back."""
    EARLY_STOPPED = "EARLY_STOPPED"
    """Ranked below the top ``1/eta`` after its first repeat (ASHA): no gate verdict."""
    START_FAILED = "START_FAILED"
    MEASURE_FAILED = "MEASURE_FAILED"
    INVALID = "INVALID"
    """A repeat failed validation, or lacked a metric the gate judges."""
    NOT_CONFIRMED = "NOT_CONFIRMED"
    """Production mode: the operator declined the change."""

    @property
    def measured(self) -> bool:
        """A statistical verdict on the trial's repeats: a point of the delivery."""
        return self in _MEASURED

    @property
    def gate_accepted(self) -> bool:
        """The gate vouched for it (the baseline is the reference, vouched by definition)."""
        return self in (TrialVerdict.BASELINE, TrialVerdict.ACCEPT, TrialVerdict.SLO_MISSED)


_MEASURED = frozenset({TrialVerdict.BASELINE, TrialVerdict.ACCEPT, TrialVerdict.SLO_MISSED,
                       TrialVerdict.REJECT, TrialVerdict.INCONCLUSIVE})


class EndReason(StrEnum):
    """Why a run reached its final state; ``tunegate tune`` maps it to an exit code."""

    BUDGET_SPENT = "budget_spent"
    CONVERGED = "converged"
    SOAK_DEGRADED = "soak_degraded"
    """The recommendation's soak said ``degraded``: it is not delivered."""
    LEASE_DENIED = "lease_denied"
    """Another run holds the service."""
    LEASE_LOST = "lease_lost"
    """Another run took the service over while this one ran (this one writes nothing more)."""
    NO_CONFIRMATION = "no_confirmation"
    """Production mode: nobody answered a change (fail closed)."""
    NOT_CONFIRMED = "not_confirmed"
    """Production mode: the must-change fixes were declined."""
    INTERRUPTED = "interrupted"
    BASELINE_INVALID = "baseline_invalid"
    """The baseline failed validation three times in a row."""
    GAUGE_UNFIXABLE = "gauge_unfixable"
    """The service as given produces invalid data no must-change fix answers."""
    METRIC_MISSING = "metric_missing"
    """A metric the config names is absent from a valid baseline repeat."""
    START_FAILED_TWICE = "start_failed_twice"
    """Two consecutive failed starts: the environment is abnormal."""
    ROLLBACK_FAILED = "rollback_failed"
    """The kept config did not come back."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """The proposal under test.

    Attributes:
        trial: Its number (the baseline is 0).
        params: The full engine config it runs (the kept config with the proposal's changes).
        reason: Why it was proposed, in words.
        kind: Where it came from.
        proposer: The proposer that chose it (``bayes``, ``layered_sweep``...; empty for a
            remedy).
    """

    trial: int
    params: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""
    kind: ProposalKind = ProposalKind.SEARCH
    proposer: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"trial": self.trial, "params": dict(self.params), "reason": self.reason,
                "kind": self.kind.value, "proposer": self.proposer}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        """Also reads snapshots written before the kind existed (``remedy: true``)."""
        kind = data.get("kind") or (ProposalKind.REMEDY if data.get("remedy")
                                    else ProposalKind.SEARCH)
        return cls(int(data["trial"]), dict(data["params"]), str(data.get("reason", "")),
                   ProposalKind(kind), str(data.get("proposer", "")))
