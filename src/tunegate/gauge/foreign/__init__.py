"""Read benchmark reports, whatever wrote them, and validate them: format found by content.

Formats (detected from each document's keys, never from the file name):

* ``tunegate``: tunegate's result (``tunegate_version``; vLLM keys plus ``records``, context);
* ``sglang``: SGLang ``bench_serving`` results (``*_e2e_latency_ms``), one per line;
* ``vllm``: vLLM ``bench serve`` results (``completed`` and ``mean_*_ms``/``ttfts``), one per
  file, or one per line with ``--append-result``;
* ``aiperf``: AIPerf ``profile_export_aiperf.json`` (``aiperf_version`` or metric blocks with a
  ``unit``), plus ``profile_export.jsonl`` from the same folder when it is there; the JSONL on
  its own is read too;
* ``guidellm``: GuideLLM's report (``benchmarks`` with ``metrics``), JSON or YAML.

A file may hold several results (JSONL, concatenated JSON objects, a GuideLLM report with a
sweep): each is judged on its own, its findings labelled, and the file is invalid when any of
them is (:mod:`~tunegate.gauge.foreign.documents` reads the syntaxes).

Unreadable, malformed or unknown files raise :class:`~tunegate.errors.InputFileError` (a usage
error, exit code 2) naming the file, the record when there are several, and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.gauge.checks import run_checks
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, ValidationReport
from tunegate.gauge.foreign.aiperf import is_aiperf_line, is_aiperf_summary, read_aiperf
from tunegate.gauge.foreign.documents import DocumentsError, read_documents
from tunegate.gauge.foreign.guidellm import is_guidellm, read_guidellm
from tunegate.gauge.foreign.sglang import is_sglang, read_sglang
from tunegate.gauge.foreign.tunegate import read_tunegate
from tunegate.gauge.foreign.vllm import read_vllm

__all__ = ["EXPECTED", "FORMAT_NAMES", "LoadedReport", "ValidatedFile", "detect_format",
           "load_report", "validate_file"]

EXPECTED = ("a benchmark result: vLLM `bench serve` JSON (or --append-result JSONL), SGLang "
            "bench_serving JSONL, AIPerf profile_export_aiperf.json (or profile_export.jsonl), "
            "GuideLLM benchmarks.json/.yaml, or a tunegate result")
AIPERF_JSONL = "profile_export.jsonl"
MAX_REPORT_BYTES = 512 * 2**20
"""Largest report read. Parsing holds about 15 bytes of Python objects per byte of JSON
arrays, so 512 MiB of report needs several GB of memory; larger files are refused up front
with a message rather than exhausting the machine."""
BROKEN_STRUCTURE = (KeyError, TypeError, ValueError, AttributeError, IndexError,
                    ArithmeticError, RecursionError)
"""What a reader or a check raises on a value of the wrong type or size in a hostile file."""
FORMAT_NAMES = {"tunegate": "tunegate result", "vllm": "vLLM bench serve result",
                "sglang": "SGLang bench_serving result", "aiperf": "AIPerf export",
                "guidellm": "GuideLLM report"}
"""A person's name for each format."""


