"""The bench result page: invalid figures marked, distributions and time series from the records,
and a page that still stands (with no empty chart) when per-request data is missing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.loadgen.records import Outcome
from tunegate.report.bench_page import bench_page
from tunegate.report.bench_series import in_flight_series, output_throughput_series
from tunegate.report.charts import chart_points
from tunegate.report.page import Chart, KeyValues, Mark, Page, Section, Table, Text
from tunegate.testing.records import MS, make_record, token_times
from tunegate.workload import WorkloadConfig

DETAILED = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors", "records")


def _doc(stream: bool) -> dict[str, Any]:
    workload = WorkloadConfig.model_validate({
        "num_requests": 64, "concurrency": 8, "input_tokens": "fixed:128",
        "output_tokens": "fixed:32"})
    result = bench(BenchOptions(sim="fast", workload=workload,
                                target=TargetOptions(stream=stream)))
    return result.to_json(save_detailed=True)


@pytest.fixture(scope="module")
def streamed() -> dict[str, Any]:
    return _doc(stream=True)


@pytest.fixture(scope="module")
def not_streamed() -> dict[str, Any]:
    """stream=false: the gauge finds ttft_equals_e2el and refuses TTFT, TPOT, ITL..."""
    doc = _doc(stream=False)
    assert "ttft" in doc["validation"]["invalid_metrics"]
    return doc


def _section(page: Page, key: str) -> Section:
    return next(s for s in page.sections if s.key == key)


def _chart(page: Page, key: str) -> Chart:
    return next(c for c in page.charts() if c.key == key)


def _texts(page: Page) -> str:
    return "\n".join(b.body for s in page.sections for b in s.blocks if isinstance(b, Text))


def _table(section: Section, caption: str) -> Table:
    return next(b for b in section.blocks if isinstance(b, Table) and b.caption == caption)


def _row(table: Table, first: str) -> list[Any]:
    return list(next(r for r in table.rows if r[0] == first))


def _assert_sound(page: Page) -> None:
    """Every chart holds data, has a unique key and is JSON-ready."""
    keys = [c.key for c in page.charts()]
    assert len(keys) == len(set(keys))
    for chart in page.charts():
        assert chart_points(chart) > 0, chart.key
        json.dumps({"t": chart.traces, "l": chart.layout}, allow_nan=False)


def test_valid_run_has_a_good_verdict_and_full_distributions(streamed: Mapping[str, Any]) -> None:
    page = bench_page(streamed, source="bench.json")
    assert page.kind == "bench" and page.source == "bench.json"
    assert page.verdict.tone in ("good", "warn") and "INVALID" not in page.verdict.body
    _assert_sound(page)
    for stem in ("ttft", "tpot", "itl", "e2el"):
        assert not _chart(page, f"dist-{stem}-hist").title.startswith("INVALID")
        assert _chart(page, f"dist-{stem}-cdf").traces[0]["y"][-1] == 1.0


def test_histogram_counts_sum_to_the_number_of_requests(streamed: Mapping[str, Any]) -> None:
    page = bench_page(streamed, source="bench.json")
    completed = streamed["completed"]
    for stem in ("ttft", "e2el", "tpot"):
        assert sum(_chart(page, f"dist-{stem}-hist").traces[0]["y"]) == completed
    gaps = sum(len(r["content_times_ns"]) - 1 for r in streamed["records"]
               if r["outcome"] == "complete" and not r["warmup"])
    assert sum(_chart(page, "dist-itl-hist").traces[0]["y"]) == gaps


def test_invalid_figure_is_marked_with_its_finding(not_streamed: Mapping[str, Any]) -> None:
    page = bench_page(not_streamed, source="a.json")
    assert page.verdict.tone == "bad"
    assert page.verdict.body.startswith("INVALID") and "ttft_equals_e2el" in page.verdict.body
    latencies = _table(_section(page, "headline"), "Latencies and rates")
    for cell in _row(latencies, "TTFT")[1:-1]:
        assert isinstance(cell, Mark) and cell.tone == "invalid"
        assert "ttft_equals_e2el" in cell.hint
    # E2EL is still a measurement: a plain number
    assert all(isinstance(c, float) for c in _row(latencies, "E2EL")[1:-1])
    for key in ("dist-ttft-hist", "dist-ttft-cdf", "dist-tpot-hist"):
        chart = _chart(page, key)
        assert "INVALID: ttft_equals_e2el" in chart.title
        assert "INVALID: ttft_equals_e2el" in chart.traces[0]["name"]
    assert "INVALID" not in _chart(page, "dist-e2el-hist").title
    _assert_sound(page)


def test_findings_table_colours_severity_and_lists_not_checked(
        not_streamed: Mapping[str, Any]) -> None:
    page = bench_page(not_streamed, source="a.json")
    findings = _section(page, "findings")
    table = next(b for b in findings.blocks if isinstance(b, Table) and b.caption == "")
    assert list(table.columns) == ["code", "severity", "message", "remedy", "invalidates"]
    row = _row(table, "ttft_equals_e2el")
    assert row[1] == Mark("error", "bad") and "ttft" in row[4]
    assert _table(findings, "Not checked").rows


def test_without_per_request_data_no_empty_chart_and_a_pointer_to_save_detailed(
        not_streamed: Mapping[str, Any], streamed: Mapping[str, Any]) -> None:
    for full in (streamed, not_streamed):
        summary_only = {k: v for k, v in full.items() if k not in DETAILED}
        page = bench_page(summary_only, source="s.json")
        _assert_sound(page)
        assert "--save-detailed" in _texts(page)
        assert not [b for b in _section(page, "time").blocks if isinstance(b, Chart)]
        assert all(c.key.endswith("-pct") for c in _section(page, "dist").blocks
                   if isinstance(c, Chart))


def test_peer_file_with_only_vllm_arrays_gets_ttft_and_itl_distributions(
        streamed: Mapping[str, Any]) -> None:
    peer = {k: v for k, v in streamed.items() if k != "records"}
    page = bench_page(peer, source="vllm.json")
    assert sum(_chart(page, "dist-ttft-hist").traces[0]["y"]) == len(peer["ttfts"])
    assert _chart(page, "dist-e2el-pct")  # no per-request E2EL in vLLM's arrays
    _assert_sound(page)


def test_in_flight_is_a_step_count_of_send_to_end() -> None:
    records = [
        make_record(index=0, send_ns=0, times_ns=[10 * MS]),
        make_record(index=1, send_ns=5 * MS, times_ns=[20 * MS]),
        make_record(index=2, send_ns=10 * MS, times_ns=[15 * MS]),  # sent as #0 ends
        make_record(index=3, send_ns=0, times_ns=[99 * MS], warmup=True),  # not counted
    ]
    t, n, label = in_flight_series(records)
    assert label == "in flight"
    assert t == [0.0, 0.005, 0.010, 0.015, 0.020]
    assert n == [1.0, 2.0, 2.0, 1.0, 0.0]


def test_in_flight_binned_when_long_keeps_the_peak() -> None:
    records = [make_record(index=i, send_ns=i * 10 * MS, times_ns=[i * 10 * MS + 5 * MS])
               for i in range(3000)]
    records.append(make_record(index=3000, send_ns=1, times_ns=[30_000 * MS]))  # long one
    t, n, label = in_flight_series(records, max_points=500)
    assert label == "in flight (max per bin)"
    assert len(t) <= 500 and max(n) == 2.0 and t == sorted(t)


def test_output_throughput_bins_add_up_to_the_output_tokens() -> None:
    records = [make_record(index=i, send_ns=i * 100 * MS,
                           times_ns=token_times(50, 10, 20, send_ns=i * 100 * MS))
               for i in range(10)]
    records.append(make_record(index=10, send_ns=0, times_ns=token_times(5, 5, 7),
                               outcome=Outcome.TRUNCATED))  # failed: not counted
    t, tput, width = output_throughput_series(records, bins=40)
    assert len(t) == len(tput) == 40
    assert sum(v * width for v in tput) == pytest.approx(10 * 20)


def test_server_gauge_series_are_drawn_and_missing_scrapes_explained(
        streamed: Mapping[str, Any]) -> None:
    doc = dict(streamed)
    doc["server_metrics"] = {
        "source": "http://h/metrics", "engine": "vllm", "scrapes": 3,
        "gauges": {"vllm:num_requests_running": {"peak": 8, "mean": 6, "last": 0,
                                                 "series": [[0, 0], [2, 8], [4, 0]]},
                   "vllm:kv_cache_usage_perc": {"peak": 0.5, "mean": 0.3, "last": 0,
                                                "series": []}},
        "not_scraped": {"preemptions": "the engine does not export it"}}
    page = bench_page(doc, source="b.json")
    assert chart_points(_chart(page, "server-requests")) == 3
    assert "server-kv-cache" not in [c.key for c in page.charts()]  # no point: no chart
    assert "the engine does not export it" in _texts(page)
    del doc["server_metrics"]
    assert "not scraped" in _texts(bench_page(doc, source="b.json"))


def test_settings_and_fingerprint(streamed: Mapping[str, Any]) -> None:
    settings = _section(bench_page(streamed, source="b.json"), "settings")
    items = dict(next(b for b in settings.blocks if isinstance(b, KeyValues)).items)
    assert items["stream"] == "true" and items["concurrency"] == 8
    fingerprint = _table(settings, "Environment fingerprint")
    assert list(fingerprint.columns) == ["field", "value", "source", "how"]
    assert _row(fingerprint, "engine.name")[1] == "tunegate-simulator"


def test_a_bare_document_still_makes_a_page() -> None:
    page = bench_page({"model_id": "m"}, source="x.json")
    assert page.verdict.tone == "warn" and "NOT CHECKED" in page.verdict.body
    assert page.charts() == []
