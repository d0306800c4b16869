"""The metrics scraper's child process (``python -m tunegate.loadgen.telemetry_child``).

See :mod:`tunegate.loadgen.telemetry` for why it is a process and for its protocol. This module
imports only what scraping needs (not the load generator's HTTP client), so the child starts
quickly, and :class:`Fetcher` is light enough for the parent's own scrape before the run.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from tunegate.loadgen.server_metrics import Phase, ScrapeRecorder

__all__ = ["NO_ENDPOINT", "Fetcher", "Scrape", "record_scrape", "scrape_loop"]

_MAX_BODY = 32 * 1024 * 1024
NO_ENDPOINT = (404, 501)
"""Statuses meaning the server has no metrics endpoint (llama-server without ``--metrics``
answers 501): nothing more is asked."""
_NO_ENDPOINT_HINT = (": the server has no metrics endpoint (llama-server needs --metrics, "
                     "SGLang --enable-metrics)")

Scrape = tuple[int | None, str, str]
"""(HTTP status or ``None`` when there was no answer, body, error text)."""


class Fetcher:
    """``GET`` the metrics URL with an optional bearer token and a short timeout."""

    def __init__(self, url: str, api_key: str | None, timeout_s: float) -> None:
        self.url = url
        self.headers = {"Accept": "text/plain"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = timeout_s

    def get(self) -> Scrape:
        """One scrape; never raises for a network or HTTP failure."""
        request = urllib.request.Request(self.url, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read(_MAX_BODY).decode("utf-8", errors="replace")
                return int(response.status), body, ""
        except urllib.error.HTTPError as exc:
            return int(exc.code), "", f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            return None, "", f"{type(exc).__name__}: {reason}"


def record_scrape(recorder: ScrapeRecorder, phase: Phase, scrape: Scrape, t_s: float) -> bool:
    """Record one scrape (or its failure); ``True`` when the server has no metrics endpoint."""
    status, body, error = scrape
    if status == 200:
        recorder.add_text(t_s, body, phase)
        return False
    missing = phase == "before" and status in NO_ENDPOINT
    recorder.fail(f"GET {recorder.source} ({phase} the run): {error}"
                  + (_NO_ENDPOINT_HINT if missing else ""))
    return missing


def scrape_loop(settings: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
    """Record the scrape before, scrape every ``interval_s`` until ``stop``, then after.

    Args:
        settings: ``url`` (the metrics URL), ``source`` (the same without credentials),
            ``api_key``, ``interval_s`` (``None``: no scrapes during the run), ``timeout_s``,
            ``t0`` (``time.monotonic()`` of the scrape before the run: the system-wide
            monotonic clock, the same in both processes) and ``before`` (that scrape,
            ``[status, body, error]``; taken here when absent).
        stop: Set when the run has ended.

    Returns:
        The ``server_metrics`` block.
    """
    url = str(settings["url"])
    interval = float(settings["interval_s"]) if settings.get("interval_s") else None
    fetcher = Fetcher(url, settings.get("api_key"), float(settings.get("timeout_s") or 2.0))
    recorder = ScrapeRecorder(str(settings.get("source") or url), interval)
    t0 = float(settings.get("t0") or time.monotonic())
    before = settings.get("before")
    first: Scrape = ((before[0], str(before[1]), str(before[2]))
                     if isinstance(before, list) and len(before) == 3 else fetcher.get())
    missing = record_scrape(recorder, "before", first, 0.0)
    if not missing and interval:
        tick = max(1, int((time.monotonic() - t0) / interval) + 1)
        while not stop.wait(max(0.0, t0 + tick * interval - time.monotonic())):
            record_scrape(recorder, "during", fetcher.get(), time.monotonic() - t0)
            tick = int((time.monotonic() - t0) / interval) + 1  # missed ticks are skipped
    else:
        stop.wait()
    if not missing:
        t_s = time.monotonic() - t0
        record_scrape(recorder, "after", fetcher.get(), t_s)
    return recorder.block()


def _child_main() -> int:
    """Settings on stdin; ``stop`` on stdin; the block on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    line = sys.stdin.readline()
    if not line:
        return 0
    settings = json.loads(line)
    stop = threading.Event()
    result: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: result.append(scrape_loop(settings, stop)),
                              daemon=True)
    worker.start()
    if not sys.stdin.readline():  # the parent is gone: nobody to answer
        return 0
    stop.set()
    worker.join()
    print(json.dumps(result[0] if result else {"error": "the scraper stopped"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