@dataclass(frozen=True, slots=True)
class LoadedReport:
    """A report read into datasets, one per result it holds, each with its label.

    ``format`` is the format of every result, or ``"mixed"`` when a file mixes tools.
    """

    path: Path
    format: str
    datasets: tuple[tuple[str, Dataset], ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ValidatedFile:
    """A report and its validation (findings of several results merged, labelled)."""

    loaded: LoadedReport
    report: ValidationReport
    per_result: tuple[tuple[str, ValidationReport], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """``ValidationReport.to_dict()`` plus ``source_file``, ``format``, ``notes`` and, for a
        file of several results, ``results``: each one's label and verdict."""
        out: dict[str, Any] = {"source_file": str(self.loaded.path),
                               "format": self.loaded.format, **self.report.to_dict(),
                               "notes": list(self.loaded.notes)}
        if len(self.per_result) > 1:
            out["results"] = [{"label": label, "valid": r.valid, "codes": r.codes()}
                              for label, r in self.per_result]
        return out


def detect_format(doc: Any) -> str | None:
    """The format of one parsed document, or ``None`` when it is none tunegate reads."""
    if not isinstance(doc, Mapping):
        return None
    if "tunegate_version" in doc:
        return "tunegate"
    if is_aiperf_summary(doc):
        return "aiperf"
    if is_guidellm(doc):
        return "guidellm"
    if is_sglang(doc):
        return "sglang"
    if "completed" in doc and any(k in doc for k in ("mean_ttft_ms", "mean_e2el_ms", "ttfts")):
        return "vllm"
    return None


def _read_text(path: Path) -> str:
    if not path.exists():
        raise InputFileError(f"{path}: no such file; expected {EXPECTED}")
    if path.is_dir():
        raise InputFileError(f"{path}: is a directory; give the result file itself ({EXPECTED})")
    try:
        size = path.stat().st_size
        if size > MAX_REPORT_BYTES:
            raise InputFileError(
                f"{path}: {size / 2**20:.0f} MiB is more than the {MAX_REPORT_BYTES // 2**20} MiB "
                "tunegate reads (a report that size holds per-request arrays of hundreds of "
                "thousands of requests): split it, or validate the summary without them")
        return path.read_text(encoding="utf-8-sig")  # a leading BOM (Windows editors) is dropped
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from None


def _describe(doc: Mapping[str, Any]) -> str:
    """A short label for one result of a sweep: its configured load."""
    parts = []
    for key in ("request_rate", "max_concurrency"):
        value = doc.get(key)
        if value is not None:
            parts.append(f"{key}={value}")
    return f" ({', '.join(parts)})" if parts else ""


def _read_one(path: Path, fmt: str, doc: Mapping[str, Any],
              notes: list[str]) -> list[tuple[str, Dataset]]:
    if fmt == "tunegate":
        return [("", read_tunegate(doc))]
    if fmt == "vllm":
        return [("", read_vllm(doc))]
    if fmt == "sglang":
        return [("", read_sglang(doc))]
    if fmt == "guidellm":
        return read_guidellm(doc)
    return [("", read_aiperf(doc, _aiperf_lines_beside(path, notes)))]


def _aiperf_lines_beside(path: Path, notes: list[str]) -> list[Mapping[str, Any]] | None:
    """AIPerf's per-request JSONL from the summary's folder; a broken one is named, not used."""
    beside = path.parent / AIPERF_JSONL
    if not beside.is_file() or beside == path:
        return None
    try:
        documents = read_documents(_read_text(beside))
    except (InputFileError, DocumentsError) as exc:
        notes.append(f"{beside} could not be read ({exc}); judged on the summary alone")
        return None
    lines = [d for d in documents.values if is_aiperf_line(d)]
    if len(lines) < len(documents.values):
        notes.append(f"{beside}: {len(documents.values) - len(lines)} lines are not AIPerf "
                     "records and were left out")
    if documents.cut:
        notes.append(f"{beside}: {documents.cut}; not judged")
    return lines or None


def _structure_error(path: Path, fmt: str, exc: BaseException, record: str) -> InputFileError:
    why = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    return InputFileError(
        f"{path}: {record}looks like {FORMAT_NAMES[fmt]} but its structure is broken "
        f"({why}); expected {EXPECTED}")


def _load_documents(path: Path, docs: Sequence[Any], where: Sequence[str], notes: list[str]
                    ) -> tuple[str, list[tuple[str, Dataset]]]:
    if docs and is_aiperf_line(docs[0]) and not detect_format(docs[0]):
        foreign = next((i for i, d in enumerate(docs) if not is_aiperf_line(d)), None)
        if foreign is not None:
            raise InputFileError(f"{path}: record {foreign + 1} ({where[foreign]}) is not an "
                                 "AIPerf per-request record like the lines before it; expected "
                                 f"{EXPECTED}")
        try:
            return "aiperf", [("", read_aiperf(None, list(docs)))]
        except BROKEN_STRUCTURE as exc:
            raise _structure_error(path, "aiperf", exc, "") from None
    formats: set[str] = set()
    datasets: list[tuple[str, Dataset]] = []
    several = len(docs) > 1
    for i, (doc, place) in enumerate(zip(docs, where, strict=True), start=1):
        record = f"record {i} ({place}): " if several else ""
        fmt = detect_format(doc)
        if fmt is None:
            keys = (", ".join(sorted(map(str, doc))[:8]) if isinstance(doc, Mapping)
                    else type(doc).__name__)
            raise InputFileError(f"{path}: {record}unknown format (top level: {keys}); "
                                 f"expected {EXPECTED}")
        formats.add(fmt)
        try:
            found = _read_one(path, fmt, doc, notes)
        except BROKEN_STRUCTURE as exc:
            raise _structure_error(path, fmt, exc, record) from None
        prefix = f"record {i}{_describe(doc)}" if several else ""
        datasets += [(" ".join(p for p in (prefix, label) if p), data) for label, data in found]
    return (formats.pop() if len(formats) == 1 else "mixed"), datasets


def _reasoning_note(label: str, data: Dataset) -> str | None:
    """Both first-token times and the reasoning length, when the report tells them apart."""
    s = data.summary
    ttft = s.ttft_ms.mean if s.ttft_ms else None
    ttfat = s.ttfat_ms.mean if s.ttfat_ms else None
    later = ttft is not None and ttfat is not None and ttfat > ttft * 1.001
    if not (s.mean_reasoning_tokens or later):
        return None
    parts = []
    if ttft is not None:
        parts.append(f"first token of any kind after {ttft:.1f} ms on average (TTFT)")
    parts.append(f"first answer token after {ttfat:.1f} ms (TTFAT)" if ttfat is not None
                 else "the report gives no time to the first answer token")
    if s.mean_reasoning_tokens:
        parts.append(f"{s.mean_reasoning_tokens:.1f} reasoning tokens per request")
    return f"{label + ': ' if label else ''}reasoning model: {', '.join(parts)}"


def load_report(path: Path | str) -> LoadedReport:
    """Read ``path`` and normalise every result it holds.

    Raises:
        InputFileError: Missing, unreadable, malformed JSON/YAML, unknown format, or a known
            format with a broken structure; the message names the file (and the record) and
            what was expected.
    """
    path = Path(path)
    text = _read_text(path)
    try:
        documents = read_documents(text)
    except DocumentsError as exc:
        raise InputFileError(f"{path}: {exc}; expected {EXPECTED}") from None
    notes: list[str] = []
    fmt, datasets = _load_documents(path, documents.values, documents.where, notes)
    lines_only = all(is_aiperf_line(d) for d in documents.values)
    if len(documents.values) > 1 and not lines_only:
        notes.append(f"{len(documents.values)} results in one file ({documents.syntax}); "
                     "each judged on its own")
    if documents.cut:
        notes.append(f"{documents.cut}: not judged (an interrupted append?)")
    if lines_only:
        notes.append("per-request AIPerf JSONL only; no summary file")
    elif fmt == "aiperf" and datasets[0][1].requests is not None:
        notes.append(f"per-request data read from {path.parent / AIPERF_JSONL}")
    notes += [note for label, data in datasets if (note := _reasoning_note(label, data))]
    return LoadedReport(path, fmt, tuple(datasets), tuple(notes))


def _merge(reports: Sequence[tuple[str, ValidationReport]]) -> ValidationReport:
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
    """Load ``path`` (any supported format) and run every check on each result in it."""
    loaded = load_report(path)
    per_result = []
    for label, data in loaded.datasets:
        try:
            per_result.append((label, run_checks(data)))
        except BROKEN_STRUCTURE as exc:  # a value no reader caught, met in arithmetic
            raise _structure_error(loaded.path, data.source, exc,
                                   f"{label}: " if label else "") from None
    return ValidatedFile(loaded, _merge(per_result), tuple(per_result))
