"""How big and how slow the HTML report of a long tuning run is.

    .venv/bin/python benchmarks/report_size.py [--trials 100] [--json]

Runs the real tuner on the simulator's ``fast`` scenario (the run of
:mod:`decision_log_size`: virtual clock, three parameters, two repeats per config), then builds
and renders its report the way ``tunegate report RUN_DIR`` does, and prints side by side, from
this one run: the file's size, the part that is plotly.js (the same for every report), the
charts' data and the rest (tables, text); the run directory's size for scale; and the time to
read the run and build the page against the time to render it. The target: a 100-trial page's
own content (charts and tables) stays under one megabyte, so the file is plotly.js plus a
fraction of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from decision_log_size import config
from tunegate.report.render import render_html
from tunegate.report.run_page import run_page
from tunegate.tuner.driver import Tuner


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def measure(trials: int) -> dict[str, Any]:
    from plotly.offline import get_plotlyjs

    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    run_dir = scratch / "run"
    try:
        started = time.perf_counter()
        rs = Tuner(config(trials), run_dir, lock_dir=scratch / "locks").run()
        tuned = time.perf_counter() - started
        started = time.perf_counter()
        page = run_page(run_dir)
        built = time.perf_counter() - started
        started = time.perf_counter()
        html = render_html(page)
        rendered = time.perf_counter() - started
        run_bytes = _tree_bytes(run_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    total = len(html.encode())
    library = len(get_plotlyjs().encode())
    charts = json.dumps([{"traces": c.traces, "layout": c.layout} for c in page.charts()],
                        separators=(",", ":"), default=str)
    chart_bytes = len(charts.encode())
    return {"trials": rs.trials, "state": rs.state.value, "charts": len(page.charts()),
            "html_bytes": total, "plotly_js_bytes": library, "chart_data_bytes": chart_bytes,
            "other_bytes": total - library - chart_bytes,
            "content_bytes": total - library,
            "content_over_library": round((total - library) / library, 3),
            "run_dir_bytes": run_bytes, "tune_s": round(tuned, 1),
            "read_and_build_s": round(built, 2), "render_s": round(rendered, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = measure(args.trials)
    if not args.json:
        mib = 1024 * 1024
        print(f"{result['trials']} trials ({result['state']}), {result['charts']} charts: "
              f"report.html {result['html_bytes'] / mib:.2f} MiB = plotly.js "
              f"{result['plotly_js_bytes'] / mib:.2f} MiB + chart data "
              f"{result['chart_data_bytes'] / mib:.2f} MiB + tables and text "
              f"{result['other_bytes'] / mib:.2f} MiB (content/library "
              f"{result['content_over_library']}); run directory "
              f"{result['run_dir_bytes'] / mib:.1f} MiB; read and build "
              f"{result['read_and_build_s']} s, render {result['render_s']} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
