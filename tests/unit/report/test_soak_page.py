"""The soak page: each watched series window by window, rejected windows apart, change points
marked at the window where the new regime began."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.report.charts import chart_points
from tunegate.report.page import Chart, Page, Table, Text
from tunegate.report.soak_page import evidence_windows, soak_page, soak_sections
from tunegate.soak.judge import judge_soak, series_to_dicts
from tunegate.soak.store import FORMAT
from tunegate.stats.drift import SeriesSpec

WINDOW_S = 60.0
REJECTED = 50


def _soak_doc() -> dict[str, Any]:
    """90 windows of 60 s; p99 TTFT rises 10% from window 30 (the drift verdict's own example),
    throughput stays flat; window 50 was rejected by the gauge (its value never watched)."""
    rng = np.random.default_rng(2)
    specs = [SeriesSpec("output_throughput", "objective", "higher"),
             SeriesSpec("p99_ttft_ms", "objective", "lower"),
             SeriesSpec("kv_cache_usage_peak", "watermark", limit=1.0)]
    rows: list[dict[str, Any]] = []
    for i in range(90):
        ttft = (1.10 if i >= 30 else 1.0) * 200.0 * (1 + 0.02 * rng.standard_normal())
        tput = 1000.0 * (1 + 0.02 * rng.standard_normal())
        rejected = i == REJECTED
        rows.append({
            "window": i, "t_s": WINDOW_S * i, "duration_s": WINDOW_S, "wall_time": None,
            "sent": 100, "failed": 0, "valid": not rejected,
            "findings": ["client_saturated"] if rejected else [], "invalid_metrics": [],
            "restarted": False, "short": False, "errors": [],
            "values": {"output_throughput": None if rejected else tput,
                       "p99_ttft_ms": None if rejected else ttft,
                       "kv_cache_usage_peak": 0.2},
            "change_points": []})
    verdict = judge_soak(rows, specs, tolerance=0.05, alpha=0.01)
    return {"format": FORMAT, "target": {"kind": "sim", "description": "sim:test"},
            "plan": {"duration_s": 90 * WINDOW_S, "window_s": WINDOW_S, "tolerance": 0.05,
                     "alpha": 0.01, "windows": 90},
            "status": "complete", "windows_done": 90, "valid_windows": 89, "trusted": True,
            "series": series_to_dicts(specs), "windows": rows, **verdict.to_dict()}


@pytest.fixture
def soak_dir(tmp_path: Path) -> Path:
    (tmp_path / "soak.json").write_text(json.dumps(_soak_doc()), encoding="utf-8")
    return tmp_path


def _chart(page: Page, key: str) -> Chart:
    return next(c for c in page.charts() if c.key == key)


def test_change_point_is_marked_at_the_onset_window(soak_dir: Path) -> None:
    page = soak_page(soak_dir)
    assert page.kind == "soak" and page.verdict.tone == "bad"  # +10% beyond the 5% tolerance
    assert page.verdict.body.startswith("soak degraded")
    chart = _chart(page, "soak-series-p99-ttft-ms")
    onsets = [s["x0"] for s in chart.layout["shapes"] if s["line"]["dash"] == "solid"]
    # minutes on the axis (a 1.5 h soak); window 30 starts at 30 * 60 s = 30 min
    assert onsets == [30.0]
    labels = [a["text"] for a in chart.layout["annotations"]]
    assert any(label.startswith("change w30") for label in labels)
    assert any(label.startswith("alarm w") for label in labels)
    # the flat series has no marker
    assert not _chart(page, "soak-series-output-throughput").layout["shapes"]


def test_one_point_per_window_at_its_middle_and_the_rejected_window_apart(
        soak_dir: Path) -> None:
    chart = _chart(soak_page(soak_dir), "soak-series-p99-ttft-ms")
    valid, = (t for t in chart.traces if t["name"] == "valid window")
    assert len(valid["x"]) == 89
    assert valid["x"][0] == pytest.approx(0.5)  # window 0 spans 0-1 min
    assert (REJECTED + 0.5) not in valid["x"]
    kv = _chart(soak_page(soak_dir), "soak-series-kv-cache-usage-peak")
    rejected, = (t for t in kv.traces if t["name"].startswith("rejected window"))
    assert rejected["x"] == [pytest.approx(REJECTED + 0.5)]
    assert "client_saturated" in rejected["hovertext"][0]
    assert any(t["name"] == "limit" for t in kv.traces)  # the watermark's limit


def test_every_chart_has_points_and_unique_keys(soak_dir: Path) -> None:
    page = soak_page(soak_dir)
    keys = [c.key for c in page.charts()]
    assert len(keys) == len(set(keys)) == 3
    assert all(chart_points(c) > 0 for c in page.charts())
    for chart in page.charts():
        json.dumps({"t": chart.traces, "l": chart.layout}, allow_nan=False)


def test_verdict_section_lists_evidence_change_points_and_windows(soak_dir: Path) -> None:
    sections = soak_sections(_soak_doc(), soak_dir)
    assert [s.key for s in sections] == ["soak-verdict", "soak-series", "soak-windows"]
    tables = {b.caption: b for b in sections[0].blocks if isinstance(b, Table)}
    assert any("p99_ttft_ms" in str(row[0]) for row in tables["Evidence"].rows)
    (cp,) = [r for r in tables["Change points"].rows if r[0] == "p99_ttft_ms"]
    assert cp[1] == "confirmed" and cp[2] == 30
    (windows,) = sections[2].blocks
    assert isinstance(windows, Table) and len(windows.rows) == 90
    assert windows.row_tones[REJECTED] == "warn"


def test_tuning_run_summary_entry_reads_rows_from_the_soak_dir(soak_dir: Path) -> None:
    entry = {"verdict": "degraded", "evidence": ["p99_ttft_ms: worse"], "windows": 90,
             "window_s": WINDOW_S, "directory": "soak"}
    sections = soak_sections(entry, soak_dir, key_prefix="run-soak")
    assert all(s.key.startswith("run-soak-") for s in sections)
    charts = [b for s in sections for b in s.blocks if isinstance(b, Chart)]
    assert charts and all(c.key.startswith("run-soak-") for c in charts)
    # without the directory: the verdict only, said so, and no chart
    alone = soak_sections(entry, None)
    assert not [b for s in alone for b in s.blocks if isinstance(b, Chart)]
    assert any("not at hand" in b.body for s in alone for b in s.blocks if isinstance(b, Text))


def test_soak_without_windows_draws_nothing_and_says_why() -> None:
    doc = {"format": FORMAT, "plan": {"window_s": 60}, "windows": [], "status": "running",
           "series": [{"name": "output_throughput", "kind": "objective"}]}
    sections = soak_sections(doc, None)
    assert not [b for s in sections for b in s.blocks if isinstance(b, Chart)]
    first = sections[0].blocks[0]
    assert isinstance(first, Text) and "not judged" in first.body


def test_untrusted_soak_says_so(soak_dir: Path) -> None:
    doc = _soak_doc() | {"verdict": "stable", "trusted": False}
    (soak_dir / "soak.json").write_text(json.dumps(doc), encoding="utf-8")
    verdict = soak_page(soak_dir).verdict
    assert verdict.tone == "bad" and "NOT TRUSTED" in verdict.body


def test_not_a_soak_dir_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        soak_page(tmp_path)


def test_evidence_lines_name_their_series_and_window() -> None:
    lines = ["p99_ttft_ms: +9.4% from window 11 (t=3442.55 s), beyond the 5% tolerance",
             "2 of 30 windows rejected by the gauge"]
    assert evidence_windows(lines) == [("p99_ttft_ms", 11, lines[0])]
