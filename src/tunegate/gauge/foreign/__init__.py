"""Read benchmark reports, whatever wrote them, and validate them: format found by content.

Formats (detected from the JSON's keys, never from the file name):

* ``tunegate``: tunegate's result (``tunegate_version``; vLLM keys plus ``records``, context);
* ``vllm``: vLLM ``bench serve`` result JSON (``completed`` and ``mean_*_ms``/``ttfts``);
* ``aiperf``: AIPerf ``profile_export_aiperf.json`` (``aiperf_version`` or metric blocks with a
  ``unit``), plus ``profile_export.jsonl`` from the same folder when it is there; the JSONL on
  its own is read too;
* ``guidellm``: GuideLLM ``benchmarks.json`` (``benchmarks`` with ``metrics``).

Unreadable, malformed or unknown files raise :class:`~tunegate.errors.InputFileError` (a usage
error, exit code 2) naming the file and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.gauge.checks import run_checks
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, ValidationReport
from tunegate.gauge.foreign.aiperf import is_aiperf_line, read_aiperf
from tunegate.gauge.foreign.guidellm import read_guidellm
from tunegate.gauge.foreign.tunegate import read_tunegate
from tunegate.gauge.foreign.vllm import read_vllm

__all__ = ["EXPECTED", "LoadedReport", "ValidatedFile", "detect_format", "load_report",
           "validate_file"]

EXPECTED = ("a benchmark result: vLLM `bench serve` JSON, AIPerf profile_export_aiperf.json "
            "(or profile_export.jsonl), GuideLLM benchmarks.json, or a tunegate result")
AIPERF_JSONL = "profile_export.jsonl"


@dataclass(frozen=True, slots=True)
class LoadedReport:
    """A report read into datasets (GuideLLM files may hold several benchmarks)."""

    path: Path
    format: str
    datasets: tuple[tuple[str, Dataset], ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ValidatedFile:
    """A report and its validation (findings of several benchmarks merged, labelled)."""

    loaded: LoadedReport
    report: ValidationReport

    def to_dict(self) -> dict[str, Any]:
        """``ValidationReport.to_dict()`` plus ``source_file``, ``format`` and ``notes``."""
        return {"source_file": str(self.loaded.path), "format": self.loaded.format,
                **self.report.to_dict(), "notes": list(self.loaded.notes)}


def detect_format(doc: Any) -> str | None:
    """The format of a parsed JSON document, or ``None`` when it is none tunegate reads."""
    if not isinstance(doc, Mapping):
        return None
    if "tunegate_version" in doc:
        return "tunegate"
    if "aiperf_version" in doc or any(
            isinstance(doc.get(k), Mapping) and "unit" in doc[k]
            for k in ("request_latency", "time_to_first_token")):
        return "aiperf"
    benchmarks = doc.get("benchmarks")
    if isinstance(benchmarks, list) and benchmarks and all(
            isinstance(b, Mapping) and isinstance(b.get("metrics"), Mapping) for b in benchmarks):
        return "guidellm"
    if "completed" in doc and any(k in doc for k in ("mean_ttft_ms", "mean_e2el_ms", "ttfts")):
        return "vllm"
    return None


def _jsonl(path: Path, text: str) -> list[dict[str, Any]] | None:
    try:
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None
    return lines if lines and all(is_aiperf_line(x) for x in lines) else None


def _read_text(path: Path) -> str:
    if not path.exists():
        raise InputFileError(f"{path}: no such file; expected {EXPECTED}")
    if path.is_dir():
        raise InputFileError(f"{path}: is a directory; give the result file itself ({EXPECTED})")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from None


def load_report(path: Path | str) -> LoadedReport:
    """Read ``path`` and normalise it.

    Raises:
        InputFileError: Missing, unreadable, malformed JSON, unknown format, or a known format
            with a broken structure; the message names the file and what was expected.
    """
    path = Path(path)
    text = _read_text(path)
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = _jsonl(path, text)
        if lines is None:
            raise InputFileError(
                f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                f"expected {EXPECTED}") from None
        return LoadedReport(path, "aiperf", (("", read_aiperf(None, lines)),),
                            ("per-request AIPerf JSONL only; no summary file",))
    fmt = detect_format(doc)
    if fmt is None:
        keys = ", ".join(sorted(doc)[:8]) if isinstance(doc, Mapping) else type(doc).__name__
        raise InputFileError(f"{path}: unknown format (top level: {keys}); expected {EXPECTED}")
    try:
        return _read(path, fmt, doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise InputFileError(
            f"{path}: looks like {fmt} output but its structure is broken "
            f"({type(exc).__name__}: {exc}); expected {EXPECTED}") from None


def _read(path: Path, fmt: str, doc: Mapping[str, Any]) -> LoadedReport:
    if fmt == "tunegate":
        return LoadedReport(path, fmt, (("", read_tunegate(doc)),))
    if fmt == "vllm":
        return LoadedReport(path, fmt, (("", read_vllm(doc)),))
    if fmt == "guidellm":
        return LoadedReport(path, fmt, tuple(read_guidellm(doc)))
    beside = path.parent / AIPERF_JSONL
    lines = _jsonl(beside, beside.read_text(encoding="utf-8")) if beside.is_file() else None
    note = (f"per-request data read from {beside}",) if lines else ()
    return LoadedReport(path, fmt, (("", read_aiperf(doc, lines)),), note)


def _merge(reports: list[tuple[str, ValidationReport]]) -> ValidationReport:
    if len(reports) == 1 and not reports[0][0]:
        return reports[0][1]  # unlabelled: one dataset, nothing to tell apart
    findings: list[Finding] = []
    not_checked: dict[str, str] = {}
    for label, report in reports:
        for f in report.findings:
            findings.append(replace(f, message=f"[{label}] {f.message}",
                                    evidence={"benchmark": label, **f.evidence}))
        for code, reason in report.not_checked:
            not_checked[code] = f"{not_checked[code]}; " if code in not_checked else ""
            not_checked[code] += f"{label}: {reason}"
    return ValidationReport(tuple(findings), tuple(not_checked.items()))


def validate_file(path: Path | str) -> ValidatedFile:
    """Load ``path`` (any supported format) and run every check on it."""
    loaded = load_report(path)
    return ValidatedFile(loaded, _merge([(label, run_checks(d)) for label, d in loaded.datasets]))
