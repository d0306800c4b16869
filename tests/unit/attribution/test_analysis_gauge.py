"""Gauge changes are kept apart: their effect is a change of *measurement*, judged as such, never
part of the total gain, and the figures whose meaning changed are named.

The scene is the article's: without streaming the client's TTFT is the whole request's latency
(TTFT == E2EL, 2000 ms); switching streaming on reads the real TTFT (780 ms, -61%); chunked
prefill then brings it to 234 ms (-70%). Reported naively, before against after, that is -88%.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tunegate.attribution import analyse, plan_design
from tunegate.attribution.analysis import IMPROVES, MEASUREMENT, NOT_ATTRIBUTABLE
from tunegate.attribution.design import Cell

synth: Any = importlib.import_module("tunegate_tests_attribution_synth")  # conftest.py

METRICS = (("mean_ttft_ms", "lower"), ("mean_e2el_ms", "lower"),
           ("output_throughput", "higher"), ("mean_tpot_ms", "lower"))
STREAM = synth.gauge("stream")
CHUNKED = synth.engine("enable_chunked_prefill")


def scene(cell: Cell) -> dict[str, float]:
    streaming = "benchmark.stream" in cell.gauge_on
    chunked = "enable_chunked_prefill" in cell.on
    ttft = (234.0 if chunked else 780.0) if streaming else 2000.0
    return {"mean_ttft_ms": ttft, "mean_e2el_ms": 2000.0, "output_throughput": 1000.0,
            "mean_tpot_ms": 20.0}


def analysed(changes: list[Any], *, invalid_before: list[str] | None = None,
             before_noise: float = 0.02, seed: int = 4) -> dict[str, Any]:
    design = plan_design(changes)
    cells = synth.measure(design, scene, seed=seed)
    if before_noise != 0.02:
        cells["gauge-before"] = synth.measure(design, scene, seed=seed + 1,
                                              noise=before_noise)["gauge-before"]
    cells["gauge-before"]["invalid_metrics"] = list(invalid_before or [])
    return analyse(synth.inputs(changes, design, cells, METRICS))


@pytest.fixture(scope="module")
def out() -> dict[str, Any]:
    return analysed([STREAM, CHUNKED], invalid_before=["mean_ttft_ms", "mean_tpot_ms"])


def test_the_gauge_repair_changes_the_measurement_of_ttft(out: dict[str, Any]) -> None:
    stream = synth.change(out, "benchmark.stream")
    assert stream["kind"] == "gauge" and stream["layer"] == "gauge"
    assert stream["verdict"] == MEASUREMENT
    ttft = stream["metrics"]["mean_ttft_ms"]
    assert ttft["verdict"] == MEASUREMENT
    assert ttft["effect"] == pytest.approx(780 / 2000 - 1, abs=0.03)  # -61%


def test_a_gauge_change_is_never_an_improvement(out: dict[str, Any]) -> None:
    stream = synth.change(out, "benchmark.stream")
    assert {e["verdict"] for e in stream["metrics"].values()} <= {MEASUREMENT, NOT_ATTRIBUTABLE}
    assert stream["metrics"]["mean_e2el_ms"]["verdict"] == NOT_ATTRIBUTABLE


def test_the_engine_change_is_credited_with_its_own_part_only(out: dict[str, Any]) -> None:
    chunked = synth.change(out, "enable_chunked_prefill")
    assert chunked["kind"] == "engine" and chunked["verdict"] == IMPROVES
    assert chunked["effect"] == pytest.approx(234 / 780 - 1, abs=0.03)  # -70%


def test_the_total_is_kept_against_baseline_without_the_gauge(out: dict[str, Any]) -> None:
    assert out["total"]["effect"] == pytest.approx(234 / 780 - 1, abs=0.03)
    assert out["total"]["verdict"] == IMPROVES


def test_reported_is_kept_against_the_gauge_as_first_configured(out: dict[str, Any]) -> None:
    reported = out["reported"]
    assert reported["effect"] == pytest.approx(234 / 2000 - 1, abs=0.03)  # the naive -88%
    assert reported["verdict"] == ""  # shown, not judged
    assert reported["metrics"]["mean_e2el_ms"]["effect"] == pytest.approx(0.0, abs=0.05)


def test_changed_meaning_names_the_moved_figures_and_those_the_gauge_called_invalid(
        out: dict[str, Any]) -> None:
    stream = synth.change(out, "benchmark.stream")
    # TTFT moved; TPOT did not move but the gauge itself had called it invalid before the fix
    assert stream["changed_meaning"] == ["mean_ttft_ms", "mean_tpot_ms"]
    assert stream["invalid_before"] == ["mean_ttft_ms", "mean_tpot_ms"]
    # whatever the size of its move, a figure the gauge had rejected changed meaning
    tpot = stream["metrics"]["mean_tpot_ms"]
    assert tpot["verdict"] == MEASUREMENT
    assert tpot["reason"].startswith("the gauge called this figure invalid before the fix")


def test_without_an_invalid_verdict_only_the_moved_figures_changed_meaning() -> None:
    stream = synth.change(analysed([STREAM, CHUNKED]), "benchmark.stream")
    assert stream["changed_meaning"] == ["mean_ttft_ms"] and stream["invalid_before"] == []


def test_a_figure_still_invalid_after_the_fix_did_not_change_meaning_by_it() -> None:
    changes = [STREAM, CHUNKED]
    design = plan_design(changes)
    cells = synth.measure(design, scene, seed=4)
    cells["gauge-before"]["invalid_metrics"] = ["mean_tpot_ms"]
    cells["baseline"]["invalid_metrics"] = ["mean_tpot_ms"]
    stream = synth.change(analyse(synth.inputs(changes, design, cells, METRICS)),
                          "benchmark.stream")
    assert stream["invalid_before"] == [] and "mean_tpot_ms" not in stream["changed_meaning"]


def test_the_gauge_cell_s_noise_does_not_set_the_threshold() -> None:
    quiet = analysed([STREAM, CHUNKED])["thresholds"]
    loud = analysed([STREAM, CHUNKED], before_noise=0.30)["thresholds"]
    assert loud == quiet  # sigma pooled over the engine cells only


def test_gauge_only_reports_the_measurement_change_and_no_total() -> None:
    out = analysed([STREAM])
    assert out["method"] == "gauge_only" and out["total"] is None
    assert out["interactions"] == [] and out["not_separated"] is None
    assert synth.change(out, "benchmark.stream")["verdict"] == MEASUREMENT
    assert out["reported"]["effect"] == pytest.approx(780 / 2000 - 1, abs=0.03)


# ---- several gauge fixes, each measured alone on the baseline ------------------------------
IGNORE_EOS = synth.gauge("ignore_eos")


def two_fixes(cell: Cell) -> dict[str, float]:
    """Streaming fixes TTFT; ignore_eos makes every request generate its full length, which
    changes the throughput measured (not the server's)."""
    values = scene(cell)
    if "benchmark.ignore_eos" in cell.gauge_on:
        values["output_throughput"] = 1400.0
    return values


def test_each_gauge_fix_is_judged_against_the_gauge_as_first_configured() -> None:
    changes = [IGNORE_EOS, STREAM, CHUNKED]
    design = plan_design(changes)
    cells = synth.measure(design, two_fixes, seed=9)
    cells["gauge-before"]["invalid_metrics"] = ["mean_ttft_ms"]
    # ignore_eos alone leaves streaming off: the gauge still calls TTFT invalid there
    cells["gauge-before+benchmark.ignore_eos"]["invalid_metrics"] = ["mean_ttft_ms"]
    out = analyse(synth.inputs(changes, design, cells, METRICS))
    stream, eos = synth.change(out, "benchmark.stream"), synth.change(out, "benchmark.ignore_eos")
    assert stream["metrics"]["mean_ttft_ms"]["effect"] == pytest.approx(-0.61, abs=0.03)
    assert stream["metrics"]["output_throughput"]["verdict"] == NOT_ATTRIBUTABLE
    assert eos["metrics"]["output_throughput"]["effect"] == pytest.approx(0.40, abs=0.04)
    assert eos["metrics"]["mean_ttft_ms"]["verdict"] == NOT_ATTRIBUTABLE
    assert stream["changed_meaning"] == ["mean_ttft_ms"]
    assert eos["changed_meaning"] == ["output_throughput"]
    assert out["total"]["metrics"]["output_throughput"]["effect"] == pytest.approx(0, abs=0.04)


# ---- a gauge change's headline ---------------------------------------------------------------
HEADLINE = ("metric", "effect", "ci_low", "ci_high", "verdict", "reason")


def test_a_gauge_change_s_headline_is_the_first_figure_whose_meaning_changed() -> None:
    """Objective throughput, which streaming does not move: the headline is TTFT's, the first
    figure it changed the meaning of, so its verdict never sits beside a near-zero effect."""
    changes = [STREAM, CHUNKED]
    design = plan_design(changes)
    cells = synth.measure(design, scene, seed=4)
    cells["gauge-before"]["invalid_metrics"] = ["mean_tpot_ms", "mean_ttft_ms"]
    by_throughput = (METRICS[2], *METRICS[:2], METRICS[3])
    stream = synth.change(analyse(synth.inputs(changes, design, cells, by_throughput)),
                          "benchmark.stream")
    assert stream["changed_meaning"] == ["mean_ttft_ms", "mean_tpot_ms"]
    ttft = stream["metrics"]["mean_ttft_ms"]
    assert {k: stream[k] for k in HEADLINE} == {"metric": "mean_ttft_ms",
                                                **{k: ttft[k] for k in HEADLINE[1:]}}
    assert stream["verdict"] == MEASUREMENT
    assert stream["effect"] == pytest.approx(780 / 2000 - 1, abs=0.03)
    throughput = stream["metrics"]["output_throughput"]
    assert throughput["verdict"] == NOT_ATTRIBUTABLE  # shown under metrics, not as headline


def test_a_gauge_change_s_headline_is_the_objective_when_its_meaning_changed(
        out: dict[str, Any]) -> None:
    stream = synth.change(out, "benchmark.stream")
    assert stream["changed_meaning"][0] == "mean_ttft_ms" == out["objective"]
    ttft = stream["metrics"]["mean_ttft_ms"]
    assert {k: stream[k] for k in HEADLINE} == {"metric": "mean_ttft_ms",
                                                **{k: ttft[k] for k in HEADLINE[1:]}}


def test_a_gauge_change_that_changed_no_meaning_is_headlined_by_the_objective() -> None:
    """ignore_eos here moves nothing (every answer ran to its length anyway): no figure
    changed meaning, and its headline is the objective's own verdict."""
    changes = [IGNORE_EOS, STREAM, CHUNKED]
    design = plan_design(changes)
    cells = synth.measure(design, scene, seed=9)
    eos = synth.change(analyse(synth.inputs(changes, design, cells, METRICS)),
                       "benchmark.ignore_eos")
    assert eos["changed_meaning"] == []
    ttft = eos["metrics"]["mean_ttft_ms"]
    assert {k: eos[k] for k in HEADLINE} == {"metric": "mean_ttft_ms",
                                             **{k: ttft[k] for k in HEADLINE[1:]}}
    assert eos["verdict"] == NOT_ATTRIBUTABLE
