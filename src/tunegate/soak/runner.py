"""The soak loop: window after window, each judged by the gauge, then watched for drift.

One window at a time: size its workload, run it (:mod:`.sources`), validate it and reduce it to
values (:mod:`.window`), write its records, feed the trusted values to the drift watch
(:class:`tunegate.stats.drift.SoakWatch`: CUSUM, Page-Hinkley, ADWIN and BOCPD on every series,
a change reported when two agree), and rewrite ``soak.json``. The soak ends when every window
ran (``complete``), on Ctrl-C or SIGTERM (``interrupted``: the window in progress is dropped,
every finished one kept), or when the server stops answering (``server_died``: a window in
which no request got a response, or an engine that cannot be measured any more; the windows
before it are kept and the death is evidence of degradation).

The verdict is :func:`.judge.judge_soak`: the watch's, plus what only the soak sees (a server
that restarted or died is ``degraded``; rejected windows are named). When fewer than half the
windows are valid the verdict is not to be trusted (``trusted`` false; ``tunegate soak`` exits
3).

Resuming rebuilds the watch by feeding the recorded windows' values again (the watch is a
deterministic function of them) and continues with the next window; a simulated engine's age
comes back from the snapshot saved with every window, so a scenario's onset stays where it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, Literal

from tunegate.errors import ConfigError, ServerError
from tunegate.loadgen.records import RequestRecord
from tunegate.soak.judge import judge_soak, series_to_dicts
from tunegate.soak.plan import SoakPlan
from tunegate.soak.sources import WindowSource, WindowWorkloads
from tunegate.soak.store import FORMAT, SoakStore
from tunegate.soak.window import Window, judge_window, server_died
from tunegate.stats.drift import DEFAULT_SERIES, ChangePoint, SeriesSpec, SoakWatch, Verdict

__all__ = ["Soak", "SoakResult", "SoakStatus", "WindowCallback"]

SoakStatus = Literal["running", "complete", "interrupted", "server_died"]
MAX_CALIBRATIONS = 3
"""Runs of a window whose workload ran out early, redone larger before it counts as short."""
WindowCallback = Callable[[Window, list[ChangePoint]], None]


@dataclass(frozen=True)
class SoakResult:
    """How a soak ended.

    Attributes:
        status: ``complete``, ``interrupted`` or ``server_died``.
        verdict: The watch's verdict with the soak's own evidence (``None``: no window ran).
        document: What ``soak.json`` holds.
    """

    status: SoakStatus
    verdict: Verdict | None
    document: dict[str, Any]

    @property
    def trusted(self) -> bool:
        return bool(self.document.get("trusted"))


def _span_s(records: Sequence[RequestRecord]) -> float:
    """Seconds from a window's first send to its last response."""
    if not records:
        return 0.0
    return (max(r.t_end_ns for r in records) - min(r.t_send_ns for r in records)) / 1e9


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then act on them as usual.

    Recording a window touches the watch, the rows and two files; an interrupt in the middle
    would keep a row without its records, or feed the watch a window that has no row. The
    handlers are swapped for ones that only note the signal (Python runs handlers in the main
    thread whichever thread the kernel chose, so this holds with numpy's threads too; a signal
    mask would not), and the noted signal is handed to the previous handler at the end, where
    the window is whole. Outside the main thread (no handlers there) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if noted:
            handler = previous[signal.Signals(noted[0])]
            if callable(handler):
                handler(noted[0], None)  # Python's SIGINT handler raises KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), noted[0])


