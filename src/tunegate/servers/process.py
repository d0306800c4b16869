"""Run a server command as a child process and wait until it says it is listening.

Used for servers tunegate ships (loopback, simulator) when the caller needs them in their own
process, so the server's work never delays the client's event loop. Launches use argv lists.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Sequence

from tunegate.errors import ServerError

__all__ = ["serve_subprocess"]


@contextlib.contextmanager
def serve_subprocess(
    argv: Sequence[str], ready: re.Pattern[str], start_timeout_s: float = 30.0
) -> Iterator[str]:
    """Start ``argv``; yield group 1 of the first output line matching ``ready`` (its URL).

    The process is terminated (then killed) on exit. Its output after the ready line is drained
    so a chatty server never blocks on a full pipe.

    Raises:
        ServerError: The process exited or stayed silent past ``start_timeout_s``; the message
            carries the last lines it printed.
    """
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    found: list[str] = []
    seen: list[str] = []
    got_ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not got_ready.is_set():
                seen.append(line.rstrip())
                match = ready.search(line)
                if match:
                    found.append(match.group(1))
                    got_ready.set()
        got_ready.set()

    threading.Thread(target=read, daemon=True).start()
    got_ready.wait(start_timeout_s)
    try:
        if not found:
            tail = " | ".join(seen[-5:]) or "no output"
            raise ServerError(f"{argv[0]} {' '.join(argv[1:4])} ... did not become ready in "
                              f"{start_timeout_s:g} s: {tail}")
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
