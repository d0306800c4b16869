"""A tuning run directory checked as a whole: the two chains and every file they vouch for.

What binds the directory together (see :mod:`tunegate.tuner.journal` for the chain itself):

* ``journal.jsonl`` and ``decisions.jsonl`` are chained journals, each with its head file
  (``journal.head``, ``decisions.head``);
* each ``measurements/<name>.json`` is bound by the SHA-256 its journal ``measurement`` record
  carries (``records_file``, ``records_sha256``), journalled right after the file was written;
* ``kept.json`` and ``attribution.json`` are bound by a journal ``file`` record (``{"file":
  "kept.json", "sha256"}``), journalled right after the file was written
  (:func:`write_vouched_json`); only the latest such record vouches, so an older kept config
  copied back is refused too;
* ``summary.json`` keeps a copy of both heads (``chain``, :func:`chain_heads`), so a journal
  whose end was cut off *and* whose head file was rewritten still shows.

:func:`verify_run` checks all of it without changing anything (``tunegate replay``);
:func:`vouched_kept` is what ``tunegate rollback`` (and ``restart --run-dir``) may start.

A run killed between writing a file and journalling its digest (one ``fsync`` apart) leaves a
file no record vouches for yet; ``tune --resume`` rewrites it and journals its digest. Run
directories written before chaining (no ``prev`` in the journal, no head files) are reported as
such: their decisions are still replayed, their files cannot be checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.files.atomic import atomic_write_json
from tunegate.tuner.journal import (
    GENESIS,
    Journal,
    JournalRecord,
    Replay,
    audit_journal,
    head_path,
    read_head,
)

__all__ = ["FILE_RECORD", "JOURNALS", "NO_CHAIN", "UNCHAINED", "RunCheck", "chain_heads",
           "verify_run", "vouched_kept", "write_vouched_json"]

JOURNALS = ("journal.jsonl", "decisions.jsonl")
"""The run directory's chained journals."""
FILE_RECORD = "file"
"""Journal record type binding a file by its digest: ``{"file": NAME, "sha256": HEX}``."""
KEPT = "kept.json"
NO_CHAIN = "no chain (written before tunegate chained its run directories)"
"""What an old run directory is called (``tunegate replay``, ``rollback``)."""
UNCHAINED = (f"{NO_CHAIN}: the decisions are replayed; the journal's end, the measurement "
             "files and kept.json cannot be checked")


@dataclass
class RunCheck:
    """What :func:`verify_run` found.

    Attributes:
        chained: Whether the run directory is chained (else only decisions can be replayed).
        problems: Each fault, naming the file and the line or record; empty when all agree.
        notes: What is worth saying but is no fault (an unchained directory, a torn last
            line a crash left, which ``--resume`` repairs).
        journal, decisions: The two journals as audited (every readable record).
        files: How many files were checked against their digests.
    """

    chained: bool
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    journal: Replay = field(default_factory=lambda: Replay([], None, 0))
    decisions: Replay = field(default_factory=lambda: Replay([], None, 0))
    files: int = 0


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _where(path: Path, replay: Replay, index: int) -> str:
    return f"{path}, line {replay.lines[index]} (seq {replay.records[index].seq})"


def _latest_file_record(records: list[JournalRecord], name: str) -> int | None:
    """Index of the newest ``file`` record for ``name``."""
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        if record.type == FILE_RECORD and record.data.get("file") == name:
            return index
    return None


def write_vouched_json(journal: Journal, run_dir: Path, name: str, obj: Any) -> str:
    """Write ``run_dir/name`` atomically, then journal its digest (unless the newest record for
    it already holds that digest: a handler re-run after a crash writes the same bytes).

    Returns:
        The SHA-256 of the bytes written.
    """
    written = atomic_write_json(Path(run_dir) / name, obj)
    last = _latest_file_record(journal.records, name)
    if last is None or journal.records[last].data.get("sha256") != written:
        journal.append(FILE_RECORD, {"file": name, "sha256": written})
    return written


def chain_heads(run_dir: Path) -> dict[str, Any] | None:
    """Both journals' head files, as ``summary.json`` keeps them (``None``: not chained)."""
    heads: dict[str, Any] = {}
    for name in JOURNALS:
        try:
            head = read_head(Path(run_dir) / name)
        except ValueError:
            head = None  # verify_run reports a damaged head file; the summary keeps none
        if head is not None:
            heads[name] = {"records": head.records, "head": head.head}
    return heads or None


def _check_vouched_file(run_dir: Path, name: str, replay: Replay) -> list[str]:
    """``name`` against the newest journal ``file`` record for it (``kept.json``,
    ``attribution.json``)."""
    index = _latest_file_record(replay.records, name)
    path = run_dir / name
    actual = _sha256(path)
    if index is None:
        return [] if actual is None else [
            f"{path}: no record in journal.jsonl vouches for it (it was written or copied in by "
            "something other than this run)"]
    recorded = replay.records[index].data.get("sha256")
    where = _where(run_dir / "journal.jsonl", replay, index)
    if actual is None:
        return [f"{path}: missing, but {where} vouches for it: it was deleted"]
    if actual != recorded:
        return [f"{path}: its SHA-256 {actual[:12]} is not the {str(recorded)[:12]} that {where} "
                "vouches for: it was edited or replaced"]
    return []


