"""The soak's verdict as a pure function of its window rows (what the tuner records and replays).

:meth:`tunegate.stats.drift.SoakWatch.verdict` judges the watched series; the soak adds what
only it sees. A server that restarted during a window (a counter went backwards, a new process
start time) or stopped answering is ``degraded``: whatever the series say, a service that falls
over during a soak is not one to deliver. Windows the gauge rejected are named in the evidence;
their untrusted values were never watched. Feeding the rows to a fresh watch rebuilds exactly
the live state (the watch is deterministic), so the verdict can be re-derived from ``soak.json``
or from the tuner's decision log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.stats.drift import SeriesSpec, SoakWatch, Verdict

__all__ = ["feed_rows", "judge_soak", "series_from_dicts", "series_to_dicts"]


def series_to_dicts(series: Sequence[SeriesSpec]) -> list[dict[str, Any]]:
    return [{"name": s.name, "kind": s.kind, "direction": s.direction, "limit": s.limit}
            for s in series]


def series_from_dicts(items: Sequence[Mapping[str, Any]]) -> list[SeriesSpec]:
    return [SeriesSpec(str(i["name"]), i["kind"], i.get("direction", "none"), i.get("limit"))
            for i in items]


def feed_rows(watch: SoakWatch, rows: Sequence[Mapping[str, Any]]) -> None:
    """Feed recorded window rows (``window``, ``t_s``, ``values``) to ``watch`` in order."""
    for row in rows:
        values = {k: v for k, v in row["values"].items() if v is not None}
        watch.update(int(row["window"]), float(row["t_s"]), values)


def judge_soak(rows: Sequence[Mapping[str, Any]], series: Sequence[SeriesSpec], *,
               tolerance: float, alpha: float, died: str | None = None,
               watch: SoakWatch | None = None) -> Verdict:
    """The verdict of a soak whose windows are ``rows`` (module docstring).

    Args:
        rows: Window rows as ``soak.json`` holds them.
        series: The watched series.
        tolerance, alpha: As for :meth:`SoakWatch.verdict`.
        died: Why the server was found dead, when it was.
        watch: The live watch already fed these rows (rebuilt from them when omitted).
    """
    if watch is None:
        watch = SoakWatch(series)
        feed_rows(watch, rows)
    base = watch.verdict(tolerance, alpha)
    degraded = [f"server restarted during window {r['window']} (t={float(r['t_s']):g} s): a "
                "counter went backwards or a new process answered"
                for r in rows if r.get("restarted")]
    if died is not None:
        degraded.append(f"server stopped answering: {died}")
    notes: list[str] = []
    invalid = [r for r in rows if not r.get("valid")]
    if invalid:
        codes = sorted({c for r in invalid for c in r.get("findings", [])})
        notes.append(f"{len(invalid)} of {len(rows)} windows rejected by the gauge "
                     f"({', '.join(codes) or 'no code'}); their untrusted values were not "
                     "watched")
    status = "degraded" if degraded else base.status
    return Verdict(status, (*degraded, *base.evidence, *notes), base.change_points,
                   base.unconfirmed, base.trends)
