"""Shared chart builders: never an empty chart, bounded size, invalid figures marked."""

from __future__ import annotations

import json
import math

import pytest

from tunegate.report.charts import (
    Marker,
    Series,
    chart_points,
    downsample,
    downsample_indices,
    histogram_and_cdf,
    percentile_chart,
    time_series,
    vline_layout,
)
from tunegate.report.page import Chart


def _json(chart: Chart) -> str:
    return json.dumps({"traces": chart.traces, "layout": chart.layout}, allow_nan=False)


def test_histogram_counts_add_up_to_the_finite_values_and_the_rest_is_noted() -> None:
    values = [1.0, 2.0, 2.5, 3.0, 10.0, math.nan, None, math.inf]
    hist, cdf = histogram_and_cdf("t", "TTFT", values, "ms")
    assert (hist.key, cdf.key) == ("t-hist", "t-cdf")
    assert sum(hist.traces[0]["y"]) == 5
    assert "3 not finite" in hist.note
    _json(hist), _json(cdf)  # JSON-ready: no NaN or infinity left


def test_histogram_of_one_repeated_value_is_one_bar() -> None:
    hist, _ = histogram_and_cdf("t", "TTFT", [7.0] * 12, "ms")
    assert hist.traces[0]["y"] == [12]


def test_no_finite_value_gives_no_chart() -> None:
    assert histogram_and_cdf("t", "TTFT", [None, math.nan], "ms") == []
    assert histogram_and_cdf("t", "TTFT", [], "ms") == []


def test_cdf_is_sorted_ends_at_one_and_is_capped() -> None:
    values = [float(v % 997) for v in range(10_000)]
    _, cdf = histogram_and_cdf("t", "ITL", values, "ms", max_points=500)
    xs, ys = cdf.traces[0]["x"], cdf.traces[0]["y"]
    assert len(xs) <= 500
    assert xs == sorted(xs) and ys == sorted(ys)
    assert ys[-1] == 1.0 and xs[0] == 0.0 and xs[-1] == 996.0


def test_invalid_reason_marks_title_and_trace_of_both_charts() -> None:
    for chart in histogram_and_cdf("t", "TTFT", [1.0, 2.0], "ms",
                                   invalid_reason="ttft_equals_e2el"):
        assert chart.title.startswith("INVALID: ttft_equals_e2el")
        assert chart.traces[0]["name"].startswith("INVALID: ttft_equals_e2el")
    chart = percentile_chart("p", "TPOT", {"p50": 1.0}, "ms", invalid_reason="x_code")
    assert "INVALID: x_code" in chart.title and "INVALID: x_code" in chart.traces[0]["name"]


def test_percentile_chart_keeps_order_drops_missing_and_refuses_nothing() -> None:
    chart = percentile_chart("p", "E2EL", {"p50": 3.0, "p90": None, "p99": 9.0}, "ms")
    assert chart.traces[0]["x"] == ["p50", "p99"] and chart.traces[0]["y"] == [3.0, 9.0]
    with pytest.raises(ValueError):
        percentile_chart("p", "E2EL", {"p50": None}, "ms")


def test_downsample_keeps_ends_and_bounds_the_size() -> None:
    xs = list(range(10_001))
    ys = [x * 2 for x in xs]
    sx, sy = downsample(xs, ys, max_points=100)
    assert len(sx) <= 100 and sx[0] == 0 and sx[-1] == 10_000
    assert all(y == 2 * x for x, y in zip(sx, sy, strict=True))
    assert downsample_indices(5, 100) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        downsample([1, 2], [1])


def test_time_series_draws_markers_as_vertical_lines_with_hover_labels() -> None:
    chart = time_series("k", "Throughput", [Series("tok/s", [0, 1, 2], [5.0, 6.0, 4.0],
                                                   hovertext=["a", "b", "c"])],
                        x_title="time (s)", y_title="tok/s",
                        markers=[Marker(1.5, "change w2", "a longer hint", "bad")])
    (shape,) = chart.layout["shapes"]
    assert shape["x0"] == shape["x1"] == 1.5 and shape["yref"] == "paper"
    (note,) = chart.layout["annotations"]
    assert note["text"] == "change w2" and note["hovertext"] == "a longer hint"
    assert chart.traces[0]["hovertext"] == ["a", "b", "c"]
    assert "%{hovertext}" in chart.traces[0]["hovertemplate"]
    assert chart_points(chart) == 3
    _json(chart)


def test_time_series_leaves_out_empty_series_and_refuses_to_draw_nothing() -> None:
    chart = time_series("k", "T", [Series("empty", [0, 1], [None, math.nan]),
                                   Series("full", [0, 1], [1.0, 2.0])],
                        x_title="s", y_title="v")
    assert [t["name"] for t in chart.traces] == ["full"]
    with pytest.raises(ValueError):
        time_series("k", "T", [Series("empty", [0], [None])], x_title="s", y_title="v")
    with pytest.raises(ValueError):
        time_series("k", "T", [], x_title="s", y_title="v")


def test_time_series_thins_long_series() -> None:
    n = 50_000
    chart = time_series("k", "T", [Series("s", list(range(n)), [1.0] * n)],
                        x_title="s", y_title="v", max_points=1000)
    assert len(chart.traces[0]["x"]) <= 1000 and chart.traces[0]["x"][-1] == n - 1


def test_vline_layout_skips_non_finite_markers() -> None:
    layout = vline_layout([Marker(math.nan, "x"), Marker(2.0, "y")])
    assert [s["x0"] for s in layout["shapes"]] == [2.0]
