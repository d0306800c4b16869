"""Scrape the server's ``/metrics`` right before, every few seconds during, and right after a run.

The scraper runs in a child process (:mod:`tunegate.loadgen.telemetry_child`), not in a thread
of the client: parsing an exposition is pure Python (a few ms for vLLM's), and a thread would
hold the client's GIL meanwhile, delaying the event loop that timestamps tokens. A separate
interpreter never does (measured: a parsing thread raised the client loop's p99 lag from 3 to
14 ms). The child is started with an argv list; its settings, the API key included, travel on
its stdin, never on its command line or in its environment, and are never written anywhere.

Protocol: the parent scrapes once itself, right before the run (one GET: milliseconds, and
nothing is being timed yet), starts the child and writes it one JSON line: the settings, that
scrape and its instant on the system-wide monotonic clock. The run starts at once, while the
child's interpreter starts (a few hundred ms, so the first scrape during the run comes after
``interval_s`` or that, whichever is later). The child scrapes every ``interval_s`` until the
parent writes ``stop``, scrapes once more ("after") and answers one JSON line, the
:mod:`~tunegate.loadgen.server_metrics` block. A failed scrape (refused, timed out, HTTP
error) is counted in the block and never fails the run; a server without a metrics endpoint
(HTTP 404 or 501 before the run) is not asked again and no child is started. If the child
cannot start or answer, the block says so and the run goes on.

Example::

    with ServerTelemetry("http://127.0.0.1:8000", api_key=None, interval_s=2.0) as telemetry:
        run = run_workload(...)
    block = telemetry.block  # {"engine": "vllm", "scrapes": 12, ..., "derived": {...}}
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from types import TracebackType
from typing import Any

from tunegate.loadgen.client import redact_url
from tunegate.loadgen.server_metrics import ScrapeRecorder
from tunegate.loadgen.telemetry_child import (
    NO_ENDPOINT,
    Fetcher,
    Scrape,
    record_scrape,
    scrape_loop,
)

__all__ = ["DEFAULT_INTERVAL_S", "ServerTelemetry"]

DEFAULT_INTERVAL_S = 2.0
_START_GRACE_S = 15.0


class ServerTelemetry:
    """Scrape a server's metrics around a run, from a child process (see the module docstring).

    Args:
        base_url: The server root (``http://host:port``).
        api_key: Bearer token, sent with every scrape; never written anywhere.
        interval_s: Seconds between scrapes during the run (``None``: before and after only).
        timeout_s: Deadline of one scrape.
        path: The metrics path.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 interval_s: float | None = DEFAULT_INTERVAL_S, timeout_s: float = 2.0,
                 path: str = "/metrics") -> None:
        url = base_url.rstrip("/") + path
        self.source = redact_url(url)
        self.settings = {"url": url, "source": self.source, "api_key": api_key,
                         "interval_s": interval_s, "timeout_s": timeout_s}
        self._fetcher = Fetcher(url, api_key, timeout_s)
        self._before: Scrape | None = None
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.block: dict[str, Any] | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def __enter__(self) -> ServerTelemetry:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def _next_line(self, timeout_s: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def _give_up(self, reason: str) -> None:
        """Stop the child; the block keeps the scrape before the run and says what failed."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout) if proc is not None else ():
            if pipe is not None:
                pipe.close()
        self._proc = None
        recorder = ScrapeRecorder(self.source, self.interval_s)
        if self._before is not None:
            record_scrape(recorder, "before", self._before, 0.0)
        recorder.fail(reason)
        self.block = recorder.block()

    def start(self) -> None:
        """Scrape once (before the run) and start the child that scrapes during and after."""
        t0 = time.monotonic()
        self._before = before = self._fetcher.get()
        settings = {**self.settings, "t0": t0, "before": list(before)}
        if before[0] in NO_ENDPOINT:  # nothing more to ask: no child needed
            done = threading.Event()
            done.set()
            self.block = scrape_loop(settings, done)
            return
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "tunegate.loadgen.telemetry_child"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True)
            assert self._proc.stdin is not None
            self._proc.stdin.write(json.dumps(settings) + "\n")
            self._proc.stdin.flush()
        except OSError as exc:
            self._give_up(f"the metrics scraper could not start: {exc}")
            return
        except BaseException:  # Ctrl-C before the run: no child left behind
            self._give_up("interrupted")
            raise
        threading.Thread(target=self._read, daemon=True).start()

    def stop(self) -> dict[str, Any]:
        """Scrape once more and return the block (also kept in :attr:`block`)."""
        proc = self._proc
        if proc is None:
            if self.block is None:
                self._give_up("the scraper was never started")
            assert self.block is not None
            return self.block
        try:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
        except OSError:
            pass
        answer = self._next_line(_START_GRACE_S + 2 * self.timeout_s)
        try:
            block = json.loads(answer) if answer else None
        except json.JSONDecodeError:
            block = None
        if not isinstance(block, dict) or "derived" not in block:
            self._give_up("the metrics scraper did not answer after the run")
            assert self.block is not None
            return self.block
        proc.wait(timeout=10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        self._proc, self.block = None, block
        return block
