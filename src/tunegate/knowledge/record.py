"""What the knowledge base keeps of one finished run: :class:`RunRecord` and its trials.

A record is plain data, checked when it is built (a record that exists is a valid one), and
travels as one JSON document (:meth:`RunRecord.to_json`, format :data:`RECORD_FORMAT`), which
is what the store keeps; its listing columns are derived from it. Reading a document back
(:meth:`RunRecord.from_json`) raises :class:`ValueError` naming the first bad field by its path
(``trials[3].verdict: ...``), so a damaged row is reported, never guessed at.

Shapes of the free-form parts (only what is named here is checked; other keys pass through):

* ``fingerprint``: the ``tunegate-fingerprint/1`` JSON document, checked by
  :meth:`tunegate.fingerprint.Fingerprint.from_json`.
* ``objective``: ``{"metric": str, "direction": "higher" | "lower", ...}``.
* ``space``: the searched parameters, ``[{"name": str, ...}, ...]``.
* ``baseline`` and ``kept``: configs (parameter name to value): the baseline's, and the kept
  one (``None`` when nothing was kept); the kept config's measurement is its trial's, the one
  marked ``kept``.
* ``pareto``: ``[{"trial": int, "config": {...}, "values": {...}}, ...]``.
* ``noise``: each metric's relative run-to-run sigma.
* ``extra``: anything else worth keeping, JSON only.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from tunegate.fingerprint import Fingerprint
from tunegate.knowledge.checks import (
    got,
    json_data,
    mapping,
    non_empty,
    numbers,
    required,
    sortable_utc,
    whole,
)
from tunegate.knowledge.checks import number as finite

__all__ = ["RECORD_FORMAT", "RunRecord", "TrialRecord"]

RECORD_FORMAT = "tunegate-kb-run/1"
"""The document format this code writes and reads."""

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
"""A run id: what ``tunegate kb`` shows and the user types (``run_id`` is 32 hex digits)."""
KIND = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def _fingerprint(value: Any) -> None:
    """The fingerprint contract's JSON form (:meth:`Fingerprint.from_json` is its reader)."""
    try:
        Fingerprint.from_json(mapping(value, "fingerprint"))
    except ValueError as exc:
        raise ValueError(f"fingerprint: {str(exc).removeprefix('fingerprint ')}") from None
    json_data(value, "fingerprint")


@dataclass(frozen=True)
class TrialRecord:
    """One trial of a run, as measured.

    Attributes:
        trial: The trial's number in its run (the baseline is trial 0).
        config: The parameters it ran with.
        repeats: The measured metrics of each valid repeat, in order.
        value: The objective as the search saw it (higher is better, so a lower-is-better
            metric is negated); ``None`` when it produced no value (failed to start).
        values: The metrics' means over the repeats, in their own units and directions.
        verdict: How the trial ended (``accept``, ``reject``, ``start_failed``, ...).
        kept: Whether this trial's config is the one the run kept.
    """

    trial: int
    config: dict[str, Any]
    repeats: list[dict[str, float]]
    value: float | None
    values: dict[str, float]
    verdict: str
    kept: bool

    def __post_init__(self) -> None:
        whole(self.trial, "trial")
        json_data(mapping(self.config, "config"), "config")
        if not isinstance(self.repeats, list):
            raise ValueError(f"repeats: expected a list, {got(self.repeats)}")
        for index, repeat in enumerate(self.repeats):
            numbers(repeat, f"repeats[{index}]")
        if self.value is not None:
            finite(self.value, "value")
        numbers(self.values, "values")
        non_empty(self.verdict, "verdict")
        if not isinstance(self.kept, bool):
            raise ValueError(f"kept: expected true or false, {got(self.kept)}")

    def to_json(self) -> dict[str, Any]:
        """The trial as a JSON object (a deep copy)."""
        return copy.deepcopy({"trial": self.trial, "config": self.config,
                              "repeats": self.repeats, "value": self.value,
                              "values": self.values, "verdict": self.verdict,
                              "kept": self.kept})

    @classmethod
    def from_json(cls, obj: Any) -> TrialRecord:
        """The trial in ``obj``. Raises :class:`ValueError` naming the bad field."""
        doc = copy.deepcopy(mapping(obj, "trial record"))
        return cls(**{name: required(doc, name) for name in _TRIAL_FIELDS})


_TRIAL_FIELDS = ("trial", "config", "repeats", "value", "values", "verdict", "kept")


