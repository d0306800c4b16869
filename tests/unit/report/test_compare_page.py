"""The comparison as a page and as console tables: figures side by side, invalid ones marked,
each difference with the gate's verdict or the reason there is none."""

from __future__ import annotations

import io
import math
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console

from tunegate.report.comparability import Load
from tunegate.report.compare_model import Comparable
from tunegate.report.compare_page import (
    compare_page,
    comparison_page,
    console_notes,
    console_table,
    inputs_table,
    metric_title,
)
from tunegate.report.compare_verdicts import compare
from tunegate.report.offline import remote_resources
from tunegate.report.page import Chart, Mark, Page, Table, Text
from tunegate.report.render import render_html, write_html

METRICS = ("output_throughput", "mean_ttft_ms")


def _input(label: str, throughput: float, ttft: float, n: int | None, seed: int = 0,
           **changes: object) -> Comparable:
    rng = np.random.default_rng(seed)
    means = {"output_throughput": throughput, "mean_ttft_ms": ttft}
    repeats = None if n is None else {
        m: tuple(float(x) for x in v * (1 + 0.01 * rng.standard_normal(n)))
        for m, v in means.items()}
    figures = {m: statistics.fmean(r) for m, r in repeats.items()} if repeats else means
    base = Comparable(label=label, kind="tune", source=f"/runs/{label}", figures=figures,
                      repeats=repeats, valid=True, load=Load(64.0, 16.0, 4, math.inf, True))
    return replace(base, **changes)  # type: ignore[arg-type]


def _table(page: Page, key: str) -> Table:
    section = next(s for s in page.sections if s.key == key)
    return next(b for b in section.blocks if isinstance(b, Table))


def _cells(table: Table, column: str) -> list[object]:
    index = list(table.columns).index(column)
    return [row[index] for row in table.rows]


def test_the_figures_stand_side_by_side_with_invalid_ones_marked() -> None:
    broken = _input("c.json", 900.0, 5000.0, None, kind="vllm", valid=False,
                    invalid={"mean_ttft_ms": ("ttft_equals_e2el",)})
    page = compare_page([_input("a", 1000.0, 50.0, None), _input("b", 1100.0, 40.0, None),
                         broken], METRICS)
    figures = _table(page, "figures")
    assert list(figures.columns) == ["metric", "a (reference)", "b", "c.json"]
    assert [row[0] for row in figures.rows] == [metric_title(m) for m in METRICS]
    assert figures.rows[1][3] == Mark("5000", "invalid", "invalid: ttft_equals_e2el")
    assert figures.rows[0][3] == 900.0
    gauge = _cells(_table(page, "inputs"), "gauge")
    assert gauge[2] == Mark("INVALID", "invalid", "ttft_equals_e2el")


def test_repeats_give_a_verdict_with_its_evidence_on_hover() -> None:
    page = compare_page([_input("a", 1000.0, 50.0, 8, seed=1),
                         _input("b", 1200.0, 80.0, 8, seed=2)], METRICS)
    verdicts = _cells(_table(page, "vs-1"), "verdict")
    assert [(m.text, m.tone) for m in verdicts if isinstance(m, Mark)] == [
        ("improved", "good"), ("regressed", "bad")]
    assert all(isinstance(m, Mark) and m.hint.startswith("change ") and "BH p" in m.hint
               for m in verdicts)
    assert page.verdict.tone == "bad" and "1 improved, 1 regressed" in page.verdict.body


def test_one_measurement_each_says_so_instead_of_a_verdict() -> None:
    page = compare_page([_input("a", 1000.0, 50.0, None), _input("b", 1200.0, 40.0, None)],
                        METRICS)
    table = _table(page, "vs-1")
    assert _cells(table, "change")[0] == Mark("+20.0%")
    assert {(m.text, m.hint) for m in _cells(table, "verdict") if isinstance(m, Mark)} == {
        ("no verdict", "one measurement each: no verdict")}
    assert "b: no verdict (one measurement each: no verdict)" in page.verdict.body


def test_an_input_that_cannot_be_compared_says_why_and_draws_nothing() -> None:
    other = _input("b", 1200.0, 40.0, None, load=Load(64.0, 16.0, 8, math.inf, True))
    page = compare_page([_input("a", 1000.0, 50.0, None), other], METRICS)
    section = next(s for s in page.sections if s.key == "vs-1")
    first = section.blocks[0]
    assert isinstance(first, Text) and first.tone == "bad"
    assert first.body == ("Not comparable with a: workload max concurrency: 4 (a) vs 8 (b).")
    assert not page.charts()  # no change to draw: said in words
    changes = next(s for s in page.sections if s.key == "changes")
    assert isinstance(changes.blocks[0], Text)
    assert page.verdict.tone == "warn"


def test_the_page_renders_offline_with_the_changes_chart(tmp_path: Path) -> None:
    comparison = compare([_input("a", 1000.0, 50.0, 4, seed=1),
                          _input("b", 1100.0, 45.0, 4, seed=2)], METRICS)
    page = comparison_page(comparison)
    [chart] = page.charts()
    assert isinstance(chart, Chart) and chart.key == "changes-bars"
    assert chart.traces[0]["y"] == [100 * d.change for d in comparison.pairs[0].metrics
                                    if d.change is not None]
    html = render_html(page)
    assert remote_resources(html) == [] and "Figures side by side" in html
    assert write_html(page, tmp_path / "compare.html").stat().st_size > 0


def _text(*renderables: object) -> str:
    console = Console(file=io.StringIO(), width=250, color_system=None)
    for r in renderables:
        console.print(r)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_the_console_shows_the_same_side_by_side() -> None:
    broken = _input("c.json", 900.0, 5000.0, None, invalid={"mean_ttft_ms": ("ttft_equals_e2el",)})
    comparison = compare([_input("a", 1000.0, 50.0, None), _input("b", 1100.0, 45.0, None),
                          broken], METRICS)
    out = _text(inputs_table(comparison), console_table(comparison),
                *console_notes(comparison))
    assert "a (reference)" in out and "+10.0%" in out and "no verdict" in out
    assert "5,000 INVALID" in out
    assert "b: one measurement each: no verdict" in out
    assert ("c.json: mean TTFT (ms): not comparable: mean_ttft_ms of c.json is invalid "
            "(ttft_equals_e2el)") in out
