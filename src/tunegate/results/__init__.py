"""The bench result file: vLLM ``bench serve`` keys plus tunegate's, and its writer.

Key names follow vLLM so existing dashboards read our files; tunegate adds ``prefill_*``,
``decode_*``, ``generation_*``, ``goodput``, ``outcomes``, ``client``, ``validation`` and
``server_metrics`` (the server's own ``/metrics`` over the run, the block of
:mod:`tunegate.loadgen.server_metrics`), whose headline figures are also summary keys
(``kv_cache_usage_peak``, ``preemptions``, ``server_queue_time_mean_ms``...; absent when the
server did not report them).
Per-request arrays (``--save-detailed``) use vLLM's names and units (seconds) and, in ``records``,
tunegate's full records (nanoseconds); a long run writes them as its requests end
(:mod:`.detailed`), so they never all sit in memory.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunegate import __version__
from tunegate.errors import InputFileError
from tunegate.files.atomic import atomic_write_chunks
from tunegate.gauge import ValidationReport
from tunegate.loadgen.client import redact_url
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import RunResult
from tunegate.results.detailed import ARRAYS, REASONING_ARRAYS, DetailedParts, measured_elements

__all__ = ["BenchResult", "check_writable", "redact_url", "write_json", "write_result"]


@dataclass(slots=True)
class BenchResult:
    """Everything one ``bench`` produced.

    Attributes:
        run: The records and the client's health.
        summary: :func:`tunegate.metrics.summarize` output.
        validation: The gauge's verdict on the records.
        metadata: Run parameters (target, workload description, options) for the file.
    """

    run: RunResult
    summary: dict[str, Any]
    validation: ValidationReport
    metadata: dict[str, Any]

    @property
    def records(self) -> list[RequestRecord]:
        return self.run.records

    def to_json(self, *, save_detailed: bool = False) -> dict[str, Any]:
        """The result document (JSON-ready: no NaN or infinity, ``"inf"`` as vLLM writes it)."""
        lag = self.run.lag
        metadata = dict(self.metadata)
        server = metadata.pop("server_metrics", None)
        doc: dict[str, Any] = {
            "tunegate_version": __version__,
            "date": dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S"),
            **metadata,
            **self.summary,
            "interrupted": self.run.interrupted,
            "not_sent": self.run.not_sent,
            "client": {
                "workers": self.run.workers,
                "event_loop_lag_p50_ms": lag.p50_ms,
                "event_loop_lag_p99_ms": lag.p99_ms,
                "event_loop_lag_max_ms": lag.max_ms,
                "cpu_busy_fraction": lag.cpu_busy_fraction,
                "peak_rss_mib": lag.peak_rss_mib,
                "kernel_receipts": lag.kernel_receipts,
                "worker_errors": list(self.run.worker_errors),
                "scaling": list(self.run.scaling),
            },
            "validation": self.validation.to_dict(),
        }
        if server is not None:
            doc["server_metrics"] = server
        if save_detailed:
            if len(self.run.records) < self.run.ended:
                raise ValueError("the run's records were not kept (keep_records=False): write "
                                 "its detailed arrays as they end (results.detailed)")
            doc |= _detailed(self.run.records)
        safe: dict[str, Any] = _json_safe(doc)
        return safe


def _detailed(records: list[RequestRecord]) -> dict[str, Any]:
    """The detailed arrays of records held in memory (see :mod:`.detailed` for the streamed
    form): per measured request, in index order; the reasoning arrays only when some measured
    request reasoned."""
    measured = [r for r in records if not r.warmup]
    elements = [measured_elements(r) for r in measured]
    reasoned = any(r.reasoning_streamed or r.usage_reasoning_tokens for r in measured)
    names = [*ARRAYS, *(REASONING_ARRAYS if reasoned else ())]
    return {name: ([r.to_dict() for r in records] if name == "records"
                   else [element[name] for element in elements]) for name in names}


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _target(path: Path, label: str) -> Path:
    """The file the bytes for ``path`` go to, by the rule the README's bench section states.

    * absent: ``path``, created;
    * a regular file: ``path``, replaced atomically;
    * a symlink to a regular file: that file, replaced atomically in *its* directory (the link
      stays a link: writing through it is what a user who points a link at a file asks for);
    * anything else (directory, device such as ``/dev/full``, FIFO, socket, a dangling or
      looping symlink, a symlink to any of those): refused. A rename over them would silently
      replace a device or a pipe with a regular file and report success.

    Raises:
        InputFileError: ``path`` is not something a result may be written to; one line naming
            it and what it is.
    """
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path  # new; a missing directory is named by the caller
    except OSError as exc:
        raise InputFileError(f"{label} {path}: cannot inspect it: {exc.strerror}") from None
    if stat.S_ISREG(mode):
        return path
    if not stat.S_ISLNK(mode):
        raise InputFileError(f"{label} {path}: is {_kind(mode)}, not a regular file; "
                             "give the name of a file to write")
    real = Path(os.path.realpath(path))
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputFileError(f"{label} {path}: is a symlink to {real}, which does not exist; "
                             "give the file itself, or create the file the link points to"
                             ) from None
    except OSError as exc:
        raise InputFileError(f"{label} {path}: is a symlink that cannot be followed "
                             f"({exc.strerror}); give a file name") from None
    if not stat.S_ISREG(mode):
        raise InputFileError(f"{label} {path}: is a symlink to {real}, which is {_kind(mode)}, "
                             "not a regular file; give the name of a file to write")
    return real


def _check_target(path: Path, label: str) -> Path:
    """:func:`_target`, plus a directory that exists and can be written and a file that is
    not read-only (a rename would replace a read-only file silently; ``>`` would refuse)."""
    target = _target(path, label)
    directory = target.parent if str(target.parent) else Path(".")
    shown = f"{label} {path}: " + ("" if target == path else f"(the link's target {target}) ")
    if not directory.is_dir():
        missing = "is not a directory" if directory.exists() else "does not exist"
        raise InputFileError(f"{shown}directory {directory} {missing}; create it first")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise InputFileError(f"{shown}directory {directory} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputFileError(f"{shown}the file is read-only; make it writable or give "
                             "another name")
    return target


def write_json(path: Path, document: Mapping[str, Any], *, label: str = "--out",
               detailed: DetailedParts | None = None) -> None:
    """Write atomically and durably (temp file in the target's directory, fsync, rename), so an
    interrupted write never leaves half a file; the file is private (``0600``).

    Only a regular file (new or existing) or a symlink to one is written; see :func:`_target`.

    Args:
        path: The file the user named.
        document: JSON-ready (no NaN or infinity).
        label: How messages name the path (the flag it came from).
        detailed: Per-request arrays written during the run, appended to ``document``.

    Raises:
        InputFileError: ``path`` is not a regular file or a symlink to one, or its directory
            is missing or not writable, or the write failed (disk full...).
    """
    path = Path(path)
    target = _check_target(path, label)
    try:
        atomic_write_chunks(target, _encoded(document, detailed), mode=0o600)
    except OSError as exc:
        raise InputFileError(f"{label} {path}: cannot write the result: "
                             f"{exc.strerror or exc}") from None


def check_writable(path: Path, *, label: str = "--out") -> None:
    """Fail early (before measuring) when ``path`` cannot be written by :func:`write_json`.

    Raises:
        InputFileError: ``path`` is a directory, a device, a FIFO, a socket or a symlink to
            anything but a regular file, or its directory is missing or not writable, or the
            file is read-only.
    """
    _check_target(Path(path), label)


def _encoded(document: Mapping[str, Any], detailed: DetailedParts | None) -> Iterator[bytes]:
    """The file's bytes: the document, then the detailed parts when there are some."""
    if detailed is not None:
        yield from detailed.chunks(document)
    else:
        yield (json.dumps(document, indent=2, allow_nan=False) + "\n").encode("utf-8")


def _save_fallback(document: Mapping[str, Any], detailed: DetailedParts | None) -> Path:
    """A fresh file of its own in the temp directory (created exclusively: a link someone
    planted there under a guessable name is never followed)."""
    fd, name = tempfile.mkstemp(prefix="tunegate-result-", suffix=".json")
    with os.fdopen(fd, "wb") as handle:
        for chunk in _encoded(document, detailed):
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(name)


def write_result(path: Path, document: Mapping[str, Any],
                 detailed: DetailedParts | None = None) -> Path:
    """Write a measured result; if ``path`` fails now, save it to a new file in the temp
    directory and say where: what was measured is never lost.

    Returns:
        Where the document was written.

    Raises:
        InputFileError: ``path`` could not be written; the message says why and where the
            result was saved instead (or why that failed too).
    """
    try:
        write_json(path, document, detailed=detailed)
        return Path(path)
    except InputFileError as first:
        try:
            fallback = _save_fallback(document, detailed)
        except OSError as exc:
            raise InputFileError(f"{first}; saving it to {tempfile.gettempdir()} failed too "
                                 f"({exc.strerror or exc}): the result is lost") from None
        raise InputFileError(f"{first}; the measured result was saved to {fallback}") from None