@dataclass(frozen=True)
class RunRecord:
    """One finished run as the knowledge base keeps it.

    Attributes:
        id: The run's ``run_id`` (the key: recording the same run again replaces it).
        kind: What ran (``"tune"``).
        recorded_at: When it was recorded, ISO 8601 UTC.
        run_dir: Where its run directory was (it may have moved since).
        status: How it ended (the tuner's end reason).
        fingerprint: The environment it ran in (the fingerprint contract's JSON).
        objective: The metric it optimised and its direction.
        space: The searched parameters.
        baseline: The baseline's config.
        kept: The kept config; ``None`` when nothing was kept.
        pareto: The Pareto set it delivered.
        noise: Each metric's relative run-to-run sigma.
        trials: Every trial, in order.
        extra: Anything else, JSON only.
    """

    id: str
    kind: str
    recorded_at: str
    run_dir: str
    status: str
    fingerprint: dict[str, Any]
    objective: dict[str, Any]
    space: list[dict[str, Any]]
    baseline: dict[str, Any]
    kept: dict[str, Any] | None
    pareto: list[dict[str, Any]]
    noise: dict[str, float]
    trials: list[TrialRecord]
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not RUN_ID.fullmatch(self.id):
            raise ValueError(f"id: expected letters, digits, '.', '_', ':' or '-' (at most "
                             f"200, starting with a letter or digit), {got(self.id)}")
        if not isinstance(self.kind, str) or not KIND.fullmatch(self.kind):
            raise ValueError(f"kind: expected a lower-case name such as 'tune', "
                             f"{got(self.kind)}")
        try:
            sortable_utc(non_empty(self.recorded_at, "recorded_at"))
        except ValueError as exc:
            raise ValueError(f"recorded_at: {str(exc).removeprefix('recorded_at: ')}") from None
        non_empty(self.run_dir, "run_dir")
        non_empty(self.status, "status")
        _fingerprint(self.fingerprint)
        objective = mapping(self.objective, "objective")
        non_empty(objective.get("metric"), "objective.metric")
        if objective.get("direction") not in ("higher", "lower"):
            raise ValueError(f"objective.direction: expected 'higher' or 'lower', "
                             f"{got(objective.get('direction'))}")
        json_data(objective, "objective")
        if not isinstance(self.space, list):
            raise ValueError(f"space: expected a list, {got(self.space)}")
        for index, parameter in enumerate(self.space):
            non_empty(mapping(parameter, f"space[{index}]").get("name"), f"space[{index}].name")
        json_data(self.space, "space")
        json_data(mapping(self.baseline, "baseline"), "baseline")
        if self.kept is not None:
            json_data(mapping(self.kept, "kept"), "kept")
        if not isinstance(self.pareto, list):
            raise ValueError(f"pareto: expected a list, {got(self.pareto)}")
        for index, point in enumerate(self.pareto):
            mapping(point, f"pareto[{index}]")
        json_data(self.pareto, "pareto")
        numbers(self.noise, "noise")
        if not isinstance(self.trials, list):
            raise ValueError(f"trials: expected a list, {got(self.trials)}")
        for index, trial in enumerate(self.trials):
            if not isinstance(trial, TrialRecord):
                raise ValueError(f"trials[{index}]: expected a TrialRecord, {got(trial)}")
        json_data(mapping(self.extra, "extra"), "extra")

    def field_value(self, name: str) -> Any:
        """The fingerprint field ``name``'s value (``None`` when unknown or absent)."""
        entry = self.fingerprint["fields"].get(name)
        return entry.get("value") if isinstance(entry, dict) else None

    @property
    def kept_value(self) -> float | None:
        """The kept config's measured objective, in the metric's own units: the mean over the
        repeats of the last trial marked ``kept`` (``None``: none is, or it has no value)."""
        if self.kept is None:
            return None
        kept = [trial for trial in self.trials if trial.kept]
        value = kept[-1].values.get(self.objective["metric"]) if kept else None
        return None if value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON document (a deep copy), format :data:`RECORD_FORMAT`."""
        doc: dict[str, Any] = {"format": RECORD_FORMAT}
        for name in _RUN_FIELDS:
            value = getattr(self, name)
            doc[name] = ([t.to_json() for t in value] if name == "trials"
                         else copy.deepcopy(value))
        return doc

    @classmethod
    def from_json(cls, obj: Any) -> RunRecord:
        """The record in ``obj`` (what :meth:`to_json` wrote).

        Raises:
            ValueError: A field is missing or malformed; the message starts with its path
                (``trials[3].verdict: ...``). Another document format is refused by name.
        """
        doc = copy.deepcopy(mapping(obj, "record"))
        fmt = required(doc, "format")
        if fmt != RECORD_FORMAT:
            raise ValueError(f"format: this tunegate reads {RECORD_FORMAT!r}, got {fmt!r} "
                             "(written by another tunegate version?)")
        values = {name: required(doc, name) for name in _RUN_FIELDS}
        trials = values["trials"]
        if not isinstance(trials, list):
            raise ValueError(f"trials: expected a list, {got(trials)}")
        parsed = []
        for index, trial in enumerate(trials):
            mapping(trial, f"trials[{index}]")
            try:
                parsed.append(TrialRecord.from_json(trial))
            except ValueError as exc:
                raise ValueError(f"trials[{index}].{exc}") from None
        return cls(**{**values, "trials": parsed})


_RUN_FIELDS = ("id", "kind", "recorded_at", "run_dir", "status", "fingerprint", "objective",
               "space", "baseline", "kept", "pareto", "noise", "trials", "extra")
