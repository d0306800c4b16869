"""The soak's plot (PNG, matplotlib imported lazily with the ``Agg`` backend).

One panel per watched series that has a value, stacked on a shared time axis (hours when the
soak spans more than two hours, minutes otherwise). Each window's value is drawn at the middle
of its window, so a change's onset line (the start of the first window of the new regime) falls
between the last point before the change and the first after it.

* Valid windows are joined by a line: they are what the detectors were fed. Invalid windows
  (the gauge rejected them) are hollow grey markers, not joined, for the same reason; the y
  axis is scaled to the valid windows (a junk window must not flatten a step), and an invalid
  value beyond it is a triangle at the edge, pointing the way it went.
* A confirmed change point is a solid vertical line at its onset, red when it went the bad way
  for the series' direction, blue otherwise, with a dotted line at the window that raised the
  alarm, labelled with its size and the detectors that agreed. An unconfirmed change point
  (an alarm the end-of-soak check did not confirm) is a faint grey dashed line.
* Between confirmed onsets, the mean of each regime's valid windows is a horizontal segment.
  It is recomputed from the windows rather than taken from the change point's ``after``, which
  covers only the onset-to-alarm stretch (the windows picked because they looked different).
* A watermark's ``limit`` (the usage that would hurt) is a horizontal line.

The file is written atomically (:func:`~tunegate.files.atomic.atomic_write_bytes`): a soak
stopped while drawing never leaves a truncated PNG behind.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from tunegate.errors import ConfigError
from tunegate.files.atomic import atomic_write_bytes

__all__ = ["Marker", "plot_soak"]

HOURS_ABOVE_S = 2 * 3600.0
PANEL_IN, HEADER_IN, MIN_HEIGHT_IN, MAX_HEIGHT_IN, WIDTH_IN, DPI = 2.0, 1.0, 3.6, 24.0, 10.0, 110
STYLE = {"onset": ("-", 1.6, 0.9), "alarm": (":", 1.2, 0.9), "unconfirmed": ("--", 1.0, 0.45)}


@dataclass(frozen=True)
class Marker:
    """A vertical line on a panel: a change's onset, its alarm, or an unconfirmed change."""

    t_s: float
    style: Literal["onset", "alarm", "unconfirmed"]
    color: str
    label: str = ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _points(document: Mapping[str, Any], series: str,
            valid: bool) -> list[tuple[float, float]]:
    """(window middle in s, value) of the series' valid (or invalid) windows that have one."""
    half = float((document.get("plan") or {}).get("window_s") or 0.0) / 2
    out = []
    for window in document.get("windows") or []:
        value = _number((window.get("values") or {}).get(series))
        if value is not None and bool(window.get("valid", True)) == valid:
            out.append((float(window["t_s"]) + half, value))
    return out


def _panels(document: Mapping[str, Any]) -> list[str]:
    """The series drawn, in the document's order: those with a value in some window."""
    return [s["name"] for s in document.get("series") or []
            if _points(document, s["name"], True) or _points(document, s["name"], False)]


def _changes(document: Mapping[str, Any], key: str, series: str) -> list[Mapping[str, Any]]:
    return sorted((cp for cp in document.get(key) or [] if cp.get("metric") == series),
                  key=lambda cp: float(cp["t_s"]))


def _markers(document: Mapping[str, Any], series: str) -> list[Marker]:
    """The vertical lines of one panel: onset and alarm of each confirmed change (the alarm,
    the later line, carries the label so it reads clear of both), then the unconfirmed ones."""
    out = []
    for cp in _changes(document, "change_points", series):
        color = "tab:red" if cp.get("worse") else "tab:blue"
        size = _number(cp.get("size"))
        text = "n/a" if size is None else f"{size:+.1%}"
        label = f"{text} [{'+'.join(cp.get('detectors') or [])}]"
        out.append(Marker(float(cp["t_s"]), "onset", color))
        out.append(Marker(float(cp["alarm_t_s"]), "alarm", color, label))
    out += [Marker(float(cp["t_s"]), "unconfirmed", "0.5")
            for cp in _changes(document, "unconfirmed_change_points", series)]
    return out


def _regimes(document: Mapping[str, Any], series: str) -> list[tuple[float, float, float]]:
    """(start s, end s, mean) of the valid windows between confirmed onsets; empty when the
    series has no confirmed change."""
    onsets = [float(cp["t_s"]) for cp in _changes(document, "change_points", series)]
    points = _points(document, series, True)
    if not onsets or not points:
        return []
    edges = [0.0, *onsets, _reach_s(document)]  # a running soak's last regime ends at "now"
    out = []
    for start, end in pairwise(edges):
        inside = [v for t, v in points if start <= t < end]
        if inside:
            out.append((start, end, sum(inside) / len(inside)))
    return out


def _reach_s(document: Mapping[str, Any]) -> float:
    """The end of the last window (0 before the first)."""
    windows = document.get("windows") or []
    window_s = float((document.get("plan") or {}).get("window_s") or 0.0)
    return max((float(w["t_s"]) + window_s for w in windows), default=0.0)


