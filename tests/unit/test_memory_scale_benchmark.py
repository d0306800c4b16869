"""``benchmarks/memory_scale.py`` reads a child's own peak RSS and states the growth per request."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from types import ModuleType

import pytest

from tunegate.testing import load_script

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "memory_scale.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(PATH)


def test_growth_is_the_slope_from_the_smallest_to_the_largest_size(bench: ModuleType) -> None:
    points = [bench.Point("virtual", 4000, 132.0, 1.0, 0),
              bench.Point("virtual", 1000, 85.0, 1.0, 0),
              bench.Point("virtual", 2000, 999.0, 1.0, 3)]  # invalid data still measured
    assert bench.growth_kib(points) == pytest.approx((132.0 - 85.0) * 1024 / 3000)


def test_a_failed_run_is_no_figure(bench: ModuleType) -> None:
    points = [bench.Point("http", 1000, 85.0, 1.0, 0), bench.Point("http", 4000, 50.0, 1.0, 2)]
    assert math.isnan(bench.growth_kib(points))


def test_the_child_is_a_whole_bench_run(bench: ModuleType) -> None:
    point = bench.measure("virtual", 50, ["--sim", "fast"])
    assert point.exit_code == 0
    assert point.peak_rss_mib > 20, "the child's own peak (a Python process with numpy)"


def test_rss_along_the_run_is_the_last_sample_at_each_fraction(bench: ModuleType) -> None:
    samples = [(0.1, 50.0), (0.6, 80.0), (1.1, 90.0), (1.9, 91.0)]
    assert bench.along_the_run(samples, 2.0) == {"25%": 50.0, "50%": 80.0, "75%": 90.0,
                                                 "95%": 91.0}


def test_sizes_that_are_not_request_counts_are_a_usage_error(bench: ModuleType) -> None:
    assert bench._sizes("1000, 4000") == [1000, 4000]
    assert bench._sizes("") == [], "an empty list skips that kind"
    for text in ("abc", "1000,-5", "0"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive request counts"):
            bench._sizes(text)
