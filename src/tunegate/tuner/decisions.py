"""``decisions.jsonl``: every decision the tuner makes, auditable and replayable.

Each decision is one :class:`~tunegate.tuner.journal.Journal` record of type ``"decision"``
(same checksummed line format; a tuning run's log is chained, with a ``decisions.head`` beside
it), whose ``data`` is :meth:`Decision.to_json`::

    {"seq":4,"epoch":1,"type":"decision","data":{"component":"gate","component_version":"1",
     "id":"d4","input_hash":"9b1e...","inputs":{...},"kind":"gate_verdict","latency_ms":0.8,
     "output_hash":"51aa...","outputs":{"verdict":"accept"},"parent_id":"d3",
     "produced_by":null,"seed":7,"timestamp":"2025-06-01T12:00:00.123456Z"},"crc":"..."}

``input_hash``/``output_hash`` are :func:`~tunegate.tuner.digest.digest` (SHA-256 of canonical
JSON). A decision's id is ``d<seq>``, so ids are stable across replays. ``parent_id`` links a
decision to the one it follows from (a verdict to its proposal); a ``keep`` must name in
``produced_by`` the decision that produced the kept config, so every "current best" traces back.

Replay (:func:`replay_decisions`, or :func:`replay_records` on records already read): a
registry maps a component name to its version and a pure function ``(inputs, seed) -> outputs``;
each recorded decision whose inputs were stored is re-run and its output hash compared with the
recorded one. Inputs that held secrets hold them masked (:mod:`tunegate.tuner.masking`), and
the live run decided on that masked form too, so the hashes agree. A ``proposer`` decision's
history refers to the previous proposal's (:mod:`tunegate.tuner.proposal_history`): replay
expands it, once per decision, before calling the function, and the output hash is compared
as for any other decision.

A function may carry work from one decision of a log to the next while staying a pure function
of its inputs (the proposer keeps its fitted model between proposals): it then offers
``for_log()`` (:class:`LogScoped`), and :func:`for_log` gives each log, live run or replay, a
fresh instance of its own, so nothing is shared between logs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from tunegate.tuner.digest import canonical_json, digest, normalize
from tunegate.tuner.journal import Journal, JournalRecord, read_journal
from tunegate.tuner.lease_core import ServiceLease
from tunegate.tuner.proposal_history import HistoryError, HistoryExpander

__all__ = [
    "Decider",
    "Decision",
    "DecisionKind",
    "DecisionLog",
    "LogScoped",
    "ReplayMismatch",
    "canonical_json",
    "digest",
    "for_log",
    "replay_decisions",
    "replay_records",
]

RECORD_TYPE = "decision"
Decider = Callable[[Any, int | None], Any]
"""A replayable deciding component: ``(inputs, seed) -> outputs``, deterministic."""


@runtime_checkable
class LogScoped(Protocol):
    """A decider with a per-log form: the same answers, with work kept between the decisions
    of one log (one run, or one replay of it)."""

    def __call__(self, inputs: Any, seed: int | None) -> Any: ...

    def for_log(self) -> Decider:
        """A fresh decider for one log's decisions, in order."""
        ...


def for_log(registry: Mapping[str, tuple[str, Decider]]) -> dict[str, tuple[str, Decider]]:
    """The registry as one log uses it: every :class:`LogScoped` decider replaced by a fresh
    per-log instance, the others as they are."""
    return {name: (version, decide.for_log() if isinstance(decide, LogScoped) else decide)
            for name, (version, decide) in registry.items()}


class DecisionKind(StrEnum):
    """What was decided."""

    BASELINE = "baseline"
    PROPOSAL = "proposal"
    VALIDATION = "validation"
    GATE_VERDICT = "gate_verdict"
    EARLY_STOP = "early_stop"
    KEEP = "keep"
    ROLLBACK = "rollback"
    DRIFT = "drift"
    APPROVAL = "approval"
    ABNORMAL = "abnormal"
    STOP = "stop"
    SOAK = "soak"
    ATTRIBUTION = "attribution"
    WARM_START = "warm_start"


