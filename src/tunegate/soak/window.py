"""One soak window: its records judged by the gauge, reduced to the values the watch follows.

A window is one benchmark of ``window_s`` seconds. The gauge validates it before anything is
fed to the drift detectors: a metric the gauge calls invalid in that window (``invalid_metrics``
of its report, e.g. TTFT when the stream did not stream) is left out of that window's values,
and when the whole window is invalid without naming metrics (a saturated client) every
client-side value is; the server's own figures still count. A window measured but not trusted
stays in ``soak.json`` with its findings, so nothing measured is lost.

Per-window values (the keys of :data:`tunegate.stats.drift.DEFAULT_SERIES`):

* ``output_throughput`` (tok/s), ``median_/p99_`` ``ttft/tpot/e2el`` ``_ms``: from the
  window's successful requests (:func:`tunegate.metrics.summarize`);
* ``error_rate``: failed requests over requests sent in the window;
* ``preemptions``, ``queue_time_mean_s``, ``kv_cache_usage_peak``: the server's ``/metrics``
  over the window (``derived`` keys of the ``server_metrics`` block; absent when the server does
  not export them). A counter that went backwards, or a new process start time, means the
  server restarted during the window (``restarted``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunegate.gauge import ValidationReport, validate_records
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics import summarize
from tunegate.workload.spec import Workload

__all__ = ["CLIENT_SERIES", "SERVER_SERIES", "Window", "judge_window", "server_died"]

CLIENT_SERIES: dict[str, str] = {
    "output_throughput": "throughput",
    **{f"{stat}_{m}_ms": m for m in ("ttft", "tpot", "e2el") for stat in ("median", "p99")},
}
"""Client-side series -> the gauge metric whose invalidity drops it from a window."""
SERVER_SERIES = ("preemptions", "queue_time_mean_s", "kv_cache_usage_peak")
"""Series read from the server's ``/metrics`` (``derived`` keys)."""


@dataclass(frozen=True)
class Window:
    """What one window measured and what the soak feeds to its watch.

    Attributes:
        index: Window number, from 0.
        t_s: Start of the window on the soak's clock (seconds since the soak began; virtual
            seconds for the simulator).
        duration_s: How long the window took, its drain included.
        wall_time: UTC start time (ISO 8601) for a real server; ``None`` in virtual time.
        sent / failed: Requests sent in the window, and how many failed.
        values: The watched values; ``None`` = not measured or not trusted in this window.
        validation: The gauge's report.
        restarted: The server's counters or process start time say it restarted.
        short: The window's workload ran out before ``window_s`` (it is made larger next).
    """

    index: int
    t_s: float
    duration_s: float
    wall_time: str | None
    sent: int
    failed: int
    values: dict[str, float | None]
    validation: ValidationReport
    restarted: bool = False
    short: bool = False
    errors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def valid(self) -> bool:
        return self.validation.valid

    def to_dict(self) -> dict[str, Any]:
        """The window's row in ``soak.json``."""
        return {
            "window": self.index, "t_s": round(self.t_s, 3),
            "duration_s": round(self.duration_s, 3), "wall_time": self.wall_time,
            "sent": self.sent, "failed": self.failed, "valid": self.valid,
            "findings": self.validation.codes(),
            "invalid_metrics": sorted(self.validation.invalid_metrics),
            "restarted": self.restarted, "short": self.short, "errors": list(self.errors),
            "values": self.values,
        }


def judge_window(
    index: int, t_s: float, wall_time: str | None, records: Sequence[RequestRecord],
    server_metrics: Mapping[str, Any] | None, workload: Workload, *,
    lag: LagSummary | None = None, short: bool = False,
) -> Window:
    """Validate one window's records and reduce them to the watched values."""
    schedule = workload.schedule
    validation = validate_records(
        records, lag, max_concurrency=schedule.max_concurrency,
        request_rate=schedule.request_rate, server_metrics=server_metrics,
        burstiness=schedule.burstiness,
        arrival=schedule.kind if schedule.offsets_s is not None else None)
    summary = summarize(records) if records else {}
    invalid = validation.invalid_metrics
    whole_window_invalid = not validation.valid and not invalid
    values: dict[str, float | None] = {}
    for key, metric in CLIENT_SERIES.items():
        value = summary.get(key)
        trusted = not whole_window_invalid and metric not in invalid
        values[key] = float(value) if trusted and isinstance(value, int | float) else None
    failed = sum(1 for r in records if not r.outcome.is_success)
    values["error_rate"] = failed / len(records) if records else None
    derived = (server_metrics or {}).get("derived") or {}
    for key in SERVER_SERIES:
        value = derived.get(key)
        values[key] = float(value) if isinstance(value, int | float) else None
    starts, ends = [r.t_send_ns for r in records], [r.t_end_ns for r in records]
    duration = (max(ends) - min(starts)) / 1e9 if records else 0.0
    # a new process start time is a restart only when one process answers at a time
    # (replicas behind one URL answer in turn: ``one_process`` false, not a restart)
    restarted = bool(server_metrics and (
        server_metrics.get("resets")
        or ((server_metrics.get("processes") or 0) > 1
            and server_metrics.get("one_process") is not False)))
    errors = sorted({(r.error or "").splitlines()[0][:200] for r in records
                     if not r.outcome.is_success and r.error})[:5]
    return Window(index, t_s, duration, wall_time, len(records), failed, values, validation,
                  restarted=restarted, short=short, errors=tuple(errors))


def server_died(records: Sequence[RequestRecord]) -> bool:
    """Every request of a window failed before a response began: nobody answers any more."""
    return bool(records) and all(
        not r.outcome.is_success and r.http_status is None and r.t_first_ns is None
        for r in records)
