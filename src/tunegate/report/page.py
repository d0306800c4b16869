"""What a report page holds, before it becomes HTML: sections of text, tables and charts.

Every page builder (a tuning run, a bench result, a soak, a comparison) returns a
:class:`Page`; :mod:`tunegate.report.render` alone turns one into a self-contained HTML file.
Builders never write HTML: every string here is plain text and is escaped when rendered, so
a config value or an engine's error message cannot inject markup into the page.

A :class:`Chart` is a Plotly figure as plain data (``traces`` and ``layout``, the dicts
``Plotly.newPlot`` takes). A builder never emits a chart without a data point: where there is
nothing to draw it says why in a :class:`Text` instead (an empty chart reads as "zero").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Block", "Cell", "Chart", "KeyValues", "Mark", "Page", "Section", "Table", "Text",
           "Tone"]

Tone = Literal["", "good", "bad", "warn", "invalid", "muted"]
"""How a piece of text is shown: ``invalid`` marks a figure the gauge refused (struck through,
with the reason on hover), ``bad`` / ``warn`` / ``good`` colour verdicts and severities."""


@dataclass(frozen=True)
class Mark:
    """A table cell or value with a tone and a hover hint (``title``)."""

    text: str
    tone: Tone = ""
    hint: str = ""


Cell = str | int | float | Mark | None
"""A table cell: numbers are formatted by the renderer (4 significant digits), ``None`` is
shown as a dash."""


@dataclass(frozen=True)
class Text:
    """A paragraph (plain text, escaped)."""

    body: str
    tone: Tone = ""


@dataclass(frozen=True)
class KeyValues:
    """A definition list: name, value pairs."""

    items: Sequence[tuple[str, Cell]]


@dataclass(frozen=True)
class Table:
    """Rows of cells under ``columns``; ``row_tones`` (when given, one per row) tints rows."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    caption: str = ""
    row_tones: Sequence[Tone] = ()


@dataclass(frozen=True)
class Chart:
    """One interactive Plotly chart. ``key`` is unique on the page (it names the container);
    ``traces`` must hold at least one data point; ``layout`` is merged over the page's
    defaults; ``note`` is a line of text under the chart."""

    key: str
    title: str
    traces: Sequence[dict[str, Any]]
    layout: dict[str, Any] = field(default_factory=dict)
    note: str = ""


Block = Text | KeyValues | Table | Chart


@dataclass(frozen=True)
class Section:
    """A titled part of the page; ``key`` is its anchor in the table of contents."""

    key: str
    title: str
    blocks: Sequence[Block]


@dataclass(frozen=True)
class Page:
    """A whole report: ``kind`` is ``tune``, ``bench``, ``soak`` or ``compare``; ``verdict`` is
    the one line at the top, with its tone; ``source`` names what the page was built from."""

    kind: str
    title: str
    source: str
    verdict: Text
    sections: Sequence[Section]
    generated_by: str = ""

    def charts(self) -> list[Chart]:
        """Every chart on the page, in order."""
        return [b for s in self.sections for b in s.blocks if isinstance(b, Chart)]
