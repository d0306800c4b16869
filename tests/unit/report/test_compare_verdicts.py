"""Each input against the reference: the change per metric, and the gate's verdict only where
both sides have repeats. The verdict is the tuner's gate itself, never a new test."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.report.comparability import Load
from tunegate.report.compare_model import Comparable
from tunegate.report.compare_verdicts import compare, compare_pair
from tunegate.stats import gate as stats_gate
from tunegate.stats.decision import MetricSpec

METRICS = ("output_throughput", "mean_ttft_ms", "p99_e2el_ms")


def _repeats(mean: float, n: int, seed: int, noise: float = 0.01) -> tuple[float, ...]:
    rng = np.random.default_rng(seed)
    return tuple(float(x) for x in mean * (1 + noise * rng.standard_normal(n)))


def _input(label: str, means: dict[str, float], n: int | None, seed: int = 0) -> Comparable:
    repeats = None if n is None else {m: _repeats(v, n, seed + i)
                                      for i, (m, v) in enumerate(means.items())}
    figures = ({m: statistics.fmean(r) for m, r in repeats.items()} if repeats
               else dict(means))
    return Comparable(label=label, kind="tune", source=label, figures=figures, repeats=repeats,
                      valid=True, load=Load(64.0, 16.0, 4, math.inf, True))


REFERENCE = {"output_throughput": 1000.0, "mean_ttft_ms": 50.0, "p99_e2el_ms": 900.0}
BETTER = {"output_throughput": 1200.0, "mean_ttft_ms": 80.0, "p99_e2el_ms": 901.0}


def test_repeats_on_both_sides_get_the_gates_verdict_per_metric() -> None:
    ref, other = _input("a", REFERENCE, 8, seed=1), _input("b", BETTER, 8, seed=11)
    pair = compare_pair(ref, other, METRICS)
    verdicts = {d.metric: d.verdict for d in pair.metrics}
    assert verdicts == {"output_throughput": "improved", "mean_ttft_ms": "regressed",
                        "p99_e2el_ms": "below_threshold"}
    assert all(d.status == "verdict" and d.evidence is not None for d in pair.metrics)
    # the gate itself, on the same repeats, all metrics judged together (BH across them)
    assert ref.repeats is not None and other.repeats is not None
    direct = stats_gate.evaluate(ref.repeats, other.repeats,
                                 [MetricSpec("output_throughput", "higher"),
                                  MetricSpec("mean_ttft_ms", "lower"),
                                  MetricSpec("p99_e2el_ms", "lower")])
    assert pair.gate is not None and pair.gate.to_dict() == direct.to_dict()
    throughput = pair.metrics[0]
    assert throughput.change == pytest.approx(other.figures["output_throughput"]
                                              / ref.figures["output_throughput"] - 1)


def test_one_measurement_each_gets_the_change_and_no_verdict() -> None:
    pair = compare_pair(_input("a", REFERENCE, None), _input("b", BETTER, None), METRICS)
    for d in pair.metrics:
        assert d.status == "no_verdict" and d.verdict is None and d.evidence is None
        assert d.note == "one measurement each: no verdict"
    assert pair.metrics[0].change == pytest.approx(0.2)
    assert pair.gate is None


def test_repeats_on_one_side_only_say_which_side_lacks_them() -> None:
    pair = compare_pair(_input("a", REFERENCE, 5), _input("b.json", BETTER, None), METRICS)
    assert {d.note for d in pair.metrics} == {
        "fewer than 2 repeats on b.json (one measurement): no verdict"}


def test_inputs_that_cannot_be_compared_get_no_change_at_all() -> None:
    ref = _input("a", REFERENCE, 5)
    other = replace(_input("b", BETTER, 5), load=Load(64.0, 16.0, 8, math.inf, True))
    pair = compare_pair(ref, other, METRICS)
    assert not pair.comparable and pair.gate is None
    assert pair.reasons == ("workload max concurrency: 4 (a) vs 8 (b)",)
    for d in pair.metrics:
        assert d.status == "not_comparable" and d.change is None and d.verdict is None
        assert d.note == "not comparable: workload max concurrency: 4 (a) vs 8 (b)"


def test_an_invalid_figure_is_left_out_of_the_gate_and_the_rest_is_judged() -> None:
    ref = _input("a", REFERENCE, 8, seed=1)
    other = replace(_input("b", BETTER, 8, seed=11),
                    invalid={"mean_ttft_ms": ("ttft_equals_e2el",)})
    pair = compare_pair(ref, other, METRICS)
    ttft = pair.metrics[1]
    assert ttft.status == "not_comparable" and ttft.change is None
    assert ttft.note == "not comparable: mean_ttft_ms of b is invalid (ttft_equals_e2el)"
    assert pair.gate is not None
    assert [m.spec.name for m in pair.gate.metrics] == ["output_throughput", "p99_e2el_ms"]


def test_a_figure_one_side_lacks_is_said_to_be_missing() -> None:
    ref = _input("a", REFERENCE, None)
    other = _input("b", {"output_throughput": 900.0}, None)
    pair = compare_pair(ref, other, METRICS)
    assert pair.metrics[1].status == "missing" and pair.metrics[1].note == "not reported by b"


def test_every_input_is_compared_with_the_first() -> None:
    inputs = [_input("a", REFERENCE, None), _input("b", BETTER, None), _input("c", BETTER, None)]
    result = compare(inputs, METRICS)
    assert [(p.reference.label, p.other.label) for p in result.pairs] == [("a", "b"), ("a", "c")]
    doc = result.to_dict()
    assert doc["reference"] == "a" and len(doc["comparisons"]) == 2
    with pytest.raises(ConfigError, match="at least two inputs"):
        compare(inputs[:1], METRICS)
