"""The metrics scraper's child process (``python -m tunegate.loadgen.telemetry_child``).

See :mod:`tunegate.loadgen.telemetry` for why it is a process and for its protocol. This module
imports only what scraping needs (not the load generator's HTTP client), so the child starts
quickly, and :class:`Fetcher` is light enough for the parent's own scrape before the run.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import socket
import sys
import threading
import time
import urllib.parse
from typing import Any

from tunegate.loadgen.server_metrics import Phase, ScrapeRecorder

__all__ = ["NO_ENDPOINT", "Fetcher", "Scrape", "record_scrape", "scrape_loop"]

_MAX_BODY = 16 * 2**20
"""A larger /metrics body is a failed scrape (vLLM's is ~100 kB; 16 MiB is a broken server)."""
_CHUNK = 64 * 1024
_MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)
NO_ENDPOINT = (404, 501)
"""Statuses meaning the server has no metrics endpoint (llama-server without ``--metrics``
answers 501): nothing more is asked."""
_NO_ENDPOINT_HINT = (": the server has no metrics endpoint (llama-server needs --metrics, "
                     "SGLang --enable-metrics)")

Scrape = tuple[int | None, str, str]
"""(HTTP status or ``None`` when there was no answer, body, error text)."""


class Fetcher:
    """``GET`` the metrics URL with an optional bearer token, within one deadline.

    ``timeout_s`` bounds the whole scrape, connection to last byte (a timeout per socket read,
    as urllib has, never fires on a server that trickles a byte at a time, and the scrape
    before the run would then hold the run up forever): a watchdog shuts the socket down when
    the deadline passes, which ends whatever read is waiting. A body over ``_MAX_BODY`` is a
    failed scrape, never a truncated one. Redirects are followed within the same deadline; the
    bearer token only to the same scheme, host and port. No proxy from the environment is
    used, as the load generator's client uses none.
    """

    def __init__(self, url: str, api_key: str | None, timeout_s: float) -> None:
        self.url = url
        self.headers = {"Accept": "text/plain"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = timeout_s

    def get(self) -> Scrape:
        """One scrape; never raises for a network or HTTP failure."""
        deadline = time.monotonic() + self.timeout_s
        url, headers = self.url, dict(self.headers)
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                status, body, location = self._get_once(url, headers, deadline)
                if status not in _REDIRECTS or not location:
                    break
                target = urllib.parse.urljoin(url, location)
                if _origin(target) != _origin(url):
                    headers.pop("Authorization", None)
                url = target
        except TimeoutError:
            return None, "", f"timed out after {self.timeout_s:g} s"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            return None, "", f"{type(exc).__name__}: {exc}"
        if status == 200:
            return status, body, ""
        return status, "", f"HTTP {status}"

    def _get_once(self, url: str, headers: dict[str, str],
                  deadline: float) -> tuple[int, str, str | None]:
        """(status, body when 200, ``Location``), or raise; bounded by ``deadline``."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL (scheme {parts.scheme!r})")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no time left")
        kind = http.client.HTTPSConnection if parts.scheme == "https" \
            else http.client.HTTPConnection
        conn = kind(parts.hostname, parts.port, timeout=left)
        fired = threading.Event()
        watchdog = threading.Timer(left, _hang_up, (conn, fired))
        watchdog.daemon = True
        watchdog.start()
        try:
            answer = self._exchange(conn, parts, headers)
            if fired.is_set():  # a body read until the connection closed: cut, not complete
                raise TimeoutError("the deadline passed")
            return answer
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if fired.is_set():
                raise TimeoutError("the deadline passed") from exc
            raise
        finally:
            watchdog.cancel()
            watchdog.join()  # never shut down a socket after close() freed its descriptor
            conn.close()

    @staticmethod
    def _exchange(conn: http.client.HTTPConnection, parts: urllib.parse.SplitResult,
                  headers: dict[str, str]) -> tuple[int, str, str | None]:
        """Send the request and read the answer in chunks, the body bounded in size."""
        path = parts.path or "/"
        conn.request("GET", f"{path}?{parts.query}" if parts.query else path, headers=headers)
        response = conn.getresponse()
        if response.status != 200:
            return response.status, "", response.getheader("Location")
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read1(_CHUNK):
            size += len(chunk)
            if size > _MAX_BODY:
                raise ValueError(f"the body is larger than {_MAX_BODY // 2**20} MiB")
            chunks.append(chunk)
        if (response.length or 0) > 0:  # the connection ended before Content-Length
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        return 200, b"".join(chunks).decode("utf-8", errors="replace"), None


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _hang_up(conn: http.client.HTTPConnection, fired: threading.Event) -> None:
    """The deadline passed: end the scrape's blocked read (it then sees the connection end)."""
    fired.set()
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


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