def _span_s(document: Mapping[str, Any]) -> float:
    """The soak's planned length, or how far its windows reach when longer (or no plan)."""
    return max(float((document.get("plan") or {}).get("duration_s") or 0.0), _reach_s(document))


def _time_unit(document: Mapping[str, Any]) -> tuple[float, str]:
    """(seconds per unit, unit name): hours when the soak spans more than two hours."""
    return (3600.0, "h") if _span_s(document) > HOURS_ABOVE_S else (60.0, "min")


def _title(document: Mapping[str, Any]) -> str:
    windows = document.get("windows") or []
    invalid = sum(1 for w in windows if not w.get("valid", True))
    target = (document.get("target") or {}).get("description") or "soak"
    count = f"{len(windows)} windows" + (f" ({invalid} invalid)" if invalid else "")
    return f"{target}: {document.get('verdict') or 'running'}, {count}"


def plot_soak(document: Mapping[str, Any], path: Path) -> Path:
    """Write a PNG of the soak.json ``document``: one panel per watched series that has at least
    one value (module docstring). Returns ``path``, whose directory must exist.

    Raises:
        ConfigError: ``path``'s directory does not exist, or no series has a value to draw.
    """
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write the soak plot {path}: directory {path.parent} does "
                          "not exist")
    names = _panels(document)
    if not names:
        raise ConfigError(f"no soak series has a value to plot; {path} not written")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per, unit = _time_unit(document)
    specs = {s["name"]: s for s in document.get("series") or []}
    height = min(max(HEADER_IN + PANEL_IN * len(names), MIN_HEIGHT_IN), MAX_HEIGHT_IN)
    fig, axes = plt.subplots(len(names), 1, sharex=True, squeeze=False,
                             figsize=(WIDTH_IN, height), dpi=DPI)
    for ax, name in zip(axes[:, 0], names, strict=True):
        _draw_panel(ax, document, specs[name], per)
    axes[-1, 0].set_xlim(0.0, _span_s(document) / per)
    axes[-1, 0].set_xlabel(f"time since start ({unit})")
    fig.suptitle(_title(document), fontsize=11)
    legend: dict[str, Any] = {}
    for ax in axes[:, 0]:
        handles, labels = ax.get_legend_handles_labels()
        legend.update(zip(labels, handles, strict=True))
    top = 1.0 - 0.6 / height  # room for the title and the legend, in inches
    fig.legend(legend.values(), legend.keys(), loc="upper center", ncol=min(len(legend), 5),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, 1.0 - 0.3 / height))
    fig.tight_layout(rect=(0.0, 0.0, 1.0, top))
    image = io.BytesIO()
    fig.savefig(image, format="png")
    plt.close(fig)
    atomic_write_bytes(path, image.getvalue())
    return path


def _draw_panel(ax: Any, document: Mapping[str, Any], spec: Mapping[str, Any],
                per: float) -> None:
    name = spec["name"]
    valid = _points(document, name, True)
    if valid:
        ax.plot(*_scaled(valid, per), "-o", c="0.15", lw=0.9, ms=2.5, label="valid window")
    for start, end, mean in _regimes(document, name):
        ax.hlines(mean, start / per, end / per, colors="tab:orange", lw=2.2, alpha=0.8,
                  label="regime mean")
    limit = _number(spec.get("limit"))
    if spec.get("kind") == "watermark" and limit is not None:
        ax.axhline(limit, c="tab:purple", lw=1.2, ls="-.", label="limit")
    invalid = _points(document, name, False)
    low, high = ax.get_ylim() if valid else (-math.inf, math.inf)
    if valid:  # scaled to what was used: a junk window must not flatten a step
        ax.set_ylim(low, high)
    groups: dict[str, list[tuple[float, float]]] = {}
    for t, v in invalid:  # a triangle at the edge for a value beyond the scale
        shape = "v" if v < low else "^" if v > high else "o"
        groups.setdefault(shape, []).append((t, min(max(v, low), high)))
    for shape, shown in groups.items():
        ax.scatter(*_scaled(shown, per), s=22, marker=shape, facecolors="none",
                   edgecolors="0.6", clip_on=False, label="invalid window (not used)")
    names = {"onset": "change", "alarm": "alarm", "unconfirmed": "unconfirmed change"}
    for m in _markers(document, name):
        ls, lw, alpha = STYLE[m.style]
        label = names[m.style] + (" (worse)" if m.color == "tab:red" and m.style == "onset" else "")
        ax.axvline(m.t_s / per, c=m.color, ls=ls, lw=lw, alpha=alpha, label=label)
        if m.label:
            ax.annotate(m.label, xy=(m.t_s / per, 0.97), xycoords=ax.get_xaxis_transform(),
                        xytext=(3, 0), textcoords="offset points", ha="left", va="top",
                        fontsize=7, color=m.color,
                        bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 1})
    better = f", {spec['direction']} is better" if spec.get("direction") in ("higher",
                                                                              "lower") else ""
    ax.set_title(f"{name} ({spec.get('kind', 'series')}{better})", loc="left", fontsize=9)
    ax.grid(alpha=0.3)


def _scaled(points: Sequence[tuple[float, float]], per: float) -> tuple[list[float], list[float]]:
    return [t / per for t, _ in points], [v for _, v in points]
