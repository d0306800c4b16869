"""The report page of a soak (``tunegate soak --out DIR``, or a tuning run's ``soak/``).

One chart per watched series that has a value: each window is one point at the middle of its
window (as in ``soak.png``, :mod:`tunegate.soak.plot`), valid windows joined by a line (what
the drift detectors were fed), windows the gauge rejected as separate crosses (their values
were never watched). Each confirmed change point is a vertical line at its onset (the start of
the first window of the new regime: red when it went the bad way for the series, orange
otherwise) and a dotted line at the window that raised the alarm; an unconfirmed one is a grey
line. A degradation the end-of-soak split test found without a live change point is marked
where the evidence line names its window. Then the verdict with its evidence, the change
points, the trend tests and the table of windows.

The shape read is ``soak.json`` (:mod:`tunegate.soak.store`, :mod:`tunegate.soak.window`,
:meth:`tunegate.stats.drift.Verdict.to_dict`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunegate.report.charts import Marker, Series, finite, time_series
from tunegate.report.page import Block, Cell, KeyValues, Mark, Page, Section, Table, Text, Tone
from tunegate.soak.store import DOCUMENT, SoakStore

__all__ = ["evidence_windows", "soak_page", "soak_sections", "window_points"]

HOURS_ABOVE_S = 2 * 3600.0
"""Time axis in hours when the soak spans more than this, minutes otherwise (as soak.png)."""
_VERDICT_TONE: dict[str, Tone] = {"stable": "good", "drifting": "warn", "degraded": "bad"}
_EVIDENCE_WINDOW = re.compile(r"^(?P<metric>[A-Za-z_][\w.:]*): .*?\bfrom window (?P<w>\d+)")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _rows(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    windows = doc.get("windows")
    if not isinstance(windows, list):
        return []
    return [w for w in windows if isinstance(w, Mapping) and finite(w.get("t_s")) is not None]


def _window_s(doc: Mapping[str, Any]) -> float:
    plan = _mapping(doc.get("plan"))
    return finite(plan.get("window_s")) or finite(doc.get("window_s")) or 0.0


def _span_s(doc: Mapping[str, Any]) -> float:
    plan = _mapping(doc.get("plan"))
    reach = max((float(w["t_s"]) + _window_s(doc) for w in _rows(doc)), default=0.0)
    return max(finite(plan.get("duration_s")) or 0.0, reach)


def window_points(doc: Mapping[str, Any], series: str, *,
                  valid: bool) -> list[tuple[int, float, float]]:
    """``(window, t_s at the window's middle, value)`` of the valid (or the rejected) windows
    that hold a value of ``series``."""
    half = _window_s(doc) / 2
    out = []
    for w in _rows(doc):
        value = finite((w.get("values") or {}).get(series))
        if value is not None and bool(w.get("valid", True)) == valid:
            out.append((int(w.get("window", 0)), float(w["t_s"]) + half, value))
    return out


def evidence_windows(evidence: Sequence[str]) -> list[tuple[str, int, str]]:
    """``(series, window, line)`` of each evidence line that starts with a series name and
    names the window a change began in (``"p99_ttft_ms: +9.4% from window 11 ..."``)."""
    out = []
    for line in evidence:
        found = _EVIDENCE_WINDOW.match(str(line))
        if found:
            out.append((found["metric"], int(found["w"]), str(line)))
    return out


def _changes(doc: Mapping[str, Any], key: str, series: str) -> list[Mapping[str, Any]]:
    return sorted((cp for cp in doc.get(key) or []
                   if isinstance(cp, Mapping) and cp.get("metric") == series
                   and finite(cp.get("t_s")) is not None),
                  key=lambda cp: float(cp["t_s"]))


def _size(cp: Mapping[str, Any]) -> str:
    size = finite(cp.get("size"))
    return "n/a" if size is None else f"{size:+.1%}"


def _markers(doc: Mapping[str, Any], series: str, per: float) -> list[Marker]:
    """The vertical lines of one series' chart (module docstring), x in ``per`` units."""
    out: list[Marker] = []
    onsets: set[int] = set()
    for cp in _changes(doc, "change_points", series):
        tone: Tone = "bad" if cp.get("worse") else "warn"
        detectors = "+".join(map(str, cp.get("detectors") or []))
        hint = (f"{series}: change of {_size(cp)} at window {cp.get('window')} "
                f"(t={float(cp['t_s']):g} s), reported at window {cp.get('alarm_window')}; "
                f"mean {cp.get('before')} -> {cp.get('after')} [{detectors}]")
        out.append(Marker(float(cp["t_s"]) / per, f"change w{cp.get('window')} {_size(cp)}",
                          hint, tone, "solid"))
        if finite(cp.get("alarm_t_s")) is not None:
            out.append(Marker(float(cp["alarm_t_s"]) / per, f"alarm w{cp.get('alarm_window')}",
                              hint, tone, "dot"))
        onsets.add(int(cp.get("window", -1)))
    for cp in _changes(doc, "unconfirmed_change_points", series):
        out.append(Marker(float(cp["t_s"]) / per, "unconfirmed",
                          f"{series}: unconfirmed change of {_size(cp)} at window "
                          f"{cp.get('window')} (the end-of-soak check did not confirm it)",
                          "muted", "dash"))
    starts = {int(w.get("window", -1)): float(w["t_s"]) for w in _rows(doc)}
    for metric, window, line in evidence_windows(doc.get("evidence") or []):
        if metric == series and window not in onsets and window in starts:
            out.append(Marker(starts[window] / per, f"split w{window}", line, "bad", "dashdot"))
            onsets.add(window)
    return out


def _series_chart(doc: Mapping[str, Any], spec: Mapping[str, Any], key: str,
                  per: float, unit: str) -> Block | None:
    name = str(spec.get("name"))
    rows = {int(w.get("window", -1)): w for w in _rows(doc)}

    def hover(points: list[tuple[int, float, float]], rejected: bool) -> list[str]:
        texts = []
        for window, _, _ in points:
            w = rows.get(window) or {}
            text = (f"window {window} (start {float(w.get('t_s', 0.0)):g} s), "
                    f"{w.get('sent', '?')} sent, {w.get('failed', '?')} failed")
            if rejected:
                text += f"<br>rejected by the gauge: {', '.join(w.get('findings') or [])}"
            texts.append(text)
        return texts

    valid = window_points(doc, name, valid=True)
    rejected = window_points(doc, name, valid=False)
    if not valid and not rejected:
        return None
    series: list[Series] = []
    if valid:
        series.append(Series("valid window", [t / per for _, t, _ in valid],
                             [v for *_, v in valid], hover(valid, False),
                             mode="lines+markers", color="#1f3b73"))
    if rejected:
        series.append(Series("rejected window (not watched)",
                             [t / per for _, t, _ in rejected], [v for *_, v in rejected],
                             hover(rejected, True), mode="markers", symbol="x-open",
                             color="#9e9e9e"))
    limit = finite(spec.get("limit"))
    if spec.get("kind") == "watermark" and limit is not None:
        xs = [t / per for _, t, _ in (*valid, *rejected)]
        series.append(Series("limit", [min(xs), max(xs)], [limit, limit], mode="lines",
                             dash="dot", color="#7b3fa0"))
    direction = spec.get("direction")
    better = f", {direction} is better" if direction in ("higher", "lower") else ""
    changes = _changes(doc, "change_points", name)
    note = (f"{len(changes)} confirmed change point(s)" if changes else "no confirmed change")
    return time_series(f"{key}-{_slug(name)}", f"{name} ({spec.get('kind', 'series')}{better})",
                       series, x_title=f"time since start ({unit})", y_title=name,
                       markers=_markers(doc, name, per), note=note)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "series"


def _verdict_text(doc: Mapping[str, Any]) -> Text:
    verdict = doc.get("verdict")
    rows = _rows(doc)
    n = len(rows) or doc.get("windows_done") or (doc.get("windows") if isinstance(
        doc.get("windows"), int) else 0)
    valid = doc.get("valid_windows")
    status = doc.get("status")
    if not verdict:
        why = f" ({status})" if status else ""
        return Text(f"not judged{why}: {n} window(s) measured", "muted")
    counted = f"{n} windows" + (f", {valid} valid" if valid is not None else "")
    trusted = "" if doc.get("trusted", True) else (
        "; NOT TRUSTED: fewer than half the windows passed the gauge")
    return Text(f"soak {verdict}: {counted}{trusted}",
                "bad" if trusted else _VERDICT_TONE.get(str(verdict), ""))


def _verdict_section(doc: Mapping[str, Any], key: str) -> Section:
    blocks: list[Block] = [_verdict_text(doc)]
    plan = _mapping(doc.get("plan"))
    target = _mapping(doc.get("target"))
    items: list[tuple[str, Cell]] = []
    for label, value in (
            ("target", target.get("description")), ("status", doc.get("status")),
            ("end reason", doc.get("end_reason")), ("started at", doc.get("started_at")),
            ("windows done", doc.get("windows_done")),
            ("windows planned", plan.get("windows")),
            ("valid windows", doc.get("valid_windows")),
            ("window (s)", _window_s(doc) or None),
            ("duration (s)", finite(plan.get("duration_s")) or finite(doc.get("duration_s"))),
            ("tolerance", finite(plan.get("tolerance"))), ("alpha", finite(plan.get("alpha"))),
            ("requests per window", doc.get("window_requests"))):
        if value is not None:
            items.append((label, value if isinstance(value, str | int | float) else str(value)))
    if items:
        blocks.append(KeyValues(items))
    evidence = [str(e) for e in doc.get("evidence") or []]
    if evidence:
        tone: Tone = _VERDICT_TONE.get(str(doc.get("verdict")), "")
        blocks.append(Table(["evidence"], [[e] for e in evidence], caption="Evidence",
                            row_tones=[tone if tone != "good" else ""] * len(evidence)))
    elif doc.get("verdict"):
        blocks.append(Text("No evidence: no series moved.", "good"))
    cps: list[list[Cell]] = []
    for key_name, confirmed in (("change_points", "confirmed"),
                                ("unconfirmed_change_points", "unconfirmed")):
        for cp in doc.get(key_name) or []:
            if not isinstance(cp, Mapping):
                continue
            cps.append([str(cp.get("metric")), confirmed, cp.get("window"),
                        finite(cp.get("t_s")), cp.get("alarm_window"), finite(cp.get("before")),
                        finite(cp.get("after")),
                        Mark(_size(cp), "bad" if cp.get("worse") else ""),
                        "+".join(map(str, cp.get("detectors") or []))])
    if cps:
        blocks.append(Table(["series", "", "onset window", "onset t (s)", "alarm window",
                             "mean before", "mean after", "size", "detectors"], cps,
                            caption="Change points"))
    trends = [t for t in doc.get("trends") or [] if isinstance(t, Mapping)]
    if trends:
        blocks.append(Table(
            ["series", "slope per h", "level", "p", "rising", "limit", "hours to limit"],
            [[str(t.get("metric")), finite(t.get("slope_per_h")), finite(t.get("level")),
              finite(t.get("p_value")),
              Mark("rising", "bad") if t.get("rising") else "no", finite(t.get("limit")),
              finite(t.get("hours_to_limit"))] for t in trends],
            caption="Trend tests (incident and watermark series)"))
    return Section(f"{key}-verdict", "Soak verdict", blocks)


def _series_section(doc: Mapping[str, Any], key: str) -> Section:
    per, unit = (3600.0, "h") if _span_s(doc) > HOURS_ABOVE_S else (60.0, "min")
    specs = [s for s in doc.get("series") or [] if isinstance(s, Mapping) and s.get("name")]
    if not specs:  # an older or partial document: every series some window holds
        names = dict.fromkeys(k for w in _rows(doc) for k in (w.get("values") or {}))
        specs = [{"name": n} for n in names]
    blocks: list[Block] = []
    empty: list[str] = []
    for spec in specs:
        chart = _series_chart(doc, spec, f"{key}-series", per, unit)
        if chart is None:
            empty.append(str(spec["name"]))
        else:
            blocks.append(chart)
    if not blocks:
        blocks.append(Text("No window holds a value of any watched series yet: nothing to "
                           "draw.", "muted"))
    if empty:
        blocks.append(Text(f"No value in any window (not reported by the server, or refused "
                           f"by the gauge): {', '.join(empty)}.", "muted"))
    return Section(f"{key}-series", "Watched series", blocks)


def _windows_section(doc: Mapping[str, Any], key: str, soak_dir: Path | None) -> Section:
    rows = _rows(doc)
    if not rows:
        return Section(f"{key}-windows", "Windows", [Text("No window measured yet.", "muted")])
    names = list(dict.fromkeys(k for w in rows for k, v in (w.get("values") or {}).items()
                               if finite(v) is not None))
    table: list[list[Cell]] = []
    tones: list[Tone] = []
    for w in rows:
        ok = bool(w.get("valid", True))
        reported = ", ".join(f"{cp.get('metric')}@w{cp.get('window')}"
                             for cp in w.get("change_points") or [] if isinstance(cp, Mapping))
        findings = ", ".join(map(str, w.get("findings") or []))
        values = w.get("values") or {}
        invalid = set(w.get("invalid_metrics") or [])
        table.append([
            w.get("window"), finite(w.get("t_s")), finite(w.get("duration_s")), w.get("sent"),
            w.get("failed"), "valid" if ok else Mark("rejected", "bad", findings),
            findings, "restarted" if w.get("restarted") else "", reported,
            *(_value_cell(values.get(n), n, invalid, ok) for n in names)])
        tones.append("bad" if w.get("restarted") else "" if ok else "warn")
    caption = "One row per window"
    if soak_dir is not None:
        caption += "; each window's requests are in records/window-NNNNNN.jsonl.gz"
    return Section(f"{key}-windows", "Windows", [Table(
        ["window", "start (s)", "duration (s)", "sent", "failed", "gauge", "findings",
         "server", "change points reported", *names], table, caption=caption, row_tones=tones)])


def _value_cell(value: Any, name: str, invalid: set[str], ok: bool) -> Cell:
    number = finite(value)
    if number is None:
        return None
    return number if ok else Mark(f"{number:.4g}", "muted", "window rejected: not watched")


def _full_document(soak_doc: Mapping[str, Any], soak_dir: Path | None) -> Mapping[str, Any]:
    """The whole soak document: ``soak_doc`` itself when it holds the window rows, else (a
    tuning run's summary ``soak`` entry) ``soak.json`` of ``soak_dir`` with the summary's
    verdict and evidence over it."""
    if isinstance(soak_doc.get("windows"), list) or soak_dir is None:
        return soak_doc
    path = soak_dir / DOCUMENT
    try:
        full = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return soak_doc
    if not isinstance(full, dict):
        return soak_doc
    for k in ("verdict", "evidence", "change_points", "status"):
        if soak_doc.get(k) is not None:
            full[k] = soak_doc[k]
    return full


def soak_sections(soak_doc: Mapping[str, Any], soak_dir: Path | None, *,
                  key_prefix: str = "soak") -> list[Section]:
    """The soak's sections: verdict and evidence, watched series, windows.

    Args:
        soak_doc: ``soak.json``'s document, or a tuning run's summary ``soak`` entry (verdict,
            evidence, window count: the rows are then read from ``soak_dir``).
        soak_dir: The soak's directory, when known (``soak.json`` and the records files).
        key_prefix: Prefix of every section and chart key, unique on the page.
    """
    doc = _full_document(soak_doc, soak_dir)
    sections = [_verdict_section(doc, key_prefix), _series_section(doc, key_prefix)]
    if _rows(doc):
        sections.append(_windows_section(doc, key_prefix, soak_dir))
    elif not isinstance(doc.get("windows"), list):
        sections[0] = Section(sections[0].key, sections[0].title, [
            *sections[0].blocks,
            Text("The soak's window rows are not at hand (no soak.json found): only the "
                 "verdict is shown.", "muted")])
    return sections


def soak_page(soak_dir: Path) -> Page:
    """The page of the soak in ``soak_dir`` (its ``soak.json``).

    Raises:
        ConfigError: No soak there, or the file is not a soak document.
    """
    doc = SoakStore(soak_dir).load()
    target = (doc.get("target") or {}).get("description") or soak_dir.name
    return Page(kind="soak", title=f"Soak: {target}", source=str(soak_dir / DOCUMENT),
                verdict=_verdict_text(doc), sections=soak_sections(doc, soak_dir))