class Soak:
    """One soak (module docstring).

    Args:
        source: Runs the windows.
        workloads: Sizes each window's workload.
        plan: Duration, window, tolerance.
        store: The soak's directory (created by :meth:`SoakStore.create`, or loaded to resume).
        header: What the document says about the target and workload (JSON-able).
        series: The series to watch.
    """

    def __init__(self, source: WindowSource, workloads: WindowWorkloads, plan: SoakPlan,
                 store: SoakStore, header: Mapping[str, Any],
                 series: Sequence[SeriesSpec] = DEFAULT_SERIES) -> None:
        self.source, self.workloads, self.plan, self.store = source, workloads, plan, store
        self.header = dict(header)
        self.series = tuple(series)
        self.watch = SoakWatch(self.series)
        self.rows: list[dict[str, Any]] = []
        self.elapsed_s = 0.0
        self.status: SoakStatus = "running"
        self.end_reason: str | None = None

    def resume(self, document: Mapping[str, Any]) -> None:
        """Continue the soak ``document`` describes (:meth:`SoakStore.load`).

        Raises:
            ConfigError: The document's windows are not what this soak writes.
        """
        try:
            rows = [dict(row) for row in document["windows"]]
            for row in rows:
                self._feed(int(row["window"]), float(row["t_s"]), row["values"])
            self.elapsed_s = float(document.get("elapsed_s", 0.0))
            self.workloads.size = int(document.get("window_requests", self.workloads.size))
            snapshot = document.get("source_snapshot") or {}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{self.store.document_path}: a window row is malformed "
                              f"({exc!r}); it is written atomically, so it was edited") from None
        self.rows = rows
        self.source.restore(snapshot)

    def _feed(self, index: int, t_s: float, values: Mapping[str, Any]) -> list[ChangePoint]:
        return self.watch.update(index, t_s, {k: v for k, v in values.items() if v is not None})

    def run(self, on_window: WindowCallback | None = None) -> SoakResult:
        """Run the remaining windows; returns however the soak ended (never raises for an
        interrupt or a dead server: what was measured is in the result and on disk)."""
        start_clock, start_elapsed = self.source.clock_s(), self.elapsed_s

        def elapsed() -> float:  # the soak's clock; a resumed soak's excludes the pause
            return start_elapsed + self.source.clock_s() - start_clock

        for index in range(len(self.rows), self.plan.windows):
            try:
                self._window(index, elapsed(), elapsed, on_window)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the window in progress is dropped
                self._end("interrupted", f"interrupted during window {len(self.rows)}; the "
                          f"{len(self.rows)} finished windows are kept")
            if self.status != "running":
                break
        else:
            self._end("complete", None)
        verdict = self.verdict() if self.rows else None
        document = self.document(verdict)
        self.store.write_document(document)
        return SoakResult(self.status, verdict, document)

    def _window(self, index: int, t_s: float, elapsed: Callable[[], float],
                on_window: WindowCallback | None) -> None:
        """Run, judge, store and watch window ``index``, which starts at ``t_s``."""
        wall = None if self.source.virtual else dt.datetime.now(dt.UTC).isoformat(
            timespec="seconds")
        for attempt in range(MAX_CALIBRATIONS + 1):
            workload = self.workloads.for_window(index, self.plan.window_s)
            try:
                run = self.source.run(workload, index, self.plan.window_s)
            except ServerError as exc:
                self._end("server_died", f"window {index} (t={t_s:.0f} s): {exc}")
                return
            took = _span_s(run.records)
            ran_out = len(run.records) >= len(workload.requests)
            self.workloads.observe(len(run.records), ran_out=ran_out, took_s=took,
                                   window_s=self.plan.window_s)
            short = ran_out and took < 0.9 * self.plan.window_s
            if not short or attempt == MAX_CALIBRATIONS or server_died(run.records):
                break
            # The workload ran out early (the first window guesses its size): that run was a
            # calibration; the window starts again, sized from the rate just measured.
            t_s = elapsed()
            wall = None if self.source.virtual else dt.datetime.now(dt.UTC).isoformat(
                timespec="seconds")
        with signals_deferred():  # a measured window is recorded whole, or not at all
            window = judge_window(index, t_s, wall, run.records, run.server_metrics, workload,
                                  lag=run.lag, short=short)
            self.store.write_records(index, run.records)
            found = self._feed(index, t_s, window.values)
            self.rows.append({**window.to_dict(),
                              "change_points": [cp.to_dict() for cp in found]})
            self.elapsed_s = elapsed()
            if server_died(run.records):
                first = window.errors[0] if window.errors else "no response"
                self._end("server_died", f"window {index} (t={t_s:.0f} s): none of its "
                          f"{window.sent} requests got a response ({first})")
            self.store.write_document(self.document())
        if on_window is not None:
            on_window(window, found)

    def _end(self, status: SoakStatus, reason: str | None) -> None:
        self.status, self.end_reason = status, reason

    def verdict(self) -> Verdict:
        """The watch's verdict plus restarts, death and invalid windows (:mod:`.judge`)."""
        return judge_soak(self.rows, self.series, tolerance=self.plan.tolerance,
                          alpha=self.plan.alpha, watch=self.watch,
                          died=self.end_reason if self.status == "server_died" else None)

    def document(self, verdict: Verdict | None = None) -> dict[str, Any]:
        """``soak.json`` (see :mod:`.store`); the verdict keys are ``None`` while running."""
        valid = sum(1 for r in self.rows if r.get("valid"))
        live = [cp.to_dict() for cp in self.watch.change_points]
        walls = {r["window"]: r.get("wall_time") for r in self.rows}
        judged: dict[str, Any] = verdict.to_dict() if verdict is not None else {
            "verdict": None, "evidence": [], "change_points": live,
            "unconfirmed_change_points": [], "trends": []}
        for cp in (*judged["change_points"], *judged["unconfirmed_change_points"]):
            cp["wall_time"] = walls.get(cp["window"])
        return {
            "format": FORMAT, **self.header,
            "plan": self.plan.to_dict(),
            "status": self.status, "end_reason": self.end_reason,
            "windows_done": len(self.rows), "valid_windows": valid,
            "trusted": bool(self.rows) and 2 * valid >= len(self.rows),
            "elapsed_s": round(self.elapsed_s, 3),
            "window_requests": self.workloads.size,
            "source_snapshot": self.source.snapshot(),
            "series": series_to_dicts(self.series),
            **judged,
            "windows": self.rows,
        }
