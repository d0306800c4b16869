"""Every kind of HTML report, opened in headless Chromium: it renders with no console error,
every chart drew (SVG with plotted traces and data, not an empty container), and the page
makes no network request.

Chromium is Debian's package, installed by ``make test`` (``scripts/install_chromium.sh``);
without one these tests are skipped with the reason, except under CI, where that is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunegate.report import build_page
from tunegate.report.offline import remote_resources
from tunegate.testing.browser import find_chromium, page_problems

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        reason = ("no Chromium: run `bash scripts/install_chromium.sh` (Debian's chromium "
                  "package) or set TUNEGATE_CHROMIUM")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _tunegate(*args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "tunegate", *args], capture_output=True,
                          text=True, timeout=280)
    assert proc.returncode in ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report was not written" not in proc.stderr, proc.stderr[-3000:]
    return proc


def _assert_renders(path: Path, chromium: str, *, at_least: int) -> None:
    assert remote_resources(path.read_text(encoding="utf-8")) == []
    assert page_problems(path, chromium, at_least=at_least) == []


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tunegate tune`` with no config: the seed story on the simulator, as a user runs it."""
    run_dir = tmp_path_factory.mktemp("report") / "run"
    _tunegate("tune", "--run-dir", str(run_dir), "--quiet")
    return run_dir


def test_the_default_runs_report_renders_every_chart(default_run: Path, chromium: str) -> None:
    report = default_run / "report.html"
    assert report.is_file()  # written at the end of `tune`
    _assert_renders(report, chromium, at_least=4)
    keys = {chart.key for chart in build_page(default_run).charts()}
    assert {"story-timeline", "search-pareto", "search-hypervolume"} <= keys
    assert any(key.startswith("repeats-") for key in keys)  # every repeat over time


def test_a_bench_results_report_renders_every_chart(tmp_path: Path, chromium: str) -> None:
    result = tmp_path / "bench.json"
    _tunegate("bench", "--sim", "seed", "--num-requests", "200", "--concurrency", "16",
              "--out", str(result), "--report", "--quiet")
    report = result.with_suffix(".html")
    assert report.is_file()
    _assert_renders(report, chromium, at_least=6)  # 4 distributions, in flight, throughput


def test_an_invalid_bench_results_report_renders_with_its_figures_marked(
        tmp_path: Path, chromium: str) -> None:
    result = tmp_path / "no-stream.json"
    _tunegate("bench", "--sim", "seed", "--num-requests", "100", "--no-stream",
              "--out", str(result), ok=(3,))
    report = tmp_path / "no-stream.html"
    _tunegate("report", str(result), "--out", str(report))
    _assert_renders(report, chromium, at_least=1)
    assert "tone-invalid" in report.read_text(encoding="utf-8")


def test_a_soaks_report_renders_every_chart(tmp_path: Path, chromium: str) -> None:
    out = tmp_path / "soak"
    _tunegate("soak", "--sim", "seed", "--duration", "1800", "--window", "300",
              "--out", str(out), "--quiet", "--no-plot", ok=(0, 6, 7))
    _assert_renders(out / "report.html", chromium, at_least=1)


def test_a_comparison_renders_every_chart(default_run: Path, tmp_path: Path,
                                          chromium: str) -> None:
    """Two bench results of one workload (compared, a chart of the changes) and the default
    run (another workload: not comparable, said in the page)."""
    results = []
    for seed in ("1", "2"):
        results.append(tmp_path / f"bench-{seed}.json")
        _tunegate("bench", "--sim", "seed", "--num-requests", "100", "--sim-seed", seed,
                  "--out", str(results[-1]), "--quiet")
    page = tmp_path / "compare.html"
    _tunegate("compare", *map(str, results), str(default_run), "--out", str(page))
    _assert_renders(page, chromium, at_least=1)
    assert "not comparable" in page.read_text(encoding="utf-8")
