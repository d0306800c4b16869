"""A tuning run directory read once, for its report page: :func:`read_run` -> :class:`RunData`.

What is read: ``summary.json`` (required: the run's outcome), ``journal.jsonl`` (the config
record, every transition and every measurement, in order), ``decisions.jsonl`` (every decision,
by id) and ``attribution.json`` when the run has one (a soak's directory is read by
:mod:`tunegate.report.soak_page`). The measurement files themselves are not read: each
repeat's figures are in its journal record.

Both journals are read with :func:`tunegate.tuner.journal.audit_journal`, which collects damage
instead of raising: a report of a damaged run still shows what can be read, with each problem
listed (:attr:`RunData.problems`); ``tunegate replay`` is the tool that judges integrity. A file
that leaves nothing to report (no ``summary.json``, a summary that is not JSON, a journal of
which not one line can be read) raises :class:`~tunegate.errors.InputFileError` naming the file
and what to do.

A transition's snapshot is the whole run state, so only what the page needs is kept of it
(:class:`Transition`): the state entered, the counts, and the decision ids it refers to, which
place the decisions on the run's timeline (:mod:`tunegate.report.run_timeline`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.tuner.journal import Replay, audit_journal

__all__ = ["Measurement", "RunData", "Transition", "iter_gate_metrics", "read_run"]

SUMMARY = "summary.json"
JOURNAL = "journal.jsonl"
DECISIONS = "decisions.jsonl"
ATTRIBUTION = "attribution.json"
SOAK_DIR = "soak"


@dataclass(frozen=True)
class Measurement:
    """One benchmark repeat, as its journal record holds it.

    Attributes:
        index: Its place in the run's measurements (0 first).
        seq: The journal record's seq.
        name: ``m0003-candidate-t001``.
        role: ``preflight``, ``baseline``, ``candidate``, ``reference``, ``recheck`` or
            ``attribution``.
        trial: The trial measured (``None`` for preflight, baseline and attribution repeats).
        valid: Whether the gauge accepted the repeat (``False``: an error finding).
        values: The run's metrics for this repeat.
        errors: Codes of the error findings that invalidated it.
        findings: Every gauge finding (``code``, ``severity``, ``message``, ``remedy``...).
        cell: For an attribution repeat: its cell and round (``"baseline, round 0"``).
    """

    index: int
    seq: int
    name: str
    role: str
    trial: int | None
    valid: bool
    values: dict[str, float | None]
    errors: list[str]
    findings: list[dict[str, Any]]
    cell: str = ""


@dataclass(frozen=True)
class Transition:
    """One state change of the run.

    Attributes:
        seq: The journal record's seq.
        event: What happened (``ok``, ``need_more``, ``accept``, ``drift``...).
        source: The state left (``from``).
        state: The state entered.
        measurements: Measurements taken so far.
        trials: Proposals made so far.
        refs: Decision ids the run state refers to at this point (the kept config's, the last
            proposal's, the candidate's gate and early stop, the attribution's, the soak's, the
            warm start's).
    """

    seq: int
    event: str
    source: str
    state: str
    measurements: int
    trials: int
    refs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RunData:
    """A tuning run directory, read (see the module docstring).

    Attributes:
        run_dir: Where it was read from.
        summary: ``summary.json``.
        config: The config the run was started with (the journal's ``config`` record, secrets
            masked); empty when the journal has none.
        transitions: Every state change, in journal order.
        measurements: Every repeat, in journal order.
        decisions: Every decision's record (``id``, ``component``, ``kind``, ``inputs``,
            ``outputs``...), by id, in the order they were made.
        attribution: ``attribution.json`` (else the summary's ``attribution``), or ``None``.
        journal_records: How many journal records were read.
        problems: Damage found while reading (file and line), for the page to show.
    """

    run_dir: Path
    summary: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    attribution: dict[str, Any] | None = None
    journal_records: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def soak_dir(self) -> Path:
        return self.run_dir / SOAK_DIR

    @property
    def objective(self) -> str:
        return self.metrics[0][0] if self.metrics else ""

    @property
    def metrics(self) -> list[tuple[str, str]]:
        """``(metric, direction)`` of the objective, then each guardrail (the summary's, else
        the config's: a run interrupted early may have a summary without them)."""
        out: list[tuple[str, str]] = []
        source = self.summary if self.summary.get("objective") else self.config
        objective = source.get("objective") or {}
        if objective.get("metric"):
            out.append((str(objective["metric"]), str(objective.get("direction", "higher"))))
        for g in source.get("guardrails") or []:
            if isinstance(g, Mapping) and g.get("metric") and g["metric"] not in dict(out):
                out.append((str(g["metric"]), str(g.get("direction", "lower"))))
        return out

    def history(self) -> list[dict[str, Any]]:
        """The summary's trials (one line per finished trial), well-formed ones only."""
        return [t for t in self.summary.get("history") or [] if isinstance(t, dict)
                and isinstance(t.get("trial"), int)]

    def trial_params(self) -> dict[int, dict[str, Any]]:
        """Each trial's params (the baseline is trial 0)."""
        out: dict[int, dict[str, Any]] = {}
        for t in self.history():
            out.setdefault(int(t["trial"]), dict(t.get("params") or {}))
        baseline = self.summary.get("baseline")
        if isinstance(baseline, Mapping) and isinstance(baseline.get("params"), Mapping):
            out.setdefault(0, dict(baseline["params"]))
        return out


def _load_json(path: Path, what: str, fix: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(f"{path}: no such file; {fix}") from None
    except IsADirectoryError:
        raise InputFileError(f"{path}: is a directory, not {what}; {fix}") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputFileError(f"{path}: not {what} ({exc}); {fix}") from None


def _optional_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problems.append(f"{path}: unreadable ({exc}); its section shows the summary's copy")
        return None
    if not isinstance(doc, dict):
        problems.append(f"{path}: not a JSON object; its section shows the summary's copy")
        return None
    return doc


def _audit(path: Path, problems: list[str]) -> Replay:
    """Every readable record of a journal; damage goes to ``problems``. Raises when the file
    holds lines but not one can be read (nothing to report from)."""
    try:
        replay = audit_journal(path)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read: {exc.strerror}") from None
    problems.extend(replay.problems)
    if not replay.records and path.exists() and path.stat().st_size > 0:
        raise InputFileError(f"{path}: not one line of it can be read as a journal record; "
                             "it is damaged or not a tunegate journal (tunegate replay "
                             f"{path.parent} lists the problems)")
    return replay


def _refs(state: Mapping[str, Any]) -> frozenset[str]:
    """Decision ids a run-state snapshot refers to."""
    ids: list[Any] = [state.get("kept_decision")]
    last = state.get("last_proposal")
    if isinstance(last, list) and last:
        ids.append(last[0])
    decided = state.get("trial_decisions")
    if isinstance(decided, Mapping):
        ids += list(decided.values())
    for key in ("attribution", "soak", "warm_start"):
        block = state.get(key)
        if isinstance(block, Mapping):
            ids.append(block.get("decision"))
    return frozenset(i for i in ids if isinstance(i, str) and i)


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _transition(seq: int, data: Mapping[str, Any]) -> Transition | None:
    state = data.get("state")
    if not isinstance(state, Mapping) or not isinstance(state.get("state"), str):
        return None
    return Transition(seq, str(data.get("event", "")), str(data.get("from", "")),
                      str(state["state"]), _int(state.get("measurements")),
                      _int(state.get("trials")), _refs(state))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _measurement(seq: int, data: Mapping[str, Any]) -> Measurement | None:
    if not isinstance(data.get("index"), int) or not isinstance(data.get("values"), Mapping):
        return None
    validation = data.get("validation")
    findings = validation.get("findings") if isinstance(validation, Mapping) else None
    attribution = data.get("attribution")
    cell = ""
    if isinstance(attribution, Mapping):
        cell = f"{attribution.get('cell', '?')}, round {attribution.get('round', '?')}"
    trial = data.get("trial")
    return Measurement(
        index=int(data["index"]), seq=seq, name=str(data.get("name", f"m{data['index']:04d}")),
        role=str(data.get("role", "")), trial=trial if isinstance(trial, int) else None,
        valid=bool(data.get("valid", True)),
        values={str(k): _number(v) for k, v in data["values"].items()},
        errors=[str(e) for e in data.get("errors") or []],
        findings=[f for f in findings or [] if isinstance(f, dict)],
        cell=cell)


def _journal(path: Path, problems: list[str]
             ) -> tuple[dict[str, Any], list[Transition], list[Measurement], int]:
    replay = _audit(path, problems)
    config: dict[str, Any] = {}
    transitions: list[Transition] = []
    measurements: list[Measurement] = []
    for record in replay.records:
        if record.type == "config" and not config and isinstance(record.data, dict):
            config = record.data
        elif record.type == "transition":
            transition = _transition(record.seq, record.data)
            if transition is not None:
                transitions.append(transition)
        elif record.type == "measurement":
            measurement = _measurement(record.seq, record.data)
            if measurement is not None:
                measurements.append(measurement)
    return config, transitions, measurements, len(replay.records)


def _decisions(path: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for record in _audit(path, problems).records:  # a missing file reads as empty
        data = record.data
        if record.type != "decision":
            continue
        if not isinstance(data.get("id"), str) or not data.get("component"):
            problems.append(f"{path}: record seq {record.seq} is not a decision (no id or "
                            "component); left out")
            continue
        out[data["id"]] = data
    return out


def read_run(run_dir: Path) -> RunData:
    """Read a tuning run directory (see the module docstring).

    Raises:
        InputFileError: ``run_dir`` is not a directory; ``summary.json`` is missing, not JSON
            or not an object; ``journal.jsonl`` is missing or not one line of it is readable.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputFileError(f"{run_dir}: not a directory; pass a tuning run directory (the "
                             "--run-dir of tunegate tune)")
    fix = ("a tuning run writes it when it ends or is interrupted: pass a run directory of "
           "tunegate tune, or resume the run (tunegate tune --resume) to write it")
    summary = _load_json(run_dir / SUMMARY, "a JSON summary", fix)
    if not isinstance(summary, dict) or "status" not in summary:
        raise InputFileError(f"{run_dir / SUMMARY}: not a tuning run's summary (no status); "
                             f"{fix}")
    journal = run_dir / JOURNAL
    if not journal.exists():
        raise InputFileError(f"{journal}: no such file; every tuning run directory has one: "
                             "pass the run's directory, not a copy of its summary")
    problems: list[str] = []
    config, transitions, measurements, count = _journal(journal, problems)
    decisions = _decisions(run_dir / DECISIONS, problems)
    attribution = _optional_json(run_dir / ATTRIBUTION, problems)
    if attribution is None and isinstance(summary.get("attribution"), dict):
        attribution = summary["attribution"]
    return RunData(run_dir=run_dir, summary=summary, config=config, transitions=transitions,
                   measurements=measurements, decisions=decisions, attribution=attribution,
                   journal_records=count, problems=problems)


def iter_gate_metrics(decision: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """A gate decision's per-metric evidence (``spec``, ``effect``, ``interval``,
    ``threshold``, ``p_adjusted``, ``verdict``); nothing for any other decision."""
    inputs = decision.get("inputs")
    record = inputs.get("record") if isinstance(inputs, Mapping) else None
    metrics = record.get("metrics") if isinstance(record, Mapping) else None
    for entry in metrics or []:
        if isinstance(entry, dict):
            yield entry
