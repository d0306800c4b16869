"""Open an HTML file in headless Chromium and report what a person would have seen go wrong.

Driven over the DevTools protocol (a WebSocket, ``websocket-client``), with no browser
automation framework: the test needs only the console, the network log and two expressions
evaluated in the page. :func:`open_in_chromium` loads the file, waits until the report's script
says every chart settled (``<body data-charts-drawn>``), and returns a :class:`PageCheck` with

- every console error, uncaught exception and browser log error (a refused resource, a
  Content-Security-Policy violation),
- every request whose URL is not the file itself or inline data (``http:``, ``https:``,
  ``ws:`` ...): a self-contained report makes none,
- each chart container: whether the script drew it, how many SVG layers and plotted traces
  Plotly made in it, and how many data points it holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ChartState", "PageCheck", "find_chromium", "open_in_chromium", "page_problems"]

_LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
_CHARTS = """JSON.stringify(Array.from(document.querySelectorAll('.chart')).map(function (el) {
  var points = (el.data || []).reduce(function (n, t) {
    return n + Math.max((t.x || []).length, (t.y || []).length, (t.values || []).length);
  }, 0);
  return {key: el.dataset.chart, drawn: el.dataset.drawn || '',
          svg: el.querySelectorAll('svg.main-svg').length,
          traces: el.querySelectorAll('.cartesianlayer .trace, .pielayer .trace').length,
          points: points, height: el.getBoundingClientRect().height};
}))"""


@dataclass(frozen=True)
class ChartState:
    """One chart container as the browser left it."""

    key: str
    drawn: str
    svg_layers: int
    traces: int
    points: int
    height: float

    @property
    def ok(self) -> bool:
        """Drawn by the script, with SVG, at least one plotted trace and a data point."""
        return (self.drawn == "1" and self.svg_layers > 0 and self.traces > 0
                and self.points > 0 and self.height > 0)


@dataclass
class PageCheck:
    """What :func:`open_in_chromium` saw."""

    settled: str = ""
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    charts: list[ChartState] = field(default_factory=list)

    @property
    def remote_requests(self) -> list[str]:
        return [url for url in self.requests if not url.startswith(_LOCAL_SCHEMES)]


def find_chromium() -> str | None:
    """``TUNEGATE_CHROMIUM``, else ``chromium``, ``chromium-browser`` or ``google-chrome``."""
    chosen = os.environ.get("TUNEGATE_CHROMIUM")
    if chosen and Path(chosen).exists():
        return chosen
    return next((found for name in ("chromium", "chromium-browser", "google-chrome")
                 if (found := shutil.which(name))), None)


class _DevTools:
    """One page target's WebSocket: numbered commands, events queued as they arrive."""

    def __init__(self, url: str) -> None:
        import websocket

        self._socket = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        self._socket.send(json.dumps({"id": self._next, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def close(self) -> None:
        self._socket.close()


def _start(chromium: str, profile: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--disable-background-networking", "--disable-breakpad", "--disable-crash-reporter",
         "--remote-allow-origins=*",
         "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "--window-size=1280,1000", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        found = re.search(r"DevTools listening on (ws://\S+)", line)
        if found:
            port = re.search(r":(\d+)/", found.group(1))
            assert port is not None
            return process, port.group(1)
    process.kill()
    raise RuntimeError("Chromium did not start: " + "".join(seen[-5:]))


def _page_socket(port: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as reply:
        targets = json.load(reply)
    return str(next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"))


def _collect(events: list[dict[str, Any]], check: PageCheck) -> None:
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            check.errors.append("console: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            check.errors.append("exception: " + str(
                details.get("exception", {}).get("description", details.get("text"))))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            check.errors.append("log: " + str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            check.requests.append(str(params.get("request", {}).get("url")))
    events.clear()


def open_in_chromium(path: Path, chromium: str, *, timeout_s: float = 90.0) -> PageCheck:
    """Load ``path`` (an HTML report) and wait for its charts; see the module docstring."""
    check = PageCheck()
    with tempfile.TemporaryDirectory(prefix="tunegate-chromium-") as profile:
        process, port = _start(chromium, profile)
        try:
            tools = _DevTools(_page_socket(port))
            for domain in ("Runtime", "Log", "Network", "Page"):
                tools.call(f"{domain}.enable")
            tools.call("Page.navigate", url=Path(path).resolve().as_uri())
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                state = tools.evaluate("document.readyState === 'complete' && "
                                       "(document.body.dataset.chartsDrawn || '')")
                if state:
                    check.settled = str(state)
                    break
                time.sleep(0.2)
            check.charts = [ChartState(c["key"], c["drawn"], c["svg"], c["traces"],
                                       c["points"], c["height"])
                            for c in json.loads(tools.evaluate(_CHARTS) or "[]")]
            tools.call("Runtime.evaluate", expression="1")  # flush the events queued so far
            _collect(tools.events, check)
            tools.close()
        finally:
            _stop(process)
    return check


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM first, so Chromium shuts its helper processes down and reaps them (killed
    outright, they would linger as zombies where nothing reaps orphans); then the whole group."""
    process.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def page_problems(path: Path, chromium: str, *, at_least: int = 1) -> list[str]:
    """Everything wrong with the HTML report at ``path`` in Chromium, as lines (empty: it
    renders): whether the charts settled, every console error, every request leaving the file,
    too few charts and each chart that did not draw. (What the HTML itself would fetch is
    :func:`tunegate.report.offline.remote_resources`' to say: this module ranks below
    ``report``.)"""
    check = open_in_chromium(path, chromium)
    problems: list[str] = []
    if check.settled != "all":
        problems.append(f"charts did not settle: {check.settled or 'timeout'}")
    problems += check.errors + [f"requested {url}" for url in check.remote_requests]
    if len(check.charts) < at_least:
        problems.append(f"{len(check.charts)} charts, expected at least {at_least}")
    problems += [f"chart {c.key} not drawn: {c}" for c in check.charts if not c.ok]
    return problems
