"""``benchmarks/warm_start.py`` runs end to end and reports what it promises.

One seed with a budget of three evaluations on the virtual-clock simulator: the earlier run,
the cold, warm and partial arms, the judge and the report. The true optimum (minutes to build
on a fresh machine) is replaced by a stand-in: this test checks the benchmark's shape, not its
numbers (those are the benchmark's own question).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tunegate.testing import load_script

pytestmark = pytest.mark.integration

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "warm_start.py"
BUDGET = 3


def _benchmark() -> ModuleType:
    """``benchmarks/warm_start.py``, loaded by path (it is not a package)."""
    return load_script(BENCHMARK)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _benchmark()


@pytest.fixture(scope="module")
def report(bench: ModuleType) -> dict[str, Any]:
    """The last line of one tiny run, the optimum a stand-in (the baseline's noise-free goodput)."""
    se = bench.se
    problem = se.PROBLEMS["fast"]
    baseline = se.judge(problem, problem.space.default())
    assert baseline is not None
    stand_in = {"value": baseline["request_goodput"], "config": problem.space.default(),
                "evaluated": 0, "noise_free_value": baseline["request_goodput"]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(se, "enumerate_optimum", lambda problem, workers: dict(stand_in))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert bench.main(["--json", "--seeds", "1", "--budget", str(BUDGET),
                               "--workers", "1", "--problems", "fast"]) == 0
    parsed: dict[str, Any] = json.loads(out.getvalue().splitlines()[-1])
    return parsed


def test_the_report_names_each_arm_its_ratio_and_the_run(report: dict[str, Any]) -> None:
    assert {"cold_evals_to_95", "warm_evals_to_95", "partial_evals_to_95", "ratio",
            "ratio_partial", "plans", "seeds", "budget", "runtime_s"} <= set(report)
    assert (report["seeds"], report["budget"]) == (1, BUDGET)
    assert set(report["ratio"]) == {"fast"}


@pytest.mark.parametrize("arm", ["cold", "warm", "partial"])
def test_evals_to_95_is_an_evaluation_count_within_the_budget_or_null(
        report: dict[str, Any], arm: str) -> None:
    summary = report[f"{arm}_evals_to_95"]["fast"]
    (count,) = summary["per_seed"]
    assert count is None or (isinstance(count, int) and 1 <= count <= BUDGET)
    assert summary["median"] == (BUDGET + 1 if count is None else count)
    assert summary["reached"] == (count is not None)


def test_the_warm_arm_matches_exactly_and_the_partial_arm_is_down_weighted(
        bench: ModuleType) -> None:
    problem = bench.se.PROBLEMS["fast"]
    fp = bench.fingerprint(problem)
    earlier = {"id": "e", "recorded_at": None, "fingerprint": fp, "noise": {},
               "noise_repeats": 0,
               "trials": [{"trial": 0, "config": problem.space.default(), "value": 1.0,
                           "values": {}}]}
    exact = bench.plan_warm_start(fp, [earlier], bench.OBJECTIVE)["used"]
    partial = bench.plan_warm_start(bench.soft_changed(fp), [earlier], bench.OBJECTIVE)["used"]
    assert [(u["match"], u["weight"]) for u in exact] == [("exact", 1.0)]
    assert [(u["match"], u["weight"]) for u in partial] == [("partial", 0.5)]


def test_evals_to_target_is_the_first_evaluation_reaching_95_percent(bench: ModuleType) -> None:
    assert bench.evals_to_target([0.5, 0.96, 0.2, 0.99]) == 2
    assert bench.evals_to_target([0.5, 0.94]) is None
