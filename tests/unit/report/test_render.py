"""The renderer: one self-contained, escaped HTML document per page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tunegate.report.offline import remote_resources
from tunegate.report.page import Chart, KeyValues, Mark, Page, Section, Table, Text
from tunegate.report.render import chart_points, render_html, write_html

HOSTILE = "</script><script>alert(1)</script><img src=https://evil.example/x.png>"


def _page(*blocks: object, title: str = "run") -> Page:
    return Page(kind="bench", title=title, source="result.json", verdict=Text("valid", "good"),
                sections=[Section("main", "Main", list(blocks))])  # type: ignore[arg-type]


def _line(key: str = "c", n: int = 3) -> Chart:
    return Chart(key, "a line", [{"type": "scatter", "x": list(range(n)), "y": [1.0] * n}])


def _charts(html: str) -> list[dict[str, object]]:
    found = re.search(r'<script type="application/json" id="tg-charts">(.*?)</script>', html,
                      re.DOTALL)
    assert found is not None
    return list(json.loads(found.group(1)))


def test_everything_is_inline_and_nothing_is_fetched() -> None:
    html = render_html(_page(_line()))
    assert remote_resources(html) == []
    assert "<script src" not in html and "<link" not in html
    assert "Plotly.newPlot" in html  # the app script, inline
    assert "plotly.js v" in html  # the library itself, inline


def test_the_page_forbids_every_network_request() -> None:
    html = render_html(_page(_line()))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    assert "default-src 'none'" in policy.group(1)
    assert "connect-src" not in policy.group(1)  # falls back to 'none'


def test_text_from_a_config_or_an_engine_is_shown_not_interpreted() -> None:
    html = render_html(_page(Text(HOSTILE), Table(["param"], [[HOSTILE]]),
                             KeyValues([("model", HOSTILE)]), title=HOSTILE))
    assert "<script>alert(1)" not in html
    assert "<img src=https://evil" not in html
    assert remote_resources(html) == []
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in html


def test_chart_data_cannot_close_its_script_element() -> None:
    chart = Chart("c", "hover", [{"type": "scatter", "x": [1], "y": [2], "hovertext": [HOSTILE]}])
    html = render_html(_page(chart))
    assert _charts(html)[0]["traces"][0]["hovertext"] == [HOSTILE]  # type: ignore[index]
    assert html.count("<script>alert(1)") == 0


def test_non_finite_numbers_become_gaps() -> None:
    chart = Chart("c", "gaps", [{"type": "scatter", "x": [0, 1, 2],
                                 "y": [1.0, float("nan"), float("inf")]}])
    assert _charts(render_html(_page(chart)))[0]["traces"][0]["y"] == [  # type: ignore[index]
        1.0, None, None]


def test_layout_is_merged_over_the_defaults() -> None:
    chart = Chart("c", "t", [{"type": "bar", "x": ["a"], "y": [1]}],
                  {"height": 200, "margin": {"t": 5}, "xaxis": {"title": {"text": "ms"}}})
    layout = _charts(render_html(_page(chart)))[0]["layout"]
    assert layout["height"] == 200  # type: ignore[index]
    assert layout["margin"] == {"l": 64, "r": 24, "t": 5, "b": 56}  # type: ignore[index]
    assert layout["xaxis"] == {"automargin": True, "title": {"text": "ms"}}  # type: ignore[index]


def test_a_chart_without_a_data_point_is_refused() -> None:
    empty = Chart("c", "nothing", [{"type": "scatter", "x": [], "y": []}])
    assert chart_points(empty) == 0
    with pytest.raises(ValueError, match="no data point"):
        render_html(_page(empty))


def test_two_charts_with_one_key_are_refused() -> None:
    with pytest.raises(ValueError, match="two charts"):
        render_html(_page(_line("same"), _line("same")))


def test_cells_are_formatted_and_invalid_figures_marked() -> None:
    table = Table(["figure", "value"], [
        ["mean TTFT", Mark("9557.6", "invalid", "ttft_equals_e2el: TTFT == E2EL")],
        ["throughput", 2226.681146], ["errors", 0], ["missing", None], ["stream", True]])
    html = render_html(_page(table))
    assert 'class="tone-invalid" title="ttft_equals_e2el: TTFT == E2EL">9557.6<' in html
    assert ">2227<" in html and ">0<" in html and ">yes<" in html
    assert 'class="tone-muted">-<' in html


def test_every_section_is_in_the_table_of_contents() -> None:
    page = Page(kind="tune", title="t", source="s", verdict=Text("ok"),
                sections=[Section("story", "Story", [Text("a")]),
                          Section("pareto", "Pareto front", [Text("b")])])
    html = render_html(page)
    assert '<a href="#story">Story</a>' in html and '<section id="pareto">' in html


def test_the_file_is_written_private(tmp_path: Path) -> None:
    path = write_html(_page(_line()), tmp_path / "report.html")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
