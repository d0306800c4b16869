"""The bench result file: vLLM ``bench serve`` keys plus tunegate's, and its writer.

Key names follow vLLM so existing dashboards read our files; tunegate adds ``prefill_*``,
``decode_*``, ``generation_*``, ``goodput``, ``outcomes``, ``client``, ``validation`` and
``server_metrics`` (the server's own ``/metrics`` over the run, the block of
:mod:`tunegate.loadgen.server_metrics`), whose headline figures are also summary keys
(``kv_cache_usage_peak``, ``preemptions``, ``server_queue_time_mean_ms``...; absent when the
server did not report them).
Per-request arrays (``--save-detailed``) use vLLM's names and units (seconds) and, in ``records``,
tunegate's full records (nanoseconds).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunegate import __version__
from tunegate.errors import InputFileError
from tunegate.gauge import ValidationReport
from tunegate.loadgen.client import redact_url
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import RunResult
from tunegate.metrics.definitions import NS_PER_S, itl_ns, ttfat_ns, ttft_ns

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
                "worker_errors": list(self.run.worker_errors),
            },
            "validation": self.validation.to_dict(),
        }
        if server is not None:
            doc["server_metrics"] = server
        if save_detailed:
            doc |= _detailed(self.run.records)
        safe: dict[str, Any] = _json_safe(doc)
        return safe


def _detailed(records: list[RequestRecord]) -> dict[str, Any]:
    measured = [r for r in records if not r.warmup]
    return {
        "input_lens": [r.input_tokens for r in measured],
        "output_lens": [r.output_tokens for r in measured],
        "ttfts": [(t / NS_PER_S if (t := ttft_ns(r)) is not None else None) for r in measured],
        "itls": [[gap / NS_PER_S for gap in itl_ns(r)] for r in measured],
        "generated_texts": [r.generated_text or "" for r in measured],
        "errors": [r.error or "" for r in measured],
        "records": [r.to_dict() for r in records],
    } | _detailed_reasoning(measured)


def _detailed_reasoning(measured: list[RequestRecord]) -> dict[str, Any]:
    """Per-request reasoning arrays, only when some request reasoned (seconds, like ``ttfts``)."""
    if not any(r.reasoning_streamed or r.usage_reasoning_tokens for r in measured):
        return {}
    return {
        "ttfats": [(t / NS_PER_S if (t := ttfat_ns(r)) is not None else None) for r in measured],
        "reasoning_lens": [r.reasoning_tokens for r in measured],
        "answer_lens": [r.answer_tokens for r in measured],
    }


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


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename), so an interrupted write never leaves half a file.

    Raises:
        InputFileError: The directory does not exist or is not writable.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise InputFileError(f"--out {path}: directory {directory} does not exist; create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2, allow_nan=False)
            handle.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise InputFileError(f"--out {path}: cannot write the result: {exc.strerror}") from exc


def check_writable(path: Path) -> None:
    """Fail early (before measuring) when ``path`` cannot be written.

    Raises:
        InputFileError: The directory is missing or not writable, or ``path`` is a directory.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputFileError(f"--out {path}: is a directory; give a file name")
    if not directory.is_dir():
        raise InputFileError(f"--out {path}: directory {directory} does not exist; create it first")
    if not os.access(directory, os.W_OK):
        raise InputFileError(f"--out {path}: directory {directory} is not writable")


def write_result(path: Path, document: Mapping[str, Any]) -> Path:
    """Write a measured result; if ``path`` fails now, save it beside the temp dir and say so.

    Returns:
        Where the document was written.

    Raises:
        InputFileError: Neither ``path`` nor the fallback could be written; the message says why.
    """
    try:
        write_json(path, document)
        return Path(path)
    except InputFileError as first:
        fallback = Path(tempfile.gettempdir()) / f"tunegate-result-{os.getpid()}.json"
        try:
            write_json(fallback, document)
        except InputFileError:
            raise first from None
        raise InputFileError(f"{first}; the measured result was saved to {fallback}") from None
