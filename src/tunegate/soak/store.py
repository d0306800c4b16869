"""A soak's directory: ``soak.json`` rewritten after every window, one records file per window.

::

    <dir>/soak.json                      the document: plan, target, windows, change points,
                                         verdict (rewritten atomically after each window)
    <dir>/records/window-000042.jsonl.gz every request of window 42, one JSON line each

Memory stays flat however long the soak: a window's records go to their own compressed file
and are dropped; only one row of numbers per window stays in memory (1440 rows a day). Each
file is written atomically (:mod:`tunegate.files.atomic`), so a soak killed at any instant
leaves a directory ``--resume`` continues from: the windows ``soak.json`` lists are the
measured ones, and a records file of a window it does not list yet is simply rewritten.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tunegate.errors import ConfigError
from tunegate.files.atomic import atomic_write_bytes, atomic_write_json, private_directory
from tunegate.loadgen.records import RequestRecord

__all__ = ["DOCUMENT", "FORMAT", "SoakStore"]

DOCUMENT = "soak.json"
FORMAT = "tunegate-soak/1"


class SoakStore:
    """Reads and writes one soak directory (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def document_path(self) -> Path:
        return self.directory / DOCUMENT

    def refuse_existing(self) -> None:
        """Raise ConfigError when the directory already holds a soak (``--resume`` it)."""
        if self.document_path.exists():
            raise ConfigError(f"{self.document_path} already exists: continue that soak with "
                              f"--resume {self.directory}, or pick another --out directory")

    def create(self) -> None:
        """Make the directory for a new soak.

        Raises:
            ConfigError: It already holds a soak (continue it with ``--resume``), or it cannot
                be created.
        """
        self.refuse_existing()
        try:
            private_directory(self.directory / "records")
        except OSError as exc:
            raise ConfigError(f"--out {self.directory}: cannot create it ({exc.strerror}); "
                              "pick a writable directory") from None

    def load(self) -> dict[str, Any]:
        """The document of the soak to resume.

        Raises:
            ConfigError: No soak there, or the file is not a soak document.
        """
        path = self.document_path
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"--resume {self.directory}: no {DOCUMENT} there; give the "
                              "directory a soak wrote (its --out)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not readable as a soak document ({exc}); it is "
                              "written atomically, so it was changed by hand") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ConfigError(f"{path}: not a soak document (format {FORMAT!r} expected)")
        if not isinstance(document.get("windows"), list):
            raise ConfigError(f"{path}: field 'windows' must be a list")
        return document

    def write_document(self, document: dict[str, Any]) -> None:
        atomic_write_json(self.document_path, document)

    def records_path(self, index: int) -> Path:
        return self.directory / "records" / f"window-{index:06d}.jsonl.gz"

    def write_records(self, index: int, records: Iterable[RequestRecord]) -> None:
        lines = "".join(json.dumps(r.to_dict(), separators=(",", ":")) + "\n" for r in records)
        atomic_write_bytes(self.records_path(index), gzip.compress(lines.encode(), 5, mtime=0))

    def read_records(self, index: int) -> list[RequestRecord]:
        """Window ``index``'s records, as measured."""
        with gzip.open(self.records_path(index), "rt", encoding="utf-8") as handle:
            return [RequestRecord.from_dict(json.loads(line)) for line in handle if line.strip()]
