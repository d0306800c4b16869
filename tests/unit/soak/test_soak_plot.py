"""The soak's plot: one panel per series with a value, change points marked, invalid windows
shown but never joined, one-line errors for nothing to draw or nowhere to write."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib.image
import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.soak.plot import Marker, _markers, _panels, _points, _regimes, _time_unit, plot_soak
from tunegate.stats.drift.verdict import SeriesSpec, SoakWatch

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SPECS = [SeriesSpec("output_throughput", "objective", "higher"),
         SeriesSpec("p99_ttft_ms", "objective", "lower"),
         SeriesSpec("kv_cache_usage_peak", "watermark", "lower", limit=1.0),
         SeriesSpec("preemptions", "incident", "lower")]


def _change(metric: str, t_s: float, *, worse: bool = True, size: float | None = -0.08,
            detectors: tuple[str, ...] = ("cusum", "adwin")) -> dict[str, Any]:
    window = int(t_s // 60)
    return {"metric": metric, "window": window, "t_s": t_s, "alarm_window": window + 2,
            "alarm_t_s": t_s + 120.0, "before": 1776.0, "after": 1634.0, "size": size,
            "direction": "higher", "worse": worse, "detectors": list(detectors)}


def _document(windows: list[dict[str, Any]], *, duration_s: float = 7200.0,
              specs: list[SeriesSpec] = SPECS, **rest: Any) -> dict[str, Any]:
    return {"target": {"description": "sim:drift-step"},
            "plan": {"duration_s": duration_s, "window_s": 60.0},
            "series": [{"name": s.name, "kind": s.kind, "direction": s.direction,
                        "limit": s.limit} for s in specs],
            "windows": windows, "verdict": None, "change_points": [],
            "unconfirmed_change_points": [], **rest}


def _window(i: int, valid: bool = True, **values: float | None) -> dict[str, Any]:
    return {"window": i, "t_s": 60.0 * i, "valid": valid, "values": values}


def _step_soak(seed: int = 7) -> dict[str, Any]:
    """120 one-minute windows, throughput -8% at 3600 s, judged by the real SoakWatch; windows
    20 and 95 invalid (60% of the throughput) and, like the soak does, not fed to it."""
    rng = np.random.default_rng(seed)
    watch = SoakWatch(SPECS)
    windows = []
    for i in range(120):
        valid = i not in (20, 95)
        step = 0.92 if i >= 60 else 1.0
        values = {"output_throughput": step * 1776.0 * (1 + 0.02 * rng.standard_normal()),
                  "p99_ttft_ms": 88.0 * (1 + 0.03 * rng.standard_normal()),
                  "kv_cache_usage_peak": None, "preemptions": 0.0}
        if not valid:
            values["output_throughput"] *= 0.6
        else:
            watch.update(i, 60.0 * i, values)
        windows.append(_window(i, valid, **values))
    verdict = watch.verdict().to_dict()
    return _document(windows, verdict=verdict["verdict"],
                     change_points=verdict["change_points"],
                     unconfirmed_change_points=verdict["unconfirmed_change_points"])


def test_writes_a_png_that_reads_back_taller_with_more_panels(tmp_path: Path) -> None:
    soak = _step_soak()
    assert _panels(soak) == ["output_throughput", "p99_ttft_ms", "preemptions"]
    three = plot_soak(soak, tmp_path / "soak.png")
    assert three == tmp_path / "soak.png"
    assert three.read_bytes()[:8] == PNG_MAGIC
    one = _document([_window(i, output_throughput=100.0 + i) for i in range(30)],
                    duration_s=1800.0)
    plot_soak(one, tmp_path / "one.png")
    tall, short = matplotlib.image.imread(three), matplotlib.image.imread(tmp_path / "one.png")
    assert tall.shape[0] > short.shape[0] + 300 and tall.shape[1] == short.shape[1]
    assert not list(tmp_path.glob(".*.tmp"))  # the temporary file was renamed, not left


def test_the_real_step_is_marked_at_its_onset_in_red_with_its_alarm() -> None:
    soak = _step_soak()
    assert soak["verdict"] == "degraded"
    (onset, alarm) = _markers(soak, "output_throughput")
    assert (onset.style, onset.color) == ("onset", "tab:red")
    assert 3600.0 <= onset.t_s <= 3600.0 + 3 * 60.0  # found within three windows
    assert alarm.style == "alarm" and alarm.t_s >= onset.t_s and alarm.label.startswith("-")


def test_series_without_any_value_get_no_panel() -> None:
    soak = _document([_window(0, output_throughput=1.0, p99_ttft_ms=None),
                      _window(1, valid=False, output_throughput=2.0, preemptions=3.0)])
    # p99 None throughout, KV missing throughout; an invalid window's value still counts.
    assert _panels(soak) == ["output_throughput", "preemptions"]


def test_confirmed_changes_draw_onset_and_labelled_alarm_unconfirmed_a_grey_line() -> None:
    soak = _document([], change_points=[_change("output_throughput", 3600.0),
                                        _change("output_throughput", 1200.0, worse=False,
                                                size=0.031, detectors=("bocpd",)),
                                        _change("p99_ttft_ms", 600.0)],
                     unconfirmed_change_points=[_change("output_throughput", 5400.0)])
    assert _markers(soak, "output_throughput") == [
        Marker(1200.0, "onset", "tab:blue"), Marker(1320.0, "alarm", "tab:blue", "+3.1% [bocpd]"),
        Marker(3600.0, "onset", "tab:red"),
        Marker(3720.0, "alarm", "tab:red", "-8.0% [cusum+adwin]"),
        Marker(5400.0, "unconfirmed", "0.5")]
    assert _markers(soak, "preemptions") == []
    no_size = _document([], change_points=[_change("p99_ttft_ms", 60.0, size=None)])
    assert _markers(no_size, "p99_ttft_ms")[1].label == "n/a [cusum+adwin]"


def test_invalid_windows_are_kept_out_of_the_joined_line_and_the_regime_means() -> None:
    windows = [_window(i, output_throughput=10.0 if i < 3 else 20.0) for i in range(7)]
    windows[3] = _window(3, valid=False, output_throughput=1000.0)
    soak = _document(windows, change_points=[_change("output_throughput", 240.0)])
    joined = _points(soak, "output_throughput", True)
    assert [v for _, v in joined] == [10.0, 10.0, 10.0, 20.0, 20.0, 20.0]
    assert _points(soak, "output_throughput", False) == [(210.0, 1000.0)]
    assert joined[0] == (30.0, 10.0)  # drawn at the middle of its window
    assert _regimes(soak, "output_throughput") == [(0.0, 240.0, 10.0), (240.0, 420.0, 20.0)]


def test_regimes_need_a_confirmed_change() -> None:
    soak = _document([_window(i, output_throughput=float(i)) for i in range(5)],
                     unconfirmed_change_points=[_change("output_throughput", 120.0)])
    assert _regimes(soak, "output_throughput") == []


def test_time_axis_is_hours_only_beyond_two_hours() -> None:
    assert _time_unit(_document([], duration_s=7200.0)) == (60.0, "min")
    assert _time_unit(_document([], duration_s=7260.0)) == (3600.0, "h")
    running_past_plan = _document([_window(200, output_throughput=1.0)], duration_s=600.0)
    assert _time_unit(running_past_plan) == (3600.0, "h")


def test_nothing_to_draw_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "soak.png"
    with pytest.raises(ConfigError, match=r"soak\.png") as info:
        plot_soak(_document([_window(0, output_throughput=None)]), target)
    assert "\n" not in str(info.value) and not target.exists()


def test_a_missing_directory_is_a_config_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match="nope"):
        plot_soak(_step_soak(), missing / "soak.png")
    assert not missing.exists()


def test_importing_the_plot_module_does_not_load_matplotlib() -> None:
    code = "import sys, tunegate.soak.plot; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "False"
