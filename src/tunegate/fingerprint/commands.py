"""Run a local tool (``nvidia-smi``, ``llama-server --version``) briefly, read a small local
file, and never raise.

Probes must not hang a benchmark or crash it: each tool runs as an argv list (no shell) with
its input closed and a deadline of a few seconds; any failure (not on ``PATH``, not
executable, a timeout, a non-zero exit) comes back as text that says what happened, for a
field's ``how``. Files are read only when they are regular files (a FIFO would block).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_TIMEOUT_S", "ToolRun", "find_tool", "read_text", "run_tool"]

DEFAULT_TIMEOUT_S = 3.0
"""Deadline of one tool run, seconds."""

_MAX_OUTPUT = 1 << 20
"""Characters of a tool's output kept (its tables are a few kilobytes)."""


@dataclass(frozen=True, slots=True)
class ToolRun:
    """What one tool run printed.

    Attributes:
        command: The command as shown in messages (``nvidia-smi --version``).
        stdout: Standard output (empty when the tool did not run).
        stderr: Standard error.
        returncode: Exit status, ``None`` when the tool did not run or timed out.
        error: Why the run failed (did not start, timed out, exited non-zero), else ``None``.
    """

    command: str
    stdout: str
    stderr: str
    returncode: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        """The tool ran and exited 0."""
        return self.error is None


def read_text(path: Path | str, limit: int = 1 << 20) -> str | None:
    """The first ``limit`` characters of a regular text file, or ``None`` when unreadable."""
    try:
        if not Path(path).is_file():
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def find_tool(name: str) -> str | None:
    """The path of executable ``name`` on ``PATH``, or ``None``."""
    return shutil.which(name)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_tool(argv: Sequence[str], *, timeout_s: float | None = None) -> ToolRun:
    """Run ``argv`` (no shell) with ``timeout_s`` (default :data:`DEFAULT_TIMEOUT_S`); never
    raises (see :class:`ToolRun`)."""
    timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    shown = " ".join([os.path.basename(argv[0]), *argv[1:]])
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)  # its own group: killed whole
    except OSError as exc:
        return ToolRun(shown, "", "", None, f"`{shown}` could not run: {exc.strerror or exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # children too: they hold its pipes
        proc.communicate()
        return ToolRun(shown, "", "", None, f"`{shown}` did not finish within {timeout_s:g} s")
    stdout, stderr = stdout[:_MAX_OUTPUT], stderr[:_MAX_OUTPUT]
    if proc.returncode != 0:
        said = _last_line(stderr) or _last_line(stdout)
        return ToolRun(shown, stdout, stderr, proc.returncode,
                       f"`{shown}` exited with status {proc.returncode}"
                       + (f": {said}" if said else ""))
    return ToolRun(shown, stdout, stderr, 0, None)