def _check_measurements(run_dir: Path, replay: Replay) -> tuple[list[str], int]:
    problems: list[str] = []
    checked = 0
    root = run_dir.resolve()
    for index, record in enumerate(replay.records):
        if record.type != "measurement" or "records_sha256" not in record.data:
            continue
        checked += 1
        shown = run_dir / str(record.data.get("records_file"))
        where = _where(run_dir / "journal.jsonl", replay, index)
        path = shown.resolve()
        if not path.is_relative_to(root):
            problems.append(f"{shown}: outside the run directory, named by {where}")
            continue
        actual = _sha256(path)
        if actual is None:
            problems.append(f"{shown}: missing, but {where} vouches for it: it was deleted")
        elif actual != record.data["records_sha256"]:
            problems.append(f"{shown}: its SHA-256 {actual[:12]} is not the "
                            f"{str(record.data['records_sha256'])[:12]} that {where} vouches "
                            "for: it was edited or replaced")
    return problems, checked


def _check_summary(run_dir: Path, audits: dict[str, Replay]) -> list[str]:
    """``summary.json``'s copy of the heads against the journals (a prefix: it is written at
    the end of the run, after the last record)."""
    path = run_dir / "summary.json"
    if not path.exists():
        return []
    try:
        chain = json.loads(path.read_text(encoding="utf-8")).get("chain")
    except (OSError, ValueError, AttributeError) as exc:
        return [f"{path}: unreadable ({exc})"]
    if not isinstance(chain, dict):
        return [f"{path}: holds no chain head although the run directory is chained: it was "
                "rewritten"]
    problems = []
    for name, replay in audits.items():
        entry = chain.get(name)
        if not isinstance(entry, dict):
            continue
        records, head = entry.get("records"), entry.get("head")
        if not isinstance(records, int) or records > len(replay.records):
            problems.append(f"{run_dir / name}: holds {len(replay.records)} records but {path} "
                            f"vouches for {records}: records were removed")
            continue
        expected = replay.hashes[records - 1] if records else GENESIS
        if head != expected:
            problems.append(f"{run_dir / name}: record {records} does not match the chain head "
                            f"in {path}: the file was rewritten")
    return problems


def verify_run(run_dir: Path) -> RunCheck:
    """Check a run directory's chains, head files, ``summary.json`` heads and every file the
    journal vouches for; change nothing (see the module docstring)."""
    run_dir = Path(run_dir)
    audits = {name: audit_journal(run_dir / name) for name in JOURNALS}
    journal, decisions = audits["journal.jsonl"], audits["decisions.jsonl"]
    chained = any(a.chained for a in audits.values()) or any(
        head_path(run_dir / name).exists() for name in JOURNALS)
    check = RunCheck(chained, journal=journal, decisions=decisions)
    for name, audit in audits.items():
        check.problems += audit.problems
        if audit.torn is not None and not audit.problems:
            check.notes.append(f"{name}: line {audit.torn.line} was cut short by a crash "
                               f"({audit.torn.reason}); tune --resume repairs it")
    if not chained:
        check.notes.append(UNCHAINED)
        return check
    for name, audit in audits.items():
        if audit.records and not audit.chained:
            check.problems.append(f"{run_dir / name}: unchained records in a chained run "
                                  "directory")
    if not journal.records and decisions.records:
        check.problems.append(f"{run_dir / 'journal.jsonl'}: empty, while decisions.jsonl holds "
                              f"{len(decisions.records)} records: the journal was emptied")
    measured, check.files = _check_measurements(run_dir, journal)
    check.problems += measured
    vouched = {KEPT} | {str(r.data["file"]) for r in journal.records
                        if r.type == FILE_RECORD and r.data.get("file")}  # attribution.json
    for name in sorted(vouched):
        check.problems += _check_vouched_file(run_dir, name, journal)
        check.files += (run_dir / name).exists()
    check.problems += _check_summary(run_dir, audits)
    return check


def vouched_kept(run_dir: Path) -> tuple[dict[str, Any], bool]:
    """The run's ``kept.json``, if the journal's chain vouches for it.

    Returns:
        The kept config document, and whether the chain vouched for it (``False``: a run
        directory written before chaining, which cannot be checked).

    Raises:
        InputFileError: No ``kept.json``; or the journal is damaged, or does not vouch for
            this ``kept.json`` (edited, replaced, or older than the newest kept config).
    """
    run_dir = Path(run_dir)
    path = run_dir / KEPT
    journal = audit_journal(run_dir / "journal.jsonl")
    chained = journal.chained or head_path(run_dir / "journal.jsonl").exists()
    problems = list(journal.problems)
    if chained:
        problems += _check_vouched_file(run_dir, KEPT, journal)
    if not problems and not path.is_file():
        raise InputFileError(f"{run_dir}: no kept.json (no config was ever kept in this run); "
                             "nothing to roll back to")
    if problems:
        raise InputFileError(f"refusing a kept config the run's chain does not vouch for: "
                             f"{problems[0]} (tunegate replay {run_dir} says more)")
    try:
        kept: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFileError(f"{path}: unreadable ({exc})") from None
    if not isinstance(kept, dict) or not isinstance(kept.get("params"), dict):
        raise InputFileError(f"{path}: not a kept config (no params)")
    return kept, chained
