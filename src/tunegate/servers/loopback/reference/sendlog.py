"""When each event of each request went out: kept by a serving process, merged by the reader.

After each event's write the reference server logs its send time (``time.monotonic_ns``, the
client's clock) per ``X-Request-Id`` as ``{"arrival_ns", "sends_ns"}``, as the aiohttp loopback
server does: kept in memory for ``GET /debug/sends`` by a single process, and, with a send-log
directory, appended by each process as one JSON line per finished request to
``sends-<pid>.jsonl`` (flushed about every second and at exit), which :func:`read_send_logs`
merges. Both ends of that file format live here.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, TextIO

__all__ = ["SEND_LOG_LIMIT", "SendLog", "read_send_logs"]

SEND_LOG_LIMIT = 200_000
"""Requests kept in memory for ``/debug/sends``; the oldest go first."""


def read_send_logs(directory: Path | str) -> dict[str, dict[str, Any]]:
    """Merge every ``sends-*.jsonl`` in ``directory``: request id -> arrival and send times.

    A line still being written (no newline yet) is left out; read after the server has exited
    to have them all, since each process flushes its lines about once a second and at exit.
    """
    merged: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(directory).glob("sends-*.jsonl")):
        lines = path.read_text(encoding="utf-8").split("\n")
        for line in lines[:-1]:  # the last piece is empty or unfinished
            if line:
                entry = json.loads(line)
                merged[entry["id"]] = {"arrival_ns": entry["arrival_ns"],
                                       "sends_ns": entry["sends_ns"]}
    return merged


class SendLog:
    """Send times per request: in memory for ``/debug/sends``, and/or lines for a file."""

    def __init__(self, keep: bool, directory: Path | None) -> None:
        self.entries: OrderedDict[str, dict[str, Any]] | None = OrderedDict() if keep else None
        self._file: TextIO | None = None
        if directory is not None:
            self._file = open(directory / f"sends-{os.getpid()}.jsonl", "a",  # noqa: SIM115
                              encoding="utf-8")
        self._pending: list[str] = []

    def start(self, request_id: str, arrival_ns: int) -> list[int]:
        """Begin a request's entry; the list its send times are appended to."""
        sends: list[int] = []
        if self.entries is not None:
            self.entries[request_id] = {"arrival_ns": arrival_ns, "sends_ns": sends}
            while len(self.entries) > SEND_LOG_LIMIT:
                self.entries.popitem(last=False)
        return sends

    def finish(self, request_id: str, arrival_ns: int, sends: list[int]) -> None:
        """A request's stream ended (or its connection was lost): queue its line for the file."""
        if self._file is not None:
            self._pending.append(json.dumps(
                {"id": request_id, "arrival_ns": arrival_ns, "sends_ns": sends}))

    def flush(self) -> None:
        """Write the queued lines."""
        if self._file is not None and self._pending:
            self._file.write("\n".join(self._pending) + "\n")
            self._file.flush()
            self._pending.clear()

    def close(self) -> None:
        """Write the queued lines and close the file."""
        self.flush()
        if self._file is not None:
            self._file.close()
