"""A :class:`~tunegate.report.page.Page` as one self-contained HTML file.

Everything the page needs is inside it: the style, plotly.js (from the ``plotly`` Python
package, so its version is the installed one and nothing is vendored here), the charts' data
as JSON and a small script that draws them. A Content-Security-Policy in the page forbids
every network request (``default-src 'none'``), so a report opened from a mail attachment or
an air-gapped machine looks the same as anywhere else and cannot leak what it shows.

The template is Jinja2 with autoescaping: builders hand over plain text only, and a config
value or an engine's error message is shown, never interpreted. The charts' JSON is embedded
in a ``<script type="application/json">`` element with every ``<``, ``>`` and ``&`` written as a
JSON escape, so no string in it can close the element or open another.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from tunegate import __version__
from tunegate.files.atomic import atomic_write_text
from tunegate.report.page import Cell, Chart, KeyValues, Mark, Page, Table, Text

__all__ = ["LAYOUT_DEFAULTS", "chart_points", "render_html", "write_html"]

LAYOUT_DEFAULTS: dict[str, Any] = {
    "height": 380,
    "margin": {"l": 64, "r": 24, "t": 40, "b": 56},
    "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12},
    "hovermode": "closest",
    "paper_bgcolor": "#ffffff",
    "plot_bgcolor": "#fbfbfd",
    "legend": {"orientation": "h", "y": -0.22},
    "xaxis": {"automargin": True},
    "yaxis": {"automargin": True},  # long category labels (state names) are never cut
}
"""What every chart's layout starts from; a chart's own ``layout`` is merged over it."""

_DATA_KEYS = ("x", "y", "values", "z")
_JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
"""JSON escapes for the characters that could end or re-open the script element holding it."""


def chart_points(chart: Chart) -> int:
    """How many data points ``chart`` holds over all its traces (the longest of each trace's
    ``x`` / ``y`` / ``values``)."""
    total = 0
    for trace in chart.traces:
        lengths = [len(trace[k]) for k in _DATA_KEYS if isinstance(trace.get(k), list | tuple)]
        total += max(lengths, default=0)
    return total


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by ``None`` (JSON has neither; Plotly
    draws a gap for ``null``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _merged(defaults: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _chart_json(page: Page) -> str:
    charts = []
    seen: set[str] = set()
    for chart in page.charts():
        if chart.key in seen:
            raise ValueError(f"two charts named {chart.key!r} on one page")
        if chart_points(chart) == 0:
            raise ValueError(f"chart {chart.key!r} has no data point: say why in a Text instead")
        seen.add(chart.key)
        layout = _merged(LAYOUT_DEFAULTS, chart.layout)
        charts.append({"key": chart.key, "traces": list(chart.traces), "layout": layout})
    text = json.dumps(_finite(charts), allow_nan=False, separators=(",", ":"))
    return text.translate(_JSON_IN_HTML)


def _cell(value: Cell) -> Mark:
    """Every cell as a :class:`Mark`: numbers to 4 significant digits, ``None`` as a dash."""
    if isinstance(value, Mark):
        return value
    if value is None:
        return Mark("-", "muted")
    if isinstance(value, bool):
        return Mark("yes" if value else "no")
    if isinstance(value, int):
        return Mark(str(value))
    if isinstance(value, float):
        return Mark(f"{value:.4g}" if math.isfinite(value) else str(value))
    return Mark(str(value))


@cache
def _environment() -> jinja2.Environment:
    templates = resources.files("tunegate.report") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (templates / name).read_text("utf-8")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)
    env.filters["cell"] = _cell
    env.tests["text"] = lambda b: isinstance(b, Text)
    env.tests["table"] = lambda b: isinstance(b, Table)
    env.tests["keyvalues"] = lambda b: isinstance(b, KeyValues)
    env.tests["chart"] = lambda b: isinstance(b, Chart)
    return env


@cache
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    script = str(get_plotlyjs())
    if "</script" in script.lower():  # pragma: no cover - would end the inline element
        raise RuntimeError("plotly.js contains '</script': cannot inline it")
    return script


def _asset(name: str) -> str:
    return (resources.files("tunegate.report") / "templates" / name).read_text("utf-8")


def render_html(page: Page, *, now: dt.datetime | None = None) -> str:
    """The page as one HTML document (see the module docstring)."""
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    return _environment().get_template("page.html.j2").render(
        page=page, charts_json=Markup(_chart_json(page)),
        plotly_js=Markup(_plotly_js()),
        app_js=Markup(_asset("app.js")),
        style=Markup(_asset("style.css")),
        version=__version__, generated=when)


def write_html(page: Page, path: Path) -> Path:
    """Render ``page`` into ``path`` atomically (private, ``0600``, like every run file)."""
    atomic_write_text(path, render_html(page))
    return path