@dataclass(frozen=True)
class Decision:
    """One recorded decision; see the module docstring for the field meanings."""

    id: str
    kind: DecisionKind
    component: str
    component_version: str
    seed: int | None
    inputs: Any
    input_hash: str
    outputs: Any
    output_hash: str
    latency_ms: float
    timestamp: str
    parent_id: str | None = None
    produced_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form stored in the journal record's ``data``."""
        return {
            "id": self.id, "kind": self.kind.value, "component": self.component,
            "component_version": self.component_version, "seed": self.seed,
            "inputs": self.inputs, "input_hash": self.input_hash, "outputs": self.outputs,
            "output_hash": self.output_hash, "latency_ms": self.latency_ms,
            "timestamp": self.timestamp, "parent_id": self.parent_id,
            "produced_by": self.produced_by,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        """Rebuild a decision from its stored form, verifying the stored hashes.

        Raises:
            ValueError: A field is missing or a hash does not match its content.
        """
        try:
            decision = cls(**{**data, "kind": DecisionKind(data["kind"])})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a decision record: {exc}") from exc
        if decision.inputs is not None and digest(decision.inputs) != decision.input_hash:
            raise ValueError(f"decision {decision.id}: inputs do not match input_hash")
        if digest(decision.outputs) != decision.output_hash:
            raise ValueError(f"decision {decision.id}: outputs do not match output_hash")
        return decision


class DecisionLog:
    """Appends decisions to ``decisions.jsonl`` and keeps them indexed by id. Use :meth:`open`."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.decisions: list[Decision] = [
            Decision.from_json(r.data) for r in journal.records if r.type == RECORD_TYPE
        ]
        self._by_id = {d.id: d for d in self.decisions}

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, lease: ServiceLease | None = None,
             fsync_every: int = 1, chained: bool = False) -> DecisionLog:
        """Open (creating if needed) a decision log; arguments as for :meth:`Journal.open`."""
        return cls(Journal.open(path, lease=lease, fsync_every=fsync_every, chained=chained))

    def get(self, decision_id: str) -> Decision:
        """Return the decision with this id (``KeyError`` if absent)."""
        return self._by_id[decision_id]

    def lineage(self, decision_id: str) -> list[Decision]:
        """Return the decision and its ancestors via ``produced_by``/``parent_id``, newest first."""
        chain: list[Decision] = []
        current: str | None = decision_id
        while current is not None and current not in {d.id for d in chain}:
            decision = self._by_id[current]
            chain.append(decision)
            current = decision.produced_by or decision.parent_id
        return chain

    def record(self, kind: DecisionKind | str, component: str, version: str, *, inputs: Any,
               outputs: Any, latency_ms: float, seed: int | None = None,
               parent_id: str | None = None, produced_by: str | None = None,
               store_inputs: bool = True) -> Decision:
        """Append a decision durably (fenced by the journal's lease) and return it.

        Args:
            kind: What was decided.
            component: The deciding component's name (the replay registry key).
            version: Its version; replay refuses to compare across versions.
            inputs: Everything the component's output depends on (JSON-like).
            outputs: What it decided (JSON-like).
            latency_ms: How long the decision took.
            seed: The random seed it used, if any.
            parent_id: The decision this one follows from.
            produced_by: For ``keep``: the decision that produced the kept config (required).
            store_inputs: ``False`` stores only ``input_hash`` (large inputs); not replayable.

        Raises:
            ValueError: An unknown referenced id, a ``keep`` without ``produced_by``, or inputs
                or outputs that have no canonical JSON form.
        """
        kind = DecisionKind(kind)
        for ref in (parent_id, produced_by):
            if ref is not None and ref not in self._by_id:
                raise ValueError(f"decision {ref!r} is not in {self.journal.path}")
        if kind is DecisionKind.KEEP and produced_by is None:
            raise ValueError("a keep decision must name the decision that produced the config")
        clean_inputs, clean_outputs = normalize(inputs), normalize(outputs)
        decision = Decision(
            id=f"d{self.journal.next_seq}", kind=kind, component=component,
            component_version=version, seed=seed,
            inputs=clean_inputs if store_inputs else None, input_hash=digest(clean_inputs),
            outputs=clean_outputs, output_hash=digest(clean_outputs),
            latency_ms=float(latency_ms), timestamp=_now(), parent_id=parent_id,
            produced_by=produced_by,
        )
        self.journal.append(RECORD_TYPE, decision.to_json())
        self.decisions.append(decision)
        self._by_id[decision.id] = decision
        return decision

    def close(self) -> None:
        """Close the underlying journal."""
        self.journal.close()


@dataclass(frozen=True)
class ReplayMismatch:
    """A decision that replay could not confirm."""

    decision_id: str
    component: str
    reason: str


def replay_decisions(path: str | os.PathLike[str],
                     registry: Mapping[str, tuple[str, Decider]]) -> list[ReplayMismatch]:
    """Re-run every recorded decision whose component is registered; report what differs.

    Args:
        path: A ``decisions.jsonl`` (read only; a torn last line is ignored, not removed).
        registry: Component name -> (version, function). Decisions of unregistered
            components are not checked.

    Returns:
        One :class:`ReplayMismatch` per decision that differs, was recorded by another
        version, stored no inputs, or raised when re-run; empty when replay agrees.

    Raises:
        JournalCorruptError: The log is damaged (see :func:`~tunegate.tuner.journal.read_journal`).
    """
    return replay_records(read_journal(path).records, registry)


def replay_records(records: Iterable[JournalRecord],
                   registry: Mapping[str, tuple[str, Decider]]) -> list[ReplayMismatch]:
    """:func:`replay_decisions` on records already read (records of other types are skipped).

    The decisions are replayed in order with the registry's per-log deciders (:func:`for_log`),
    and history references are expanded against the decisions read before them.
    """
    registry = for_log(registry)
    recorded: dict[str, Any] = {}
    expander = HistoryExpander(recorded.get)
    mismatches: list[ReplayMismatch] = []
    for record in records:
        if record.type != RECORD_TYPE:
            continue
        try:
            decision = Decision.from_json(record.data)
        except ValueError as exc:  # a stored hash no longer matches: tampered or damaged
            mismatches.append(ReplayMismatch(str(record.data.get("id", f"seq {record.seq}")),
                                             str(record.data.get("component", "?")), str(exc)))
            continue
        if decision.inputs is not None:
            recorded[decision.id] = decision.inputs
        entry = registry.get(decision.component)
        if entry is None:
            continue
        reason = _replayed(decision, *entry, expander)
        if reason is not None:
            mismatches.append(ReplayMismatch(decision.id, decision.component, reason))
    return mismatches


def _replayed(decision: Decision, version: str, decide: Decider,
              expander: HistoryExpander) -> str | None:
    """Why ``decision`` does not replay (``None``: it does)."""
    if version != decision.component_version:
        return f"recorded by version {decision.component_version}, registry has {version}"
    if decision.inputs is None:
        return "inputs were not stored (only their hash); cannot re-run"
    try:
        inputs = expander.expand(decision.inputs, decision.id)
    except HistoryError as exc:
        return str(exc)
    try:
        replayed = digest(decide(inputs, decision.seed))
    except Exception as exc:
        return f"re-run raised {type(exc).__name__}: {exc}"
    if replayed != decision.output_hash:
        return f"output hash {replayed[:12]} != recorded {decision.output_hash[:12]}"
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
