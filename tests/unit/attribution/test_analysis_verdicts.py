"""The verdicts: direction-aware improves / worsens, a failed config reported and the others
still judged, Benjamini-Hochberg over every judged effect, and the document's shape."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from tunegate.attribution import analyse, plan_design
from tunegate.attribution.analysis import IMPROVES, NOT_ATTRIBUTABLE, NOT_MEASURED, WORSENS
from tunegate.attribution.design import Cell, Design
from tunegate.stats.fdr import benjamini_hochberg

synth: Any = importlib.import_module("tunegate_tests_attribution_synth")  # conftest.py

METRICS = (("output_throughput", "higher"), ("mean_ttft_ms", "lower"))


def two_metric_truth(throughput: float, ttft: float) -> Any:
    """'a' multiplies throughput by ``1 + throughput``, TTFT by ``1 + ttft``; 'b' does nothing."""
    def truth(cell: Cell) -> dict[str, float]:
        on = "a" in cell.on
        return {"output_throughput": 1000.0 * (1 + throughput * on),
                "mean_ttft_ms": 200.0 * (1 + ttft * on)}
    return truth


def judged(throughput: float, ttft: float, seed: int = 3) -> dict[str, Any]:
    changes = [synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    cells = synth.measure(design, two_metric_truth(throughput, ttft), seed=seed)
    return analyse(synth.inputs(changes, design, cells, METRICS))


def test_a_clear_gain_in_a_higher_is_better_metric_improves() -> None:
    a = synth.change(judged(0.20, 0.0), "a")
    assert a["verdict"] == IMPROVES  # the objective, output_throughput, comes first
    assert a["ci_low"] < 0.20 < a["ci_high"]
    assert a["metrics"]["output_throughput"]["verdict"] == IMPROVES


def test_a_lower_latency_improves_and_a_higher_one_worsens() -> None:
    faster = synth.change(judged(0.0, -0.25), "a")["metrics"]["mean_ttft_ms"]
    assert faster["verdict"] == IMPROVES and faster["effect"] < -0.15
    slower = synth.change(judged(0.0, 0.25), "a")["metrics"]["mean_ttft_ms"]
    assert slower["verdict"] == WORSENS and slower["effect"] > 0.15


def test_a_throughput_loss_worsens() -> None:
    out = judged(-0.20, 0.0)
    assert synth.change(out, "a")["verdict"] == WORSENS
    assert out["total"]["verdict"] == WORSENS


def test_a_change_that_does_nothing_is_not_attributable_on_every_metric() -> None:
    b = synth.change(judged(0.20, -0.25), "b")
    assert {m: e["verdict"] for m, e in b["metrics"].items()} == {
        "output_throughput": NOT_ATTRIBUTABLE, "mean_ttft_ms": NOT_ATTRIBUTABLE}
    assert "inside the noise" in b["reason"] or "below the threshold" in b["reason"]


# ---- a config that fails to start ----------------------------------------------------------
def with_failure(key: str, failed: str = "out of memory") -> dict[str, Any]:
    changes = [synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    cells = synth.measure(design, synth.multiplicative({"a": 0.2}), seed=5)
    cells[key] = {"values": {}, "failed": failed, "invalid_metrics": []}
    return analyse(synth.inputs(changes, design, cells))


def test_effects_that_need_a_failed_config_are_not_measured_and_say_which() -> None:
    out = with_failure("+b")
    b = synth.change(out, "b")
    assert b["verdict"] == NOT_MEASURED and b["effect"] is None
    assert "+b" in b["reason"] and "out of memory" in b["reason"]
    pair = synth.interaction(out, "a x b")
    assert pair["verdict"] == NOT_MEASURED and "+b" in pair["reason"]
    assert synth.change(out, "a")["shapley"] is None  # half of 'a x b' is in it


def test_the_other_effects_are_still_judged_beside_a_failed_config() -> None:
    out = with_failure("+b")
    a = synth.change(out, "a")
    assert a["verdict"] == IMPROVES and a["ci_low"] < 0.2 < a["ci_high"]
    assert out["total"]["verdict"] == IMPROVES


def test_a_failed_kept_config_leaves_the_total_unmeasured() -> None:
    out = with_failure("kept", "exited with code 1")
    assert out["total"]["verdict"] == NOT_MEASURED
    assert "kept" in out["total"]["reason"] and "exited with code 1" in out["total"]["reason"]
    assert synth.change(out, "a")["verdict"] == IMPROVES


def test_a_config_that_failed_after_two_repeats_keeps_what_it_measured() -> None:
    """A config whose later repeat failed (the server died under load) still has two usable
    values: its effects are estimated from them, as for any config."""
    changes = [synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    cells = synth.measure(design, synth.multiplicative({"a": 0.2, "b": 0.2}), seed=5)
    cells["+b"]["values"]["x"] = cells["+b"]["values"]["x"][:2]
    cells["+b"]["failed"] = "a repeat failed: connection refused"
    out = analyse(synth.inputs(changes, design, cells))
    b = synth.change(out, "b")
    assert b["verdict"] != NOT_MEASURED and b["ci_low"] < 0.2 < b["ci_high"]
    assert b["effect"] == pytest.approx(0.2, abs=0.05)
    assert synth.interaction(out, "a x b")["effect"] is not None


def test_a_failed_config_without_values_says_its_failure_s_first_line() -> None:
    out = with_failure("+b", "exited with code 1\nTraceback (most recent call last):\n  ...")
    b = synth.change(out, "b")
    assert b["verdict"] == NOT_MEASURED
    assert b["reason"] == "+b failed (exited with code 1)"


def test_a_config_never_measured_or_with_one_repeat_is_not_measured_either() -> None:
    changes = [synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    cells = synth.measure(design, synth.multiplicative({"a": 0.2}), seed=5)
    del cells["+b"]
    cells["kept"]["values"]["x"] = cells["kept"]["values"]["x"][:1]
    out = analyse(synth.inputs(changes, design, cells))
    assert "+b was not measured" in synth.change(out, "b")["reason"]
    assert "kept has 1 usable repeat(s) of x" in out["total"]["reason"]
    assert synth.change(out, "a")["verdict"] == IMPROVES


# ---- Benjamini-Hochberg over the whole experiment ------------------------------------------
def test_bh_adjusts_every_judged_effect_of_every_metric_together() -> None:
    out = judged(0.05, -0.04, seed=8)
    entries = [*out["changes"], *out["interactions"], out["total"]]
    tests = [e["metrics"][m] for e in entries for m, _ in METRICS]
    raw = [t["p"] for t in tests]
    assert [t["p_adjusted"] for t in tests] == pytest.approx(
        list(benjamini_hochberg(raw, 0.05).adjusted))
    assert len(tests) == 2 * (2 + 1 + 1)  # two metrics x (two changes, a x b, total)


NULL_SEEDS = range(30)
FOUR = [synth.engine(n) for n in "ABCD"]


@pytest.fixture(scope="module")
def nulls() -> list[dict[str, Any]]:
    design = plan_design(FOUR)
    nothing = synth.multiplicative({})
    return [analyse(synth.inputs(FOUR, design, synth.measure(design, nothing, seed=s)))
            for s in NULL_SEEDS]


def test_with_nothing_to_find_false_findings_stay_rare(nulls: list[dict[str, Any]]) -> None:
    """Four changes worth nothing: 16 cells, 16 judged effects per seed. With every null true,
    BH at 5% bounds the chance of any finding in a seed near 5% (measured over 600 other seeds:
    3.7% with any finding, 0.2% with an 'improves' or 'worsens'). Binomial tails over 30 seeds
    at 5%: 4 or more seeds with a finding 6% of the time, 5 or more 1.6%."""
    def any_claim(out: dict[str, Any], groups: list[str]) -> bool:
        entries = [e for g in groups for e in (out[g] if g != "total" else [out[g]])]
        return any(e["verdict"] not in (NOT_ATTRIBUTABLE, "interaction only") for e in entries)

    improves_or_worsens = sum(any_claim(out, ["changes", "total"]) for out in nulls)
    anything = sum(any_claim(out, ["changes", "interactions", "total"]) for out in nulls)
    assert improves_or_worsens <= 3  # 10% of the seeds; measured: none
    assert anything <= 4  # measured: 3 seeds, each with an 'interaction' made of noise


def test_the_same_nulls_judged_one_at_a_time_would_find_plenty(
        nulls: list[dict[str, Any]]) -> None:
    """Why the bound above has teeth: each effect at p < 0.05 on its own, without BH and the
    threshold, finds something in many of the same seeds."""
    raw = sum(any(e["p"] < 0.05 for e in [*out["changes"], *out["interactions"], out["total"]])
              for out in nulls)
    assert raw >= 6


# ---- the document --------------------------------------------------------------------------
def test_the_document_carries_what_attribute_json_prints() -> None:
    out = judged(0.20, -0.25)
    assert out["objective"] == "output_throughput" and out["method"] == "factorial"
    assert set(out["thresholds"]) == {"output_throughput", "mean_ttft_ms"}
    for change in out["changes"]:
        assert {"name", "kind", "layer", "before", "after", "effect", "ci_low", "ci_high",
                "verdict", "reason", "interactions", "shapley", "metrics"} <= set(change)
    assert {"id", "changes", "effect", "ci_low", "ci_high", "verdict", "metrics"} <= set(
        out["interactions"][0])
    assert out["reported"] is None  # no gauge change


def test_the_analysis_is_a_pure_function_of_its_inputs() -> None:
    changes = [synth.engine("a"), synth.engine("b")]
    design = plan_design(changes)
    record = json.loads(json.dumps(synth.inputs(
        changes, design, synth.measure(design, synth.multiplicative({"a": 0.1}), seed=2))))
    first = analyse(record)
    assert json.loads(json.dumps(first)) == first  # JSON all the way down
    assert analyse(json.loads(json.dumps(record))) == first


def test_a_single_change_is_judged_kept_against_baseline() -> None:
    design = Design("factorial", (Cell("baseline", frozenset(), frozenset()),
                                  Cell("kept", frozenset({"a"}), frozenset())))
    cells = synth.measure(design, synth.multiplicative({"a": 0.2}), seed=1)
    out = analyse(synth.inputs([synth.engine("a")], design, cells))
    assert out["interactions"] == []
    assert synth.change(out, "a")["effect"] == pytest.approx(out["total"]["effect"])


def test_with_one_engine_change_the_total_is_its_verdict_judged_once() -> None:
    """With one engine change the total is the same contrast as the change's own effect: it
    carries that verdict and adjusted p, and is not a second test in the BH family (which
    holds the change's effect and the gauge's, per metric)."""
    changes = [synth.gauge("stream"), synth.engine("a")]
    design = plan_design(changes)

    def truth(cell: Cell) -> dict[str, float]:
        on, fixed = "a" in cell.on, "benchmark.stream" in cell.gauge_on
        return {"output_throughput": 1000.0 * (1.06 if on else 1.0),
                "mean_ttft_ms": 200.0 * (1.0 if fixed else 1.05) * (0.97 if on else 1.0)}

    out = analyse(synth.inputs(changes, design, synth.measure(design, truth, seed=11),
                               METRICS))
    a, stream = synth.change(out, "a"), synth.change(out, "benchmark.stream")
    for metric, _ in METRICS:
        own, total = a["metrics"][metric], out["total"]["metrics"][metric]
        assert (total["verdict"], total["p_adjusted"], total["reason"]) == (
            own["verdict"], own["p_adjusted"], own["reason"]), metric
    family = [e["metrics"][m] for e in (a, stream) for m, _ in METRICS]
    assert [t["p_adjusted"] for t in family] == pytest.approx(
        list(benjamini_hochberg([t["p"] for t in family], 0.05).adjusted))
