"""``benchmarks/tuner_cost.py`` keeps running: a few seeds of each world, and its engine's records.

The benchmark is the issue's evidence that the sequential gate saves repeats without losing
error control; this runs it at a size that proves only that it still works end to end and
counts what it says it counts, not its figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tunegate.gauge import validate_records
from tunegate.metrics import summarize
from tunegate.testing import load_script
from tunegate.workload import build_workload

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "tuner_cost.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(PATH)


@pytest.fixture(scope="module")
def result(bench: ModuleType) -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bench.main(["--json", "--seeds", "1", "--aa-seeds", "1", "--power-seeds", "2",
                           "--budget", "2", "--requests", "20"]) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, "--json prints only the JSON object"
    data: dict[str, Any] = json.loads(lines[0])
    return data


@pytest.mark.parametrize("throughput", [950.0, 1000.0, 1050.0])
def test_controlled_records_pass_the_gauge_at_the_asked_throughput(
        bench: ModuleType, throughput: float) -> None:
    workload = build_workload(bench.controlled_config(0, 1, True).workload)
    records = bench.records_at(workload, throughput)
    report = validate_records(records, None, max_concurrency=workload.schedule.max_concurrency)
    assert report.valid, report.codes()
    assert summarize(records)["output_throughput"] == pytest.approx(throughput, rel=1e-6)


def test_reports_every_figure_the_issue_asks_for(result: dict[str, Any]) -> None:
    for key in ("repeats_fixed", "repeats_sequential", "repeats_ratio"):
        assert isinstance(result[key], float)
    for key in ("false_accept_rate", "power_5pct", "repeats_aa", "repeats_5pct",
                "measurements_per_run"):
        assert set(result[key]) == {"fixed", "sequential"}
    assert set(result["targets"]) == {"repeats_ratio", "false_accept_rate_fixed",
                                      "false_accept_rate_sequential", "power_5pct_fixed",
                                      "power_5pct_sequential"}


def test_counts_the_candidate_arm_of_each_gate_decision(
        bench: ModuleType, result: dict[str, Any]) -> None:
    """The fixed gate judges exactly the planned repeats; the sequential one never more."""
    assert result["aa"]["fixed"]["gate_decisions"] == bench.AA_BUDGET
    assert result["power"]["fixed"]["gate_decisions"] == 2
    assert result["repeats_aa"]["fixed"] == result["repeats_5pct"]["fixed"] == bench.REPEATS
    assert result["repeats_fixed"] == bench.REPEATS
    for name in ("repeats_aa", "repeats_5pct"):
        assert 2 <= result[name]["sequential"] <= bench.REPEATS
    assert 2 <= result["repeats_sequential"] <= bench.REPEATS


def test_every_run_spends_its_budget(result: dict[str, Any]) -> None:
    """No run ends early (aborted, abnormal): the worlds measure what they claim to."""
    for world in ("simulator", "aa", "power"):
        for mode in ("fixed", "sequential"):
            row = result[world][mode]
            assert row["end_states"] == {"budget_exhausted": row["runs"]}, (world, mode)
            assert row["measurements_per_run"] >= row["measurements_by_role"]["baseline"]
