"""The HTML report: one self-contained page per tuning run, soak or bench result.

:func:`build_page` reads what a path holds (a tuning run directory, a soak directory or its
``soak.json``, a ``tunegate bench`` result) and returns a :class:`~tunegate.report.page.Page`;
:func:`write_report` renders it next to its source (``report.html`` in a directory, ``X.html``
beside ``X.json``) or where asked. ``tunegate compare`` builds its page from several inputs
(:mod:`tunegate.report.compare_page`).

This stage comes after every other but ``cli``: it reads their files and imports their
readers; nothing but the CLI imports it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.report.damaged import refusing_damaged
from tunegate.report.page import Page
from tunegate.report.render import write_html
from tunegate.results import check_writable

__all__ = ["build_page", "default_report_path", "source_kind", "write_report"]


def source_kind(path: Path) -> str:
    """``tune`` (a run directory), ``soak`` (a soak directory or ``soak.json``) or ``bench``
    (a bench result file); an :class:`InputFileError` for anything else."""
    if path.is_dir():
        if (path / "journal.jsonl").exists() or (path / "summary.json").exists():
            return "tune"
        if (path / "soak.json").exists():
            return "soak"
        raise InputFileError(
            f"{path}: neither a tuning run directory (no journal.jsonl or summary.json) nor a "
            "soak directory (no soak.json); give a run directory, a soak directory or a "
            "tunegate bench result file")
    if not path.exists():
        raise InputFileError(f"{path}: no such file or directory")
    if path.name == "soak.json":
        return "soak"
    return "bench"


def _bench_doc(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(f"{path}: not a readable JSON file ({exc}); give a tunegate "
                             "bench result (tunegate bench --out FILE)") from exc
    if not isinstance(doc, dict) or "tunegate_version" not in doc:
        raise InputFileError(
            f"{path}: not a tunegate bench result (no 'tunegate_version' key); for another "
            "tool's report use `tunegate validate` or `tunegate compare`")
    return doc


def build_page(path: Path) -> Page:
    """The report page for ``path`` (see the module docstring); a bench result's validation is
    recomputed by the gauge, never taken from the file."""
    kind = source_kind(path)
    with refusing_damaged(path):
        if kind == "tune":
            from tunegate.report.run_page import run_page

            return run_page(path)
        if kind == "soak":
            from tunegate.report.soak_page import soak_page

            return soak_page(path if path.is_dir() else path.parent)
        from tunegate.gauge import validate_file
        from tunegate.report.bench_page import bench_page

        checked = validate_file(path)
        doc = {**_bench_doc(path), "validation": checked.report.to_dict()}
        return bench_page(doc, source=str(path))


def default_report_path(path: Path) -> Path:
    """``report.html`` inside a directory (a soak's ``soak.json`` counts as its directory),
    else the result file with the ``.html`` suffix."""
    if path.is_dir():
        return path / "report.html"
    if path.name == "soak.json":
        return path.parent / "report.html"
    return path.with_suffix(".html")


def write_report(path: Path, out: Path | None = None) -> Path:
    """Build the page for ``path`` and write it to ``out`` (default
    :func:`default_report_path`); return where it went."""
    target = out or default_report_path(path)
    check_writable(target, label="--out" if out else "the report")  # never a device or a link
    return write_html(build_page(path), target)
