"""Small chart builders shared by every report page: distributions, lines over time, markers.

Every function returns plain Plotly data (:class:`~tunegate.report.page.Chart` or trace dicts)
made of ``scatter`` and ``bar`` traces only, with every number a finite Python ``float`` (or
``None``, a gap), so a chart is JSON-ready and needs neither WebGL nor the network.

Raw per-request arrays are never embedded as they are: histograms are binned here with numpy,
and a line holds at most :data:`MAX_POINTS` points (:func:`downsample`), so a page stays a
reasonable size however long the run.

A chart is never empty (the page contract): :func:`histogram_and_cdf` returns no chart for no
value, :func:`time_series` and :func:`percentile_chart` raise :class:`ValueError` when there is
nothing to draw, so the caller writes a :class:`~tunegate.report.page.Text` saying why instead.
:func:`chart_points` counts a chart's data points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunegate.report.page import Chart, Tone

__all__ = ["MAX_POINTS", "VLINE_COLORS", "Marker", "Series", "chart_points", "downsample",
           "downsample_indices", "finite", "histogram_and_cdf", "invalid_label",
           "percentile_chart", "time_series", "vline_layout"]

MAX_POINTS = 2000
"""The most points one line embeds in a page."""

VLINE_COLORS: dict[str, str] = {
    "": "#7f7f7f",
    "muted": "#b0b0b0",
    "good": "#2ca02c",
    "warn": "#ff7f0e",
    "bad": "#d62728",
    "invalid": "#d62728",
}
"""Colour of a :class:`Marker` line by its tone."""


@dataclass(frozen=True)
class Series:
    """One line (or set of points) on a :func:`time_series` chart.

    Attributes:
        name: The legend entry (and the hover box's title).
        x: The x values (e.g. seconds since the start).
        y: The y values, one per x; a non-finite value (NaN, infinity) or ``None`` is a gap.
        hovertext: Optional text per point, shown on hover under the values (e.g. the config's
            parameters, or "window 3, rejected: ...").
        mode: Plotly's ``mode``: ``"lines"``, ``"markers"`` or ``"lines+markers"``.
        dash: Line dash (``"solid"``, ``"dot"``, ``"dash"``...); empty for Plotly's default.
        symbol: Marker symbol (``"x"``, ``"circle-open"``...); empty for Plotly's default.
        color: A CSS colour; empty lets Plotly pick from its cycle.
        shape: Line shape: ``"linear"`` or ``"hv"`` (steps, for counts that hold until the
            next change).
    """

    name: str
    x: Sequence[float]
    y: Sequence[float | None]
    hovertext: Sequence[str] | None = None
    mode: str = "lines"
    dash: str = ""
    symbol: str = ""
    color: str = ""
    shape: str = "linear"


@dataclass(frozen=True)
class Marker:
    """A vertical line at ``x`` marking an event (a change point, a window boundary, a
    re-baseline): ``label`` is the short text written at the top of the chart, ``hint`` the
    longer text shown when hovering that label (defaults to the label), ``tone`` its colour
    (see :data:`VLINE_COLORS`)."""

    x: float
    label: str
    hint: str = ""
    tone: Tone = ""
    dash: str = "dash"


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` (not a number, NaN, infinity, a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def invalid_label(reason: str) -> str:
    """The prefix every chart of an invalidated figure carries: ``"INVALID: <reason>"``."""
    return f"INVALID: {reason}"


def downsample_indices(n: int, max_points: int = MAX_POINTS) -> list[int]:
    """Indices of at most ``max_points`` of ``n`` items, evenly spread, first and last kept.

    ``range(n)`` itself when ``n <= max_points``.
    """
    if max_points < 2:
        raise ValueError("max_points must be at least 2")
    if n <= max_points:
        return list(range(n))
    picked = np.linspace(0, n - 1, max_points).round().astype(int)
    return sorted({int(i) for i in picked})


def downsample(*columns: Sequence[Any], max_points: int = MAX_POINTS) -> list[list[Any]]:
    """The same evenly spread rows of every column (all of one length), at most ``max_points``.

    ``xs, ys = downsample(xs, ys)``; the first and last rows are always kept, so a line keeps
    its extent. Uniform thinning, not min/max preserving: a single spike between two kept rows
    can vanish, which is acceptable for an overview chart (tables carry the exact figures).
    """
    if not columns:
        return []
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise ValueError("columns of different lengths")
    idx = downsample_indices(n, max_points)
    return [[c[i] for i in idx] for c in columns]


def chart_points(chart: Chart) -> int:
    """How many drawable data points ``chart`` holds (finite y values over all its traces)."""
    total = 0
    for trace in chart.traces:
        ys = trace.get("y")
        if ys is None:
            continue
        total += sum(1 for v in ys if finite(v) is not None)
    return total


def _axis(title: str) -> dict[str, Any]:
    return {"title": {"text": title}}


def _title(title: str, invalid_reason: str | None) -> str:
    return f"{invalid_label(invalid_reason)} — {title}" if invalid_reason else title


def histogram_and_cdf(key: str, title: str, values: Sequence[Any], unit: str, *,
                      invalid_reason: str | None = None, bins: int = 40,
                      max_points: int = MAX_POINTS) -> list[Chart]:
    """A histogram and an empirical CDF of ``values``: two charts keyed ``<key>-hist`` and
    ``<key>-cdf``.

    The histogram is binned here (numpy, at most ``bins`` equal-width bins; its bar heights sum
    to the number of finite values); hovering a bar shows its range and count. The CDF is the
    sorted values against their rank fraction, as steps, thinned to ``max_points``. Non-finite
    values are dropped (and counted in the charts' note). ``invalid_reason`` (e.g. a gauge
    finding's code) marks both charts: their title and trace names start with
    ``"INVALID: <reason>"``, and the bars are drawn grey.

    Returns ``[]`` when no value is finite: the caller says why in a Text.
    """
    clean = np.array([f for f in (finite(v) for v in values) if f is not None], dtype=float)
    dropped = len(values) - clean.size
    if clean.size == 0:
        return []
    n_bins = max(1, min(bins, int(np.unique(clean).size)))
    counts, edges = np.histogram(clean, bins=n_bins)
    lo, hi = edges[:-1], edges[1:]
    name = title if not invalid_reason else f"{invalid_label(invalid_reason)} {title}"
    note_parts = [f"{clean.size} values"]
    if dropped:
        note_parts.append(f"{dropped} not finite, left out")
    if invalid_reason:
        note_parts.append(f"{invalid_label(invalid_reason)}: the gauge refused this figure")
    note = "; ".join(note_parts)
    u = f" {unit}" if unit else ""
    hist = Chart(
        key=f"{key}-hist",
        title=_title(f"{title} — histogram", invalid_reason),
        traces=[{
            "type": "bar",
            "name": name,
            "x": [float(v) for v in (lo + hi) / 2],
            "y": [int(c) for c in counts],
            "width": [float(v) for v in (hi - lo)],
            "customdata": [[float(a), float(b)] for a, b in zip(lo, hi, strict=True)],
            "hovertemplate": (f"%{{customdata[0]:.4g}} – %{{customdata[1]:.4g}}{u}"
                              "<br>%{y} requests<extra>%{fullData.name}</extra>"),
            "marker": {"color": "#9e9e9e"} if invalid_reason else {},
        }],
        layout={"xaxis": _axis(f"{title} ({unit})" if unit else title),
                "yaxis": _axis("requests"), "bargap": 0.02, "showlegend": False},
        note=note,
    )
    ordered = np.sort(clean)
    frac = np.arange(1, ordered.size + 1) / ordered.size
    xs, ys = downsample([float(v) for v in ordered], [float(v) for v in frac],
                        max_points=max_points)
    cdf = Chart(
        key=f"{key}-cdf",
        title=_title(f"{title} — CDF", invalid_reason),
        traces=[{
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": xs,
            "y": ys,
            "line": {"shape": "hv", **({"dash": "dot", "color": "#9e9e9e"}
                                        if invalid_reason else {})},
            "hovertemplate": f"%{{x:.4g}}{u}<br>%{{y:.1%}} at or below<extra>%{{fullData.name}}"
                             "</extra>",
        }],
        layout={"xaxis": _axis(f"{title} ({unit})" if unit else title),
                "yaxis": {**_axis("fraction of requests"), "range": [0, 1.02],
                          "tickformat": ".0%"},
                "showlegend": False},
        note=note,
    )
    return [hist, cdf]


def percentile_chart(key: str, title: str, percentiles: Mapping[str, Any], unit: str, *,
                     invalid_reason: str | None = None) -> Chart:
    """Bars of a few summary percentiles (e.g. ``{"p50": 12.0, "p90": 30.1, "p99": 80.2}``),
    for when only the summary, not the per-request values, is known.

    Labels are kept in the given order; non-finite values are left out. ``invalid_reason``
    marks the chart as :func:`histogram_and_cdf` does. Raises :class:`ValueError` when no value
    is finite.
    """
    items = [(label, f) for label, v in percentiles.items() if (f := finite(v)) is not None]
    if not items:
        raise ValueError(f"no finite percentile for {title}")
    name = title if not invalid_reason else f"{invalid_label(invalid_reason)} {title}"
    u = f" {unit}" if unit else ""
    return Chart(
        key=key,
        title=_title(f"{title} — percentiles", invalid_reason),
        traces=[{
            "type": "bar",
            "name": name,
            "x": [label for label, _ in items],
            "y": [v for _, v in items],
            "hovertemplate": f"%{{x}}: %{{y:.4g}}{u}<extra>%{{fullData.name}}</extra>",
            "marker": {"color": "#9e9e9e"} if invalid_reason else {},
        }],
        layout={"xaxis": _axis("percentile"),
                "yaxis": _axis(f"{title} ({unit})" if unit else title), "showlegend": False},
        note=f"{invalid_label(invalid_reason)}: the gauge refused this figure"
        if invalid_reason else "",
    )


def vline_layout(markers: Sequence[Marker]) -> dict[str, Any]:
    """Layout ``shapes`` (dashed vertical lines across the whole plot height) and
    ``annotations`` (each marker's label at the top, its hint on hover) for ``markers``.

    Merge the result into a chart's layout; markers at a non-finite ``x`` are skipped. Both
    lists are in ``x`` order (not the given order); labels alternate between two rows.
    """
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    placed = sorted((m for m in markers if finite(m.x) is not None), key=lambda m: float(m.x))
    for i, m in enumerate(placed):
        x = float(m.x)
        color = VLINE_COLORS.get(m.tone, VLINE_COLORS[""])
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x,
                       "y0": 0, "y1": 1, "line": {"color": color, "width": 1.5,
                                                  "dash": m.dash}})
        annotations.append({"x": x, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom",
                            "text": m.label, "hovertext": m.hint or m.label,
                            "showarrow": False, "font": {"size": 10, "color": color},
                            # neighbours' labels alternate between two rows, so an onset and
                            # its alarm a window later stay readable
                            "yshift": -14 * (i % 2)})
    return {"shapes": shapes, "annotations": annotations}


def time_series(key: str, title: str, series: Sequence[Series], *, x_title: str, y_title: str,
                markers: Sequence[Marker] = (), note: str = "",
                max_points: int = MAX_POINTS) -> Chart:
    """Lines (or points) over time, one trace per :class:`Series`, with vertical
    :class:`Marker` lines for events.

    Each series is thinned to ``max_points`` (:func:`downsample`); hovering a point shows the
    series name, x, y and the point's ``hovertext`` when given. Series without a finite point
    are left out. ``x_title`` and ``y_title`` should carry units (``"time since start (s)"``).
    Raises :class:`ValueError` when no series has a finite point (say why in a Text instead).
    """
    traces: list[dict[str, Any]] = []
    for s in series:
        if len(s.x) != len(s.y):
            raise ValueError(f"series {s.name!r}: {len(s.x)} x values but {len(s.y)} y values")
        if s.hovertext is not None and len(s.hovertext) != len(s.x):
            raise ValueError(f"series {s.name!r}: hovertext length differs from x")
        xs = [finite(v) for v in s.x]
        ys = [finite(v) for v in s.y]
        if not any(y is not None for y in ys):
            continue
        cols: list[Sequence[Any]] = [xs, ys]
        if s.hovertext is not None:
            cols.append(list(s.hovertext))
        thinned = downsample(*cols, max_points=max_points)
        trace: dict[str, Any] = {"type": "scatter", "mode": s.mode, "name": s.name,
                                 "x": thinned[0], "y": thinned[1]}
        template = "%{x:.4g}, %{y:.4g}"
        if s.hovertext is not None:
            trace["hovertext"] = thinned[2]
            template += "<br>%{hovertext}"
        trace["hovertemplate"] = template + "<extra>%{fullData.name}</extra>"
        line: dict[str, Any] = {"shape": s.shape}
        if s.dash:
            line["dash"] = s.dash
        if s.color:
            line["color"] = s.color
        if "lines" in s.mode:
            trace["line"] = line
        marker: dict[str, Any] = {}
        if s.symbol:
            marker["symbol"] = s.symbol
        if s.color:
            marker["color"] = s.color
        if "markers" in s.mode:
            trace["marker"] = {"size": 8, **marker}
        traces.append(trace)
    if not traces:
        raise ValueError(f"no data point to draw for {title}")
    layout: dict[str, Any] = {"xaxis": _axis(x_title), "yaxis": _axis(y_title),
                              "hovermode": "closest", **vline_layout(markers)}
    if markers:
        layout["margin"] = {"t": 60}
    return Chart(key=key, title=title, traces=traces, layout=layout, note=note)
