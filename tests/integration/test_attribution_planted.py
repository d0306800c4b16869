"""The attribution finds a planted interaction and refuses to credit it to either half.

The simulator's ``planted-interaction`` scenario has a known answer: the environment variables
``PLANTED_A`` and ``PLANTED_B`` are worth nothing alone and +10% throughput together (a pure
interaction), ``PLANTED_SMALL`` is worth +1.5% alone, under the gate's 3% floor. A tuning run
whose kept config switched all three on must come out of the control experiment as: one
interaction ``PLANTED_A x PLANTED_B`` of about +10%, neither half "improves" on its own, and
``PLANTED_SMALL`` "not attributable" (a real effect smaller than the threshold is not reported
as a finding).

The run is the real :class:`~tunegate.tuner.driver.Tuner`: its LEASE and BASELINE states run as
in ``tunegate tune`` (the baseline is measured, its noise known), and the attribution runs
through :func:`tunegate.tuner.attribute.attribute` on the same service. Only the kept config is
set by hand, standing in for a search that kept all three variables (a search on this
scenario would not keep them deterministically). One seed here; how often the verdicts come
out right over many seeds is ``benchmarks/attribution_planted.py``'s question.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tunegate.tuner.attribute import ROLE
from tunegate.tuner.journal import read_journal

pytestmark = pytest.mark.integration

SEED = 1
PLANTED = ("PLANTED_A", "PLANTED_B", "PLANTED_SMALL")
INTERACTION = "PLANTED_A x PLANTED_B"
PLANTED_GAIN = 0.10
"""The scenario's planted joint effect of PLANTED_A and PLANTED_B on throughput."""


BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "attribution_planted.py"


def _benchmark() -> ModuleType:
    """``benchmarks/attribution_planted.py``: the same procedure, one seed here."""
    spec = importlib.util.spec_from_file_location("attribution_planted", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def attributed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The attribution of a run whose kept config switched the three variables on: LEASE and
    BASELINE really run (the baseline measured, its noise known), then the kept config is set
    (standing in for a search) and the real experiment runs."""
    result, run_dir = _benchmark().attribute_planted(SEED, tmp_path_factory.mktemp("planted"))
    return {"result": result, "run_dir": run_dir}


def change(result: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in result["changes"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in result["changes"]]
    return found[0]


def test_all_three_switches_are_environment_changes(attributed: dict[str, Any]) -> None:
    result = attributed["result"]
    assert result["status"] == "complete" and result["method"] == "factorial"
    assert [c["name"] for c in result["changes"]] == list(PLANTED)
    for name in PLANTED:
        entry = change(result, name)
        assert (entry["kind"], entry["layer"]) == ("environment", "environment")
        assert (entry["before"], entry["after"]) == (False, True)


def test_the_planted_pair_is_an_interaction_of_about_ten_percent(
        attributed: dict[str, Any]) -> None:
    result = attributed["result"]
    pair = next(i for i in result["interactions"] if i["id"] == INTERACTION)
    assert pair["changes"] == ["PLANTED_A", "PLANTED_B"]
    assert pair["verdict"] == "interaction", pair["reason"]
    assert pair["effect"] == pytest.approx(PLANTED_GAIN, abs=0.04)
    assert pair["ci_low"] > 0.0 and pair["ci_low"] <= pair["effect"] <= pair["ci_high"]
    others = [i for i in result["interactions"] if i["id"] != INTERACTION]
    assert others and all(i["verdict"] == "not attributable" for i in others), others


@pytest.mark.parametrize("name", ["PLANTED_A", "PLANTED_B"])
def test_neither_half_is_credited_alone(attributed: dict[str, Any], name: str) -> None:
    entry = change(attributed["result"], name)
    assert entry["verdict"] == "interaction only", entry["reason"]
    assert INTERACTION in entry["reason"]
    objective = entry["metrics"]["output_throughput"]
    assert objective["interactions"] == [INTERACTION]
    # Its fair share of the joint gain is shown beside the own effect, never instead of it.
    assert objective["shapley"]["effect"] > entry["effect"]
    credited = {m: e["verdict"] for m, e in entry["metrics"].items()
                if e["verdict"] in ("improves", "worsens")}
    assert credited == {}, credited


def test_a_change_under_the_threshold_is_not_attributable(attributed: dict[str, Any]) -> None:
    entry = change(attributed["result"], "PLANTED_SMALL")
    assert entry["verdict"] == "not attributable", entry["reason"]
    assert entry["metrics"]["output_throughput"]["interactions"] == []
    threshold = attributed["result"]["thresholds"]["output_throughput"]["value"]
    assert threshold >= 0.03  # the gate's floor: 1.5% can never clear it


def test_the_gain_is_all_there_and_the_kept_config_serves_again(
        attributed: dict[str, Any]) -> None:
    result = attributed["result"]
    assert result["total"]["verdict"] == "improves"
    assert result["total"]["effect"] == pytest.approx(1.10 * 1.015 - 1, abs=0.04)
    assert result["reported"] is None  # no gauge change: nothing measured differently
    assert result["restored"] is True


def test_every_config_is_measured_in_interleaved_rounds(attributed: dict[str, Any]) -> None:
    result = attributed["result"]
    repeats = result["repeats"]
    slots = [(m.data["attribution"]["cell"], m.data["attribution"]["round"])
             for m in read_journal(attributed["run_dir"] / "journal.jsonl").records
             if m.type == "measurement" and m.data.get("role") == ROLE]
    cells = list(dict.fromkeys(cell for cell, _ in slots))
    assert len(cells) == 2 ** len(PLANTED) and len(slots) == len(cells) * repeats >= 16
    first, second = slots[:len(cells)], slots[len(cells):2 * len(cells)]
    assert [c for c, _ in second] == [c for c, _ in first][::-1]  # ABBA: drift cancels
