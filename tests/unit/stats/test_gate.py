"""The gate as a specification: golden decisions at known n, directions, guardrails, BH, records.

Golden tests use fixed seeds: a known shift gives a known decision at a known n.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.stats.decision import Decision, MetricSpec
from tunegate.stats.gate import GATE_VERSION, GateConfig, evaluate, replay
from tunegate.stats.gate_sequential import SequentialGate
from tunegate.stats.noise import NoiseEstimate, estimate_noise
from tunegate.stats.power import gate_sample_size

TPUT = MetricSpec("throughput", "higher")
TTFT_GUARD = MetricSpec("ttft_p99", "lower", "guardrail", tolerance=0.05)


def _runs(rng: np.random.Generator, mean: float, n: int, sigma: float = 0.02) -> list[float]:
    return list(mean * (1 + sigma * rng.standard_normal(n)))


def _noise(rng: np.random.Generator, k: int = 10) -> NoiseEstimate:
    return estimate_noise(_runs(rng, 1000.0, k))


@pytest.mark.parametrize(("shift", "expected"), [
    (0.00, Decision.REJECT),        # nothing changed: even the best case is below t = 4%
    (0.02, Decision.REJECT),        # real but below the bar: not worth a change
    (0.035, Decision.INCONCLUSIVE),  # real, estimate just below t = 4.3%, interval reaches above
    (0.045, Decision.ACCEPT),
    (0.08, Decision.ACCEPT),
    (-0.05, Decision.REJECT)])      # a regression
def test_golden_decisions_at_the_planned_n(shift: float, expected: Decision) -> None:
    n = gate_sample_size(0.02, 0.05, noise_repeats=10)
    assert n == 10
    rng = np.random.default_rng(2024)
    noise = {"throughput": _noise(rng)}
    rec = evaluate({"throughput": _runs(rng, 1000.0, n)},
                   {"throughput": _runs(rng, 1000.0 * (1 + shift), n)}, [TPUT], noise=noise)
    assert rec.decision is expected, rec.reasons


def test_lower_is_better_metrics_improve_when_they_drop() -> None:
    rng = np.random.default_rng(3)
    spec = MetricSpec("tpot_ms", "lower")
    rec = evaluate({"tpot_ms": _runs(rng, 50.0, 8)}, {"tpot_ms": _runs(rng, 45.0, 8)}, [spec])
    assert rec.decision is Decision.ACCEPT
    assert rec.metrics[0].effect < 0 < rec.metrics[0].improvement


def test_a_significant_guardrail_breach_blocks_the_win() -> None:
    rng = np.random.default_rng(4)
    base = {"throughput": _runs(rng, 1000, 8), "ttft_p99": _runs(rng, 200, 8)}
    cand = {"throughput": _runs(rng, 1100, 8), "ttft_p99": _runs(rng, 230, 8)}
    rec = evaluate(base, cand, [TPUT, TTFT_GUARD])
    assert rec.decision is Decision.REJECT
    assert [m.verdict for m in rec.metrics] == ["improved", "breached"]


def test_a_guardrail_beyond_tolerance_but_unproven_makes_it_inconclusive() -> None:
    base = {"throughput": [1000, 1010, 990, 1005], "ttft_p99": [200, 180, 220, 200]}
    cand = {"throughput": [1100, 1110, 1090, 1105], "ttft_p99": [240, 170, 250, 200]}
    rec = evaluate(base, cand, [TPUT, TTFT_GUARD])
    assert [m.verdict for m in rec.metrics] == ["improved", "at_risk"]
    assert rec.decision is Decision.INCONCLUSIVE


def test_bh_adjusts_across_the_metrics_judged_together() -> None:
    rng = np.random.default_rng(5)
    specs = [TPUT, *(MetricSpec(f"m{i}", "lower", "guardrail") for i in range(4))]
    base = {s.name: _runs(rng, 100, 8) for s in specs}
    cand = {s.name: _runs(rng, 100, 8) for s in specs}
    cand["throughput"] = _runs(rng, 108, 8)
    rec = evaluate(base, cand, specs)
    for m in rec.metrics:
        assert m.p_adjusted >= m.p_value
    assert rec.metrics[0].p_adjusted == pytest.approx(min(1.0, rec.metrics[0].p_value * 5))


def test_record_is_json_and_replays_to_the_same_decision() -> None:
    rng = np.random.default_rng(6)
    noise = {"throughput": _noise(rng), "ttft_p99": estimate_noise(_runs(rng, 200, 10))}
    rec = evaluate({"throughput": _runs(rng, 1000, 8), "ttft_p99": _runs(rng, 200, 8)},
                   {"throughput": _runs(rng, 1070, 8), "ttft_p99": _runs(rng, 201, 8)},
                   [TPUT, TTFT_GUARD], noise=noise, config=GateConfig(fdr=0.1))
    doc = json.loads(rec.to_json())
    assert doc["version"] == GATE_VERSION
    m = doc["metrics"][0]
    for key in ("n_baseline", "n_candidate", "threshold", "sigma_baseline", "effect", "interval",
                "p_value", "p_adjusted", "verdict", "method"):
        assert key in m
    assert doc["config"]["fdr"] == 0.1 and doc["methods"]["fdr"] == "benjamini-hochberg"
    assert replay(doc).to_dict() == rec.to_dict()


def test_replay_refuses_a_tampered_record() -> None:
    rng = np.random.default_rng(7)
    doc = evaluate({"throughput": _runs(rng, 1000, 4)}, {"throughput": _runs(rng, 1000, 4)},
                   [TPUT]).to_dict()
    doc["inputs"]["throughput"]["candidate"][0] *= 1.5
    with pytest.raises(ConfigError, match="sha256"):
        replay(doc)


def test_bad_input_is_a_config_error_not_a_crash() -> None:
    with pytest.raises(ConfigError, match="no values for metric"):
        evaluate({"x": [1.0, 2.0]}, {"y": [1.0, 2.0]}, [MetricSpec("x")])
    with pytest.raises(ConfigError, match="objective"):
        evaluate({"x": [1.0, 2.0]}, {"x": [1.0, 2.0]}, [MetricSpec("x", role="guardrail")])
    with pytest.raises(ConfigError, match="direction"):
        MetricSpec("x", "up")  # type: ignore[arg-type]


def test_aa_false_accepts_stay_below_five_percent_and_ab_power_meets_the_plan() -> None:
    rng = np.random.default_rng(8)
    n, reps = 10, 300
    accepts = {0.0: 0, 0.05: 0}
    for shift in accepts:
        for _ in range(reps):
            rec = evaluate({"throughput": _runs(rng, 1000, n)},
                           {"throughput": _runs(rng, 1000 * (1 + shift), n)}, [TPUT],
                           noise={"throughput": _noise(rng)})
            accepts[shift] += rec.decision is Decision.ACCEPT
    assert accepts[0.0] / reps <= 0.05
    assert accepts[0.05] / reps >= 0.76  # 0.82 predicted; 300 reps: 0.022 standard error


def test_sequential_gate_golden_stop() -> None:
    rng = np.random.default_rng(9)
    gate = SequentialGate([TPUT], {"throughput": _noise(rng)}, max_pairs=40)
    while not gate.done:
        gate.update({"throughput": _runs(rng, 1000, 1)[0]},
                    {"throughput": _runs(rng, 1080, 1)[0]})
    assert (gate.decision, gate.n) == (Decision.ACCEPT, 2)
    doc = json.loads(gate.record().to_json())
    assert doc["mode"] == "sequential" and doc["methods"]["test"] == "normal-mixture-cs"
    assert replay(doc).to_dict() == gate.record().to_dict()


def test_sequential_gate_under_optional_stopping_rarely_accepts_nothing() -> None:
    rng = np.random.default_rng(10)
    accepted = 0
    for _ in range(150):
        gate = SequentialGate([TPUT], {"throughput": _noise(rng)}, max_pairs=30)
        while not gate.done:
            gate.update({"throughput": _runs(rng, 1000, 1)[0]},
                        {"throughput": _runs(rng, 1000, 1)[0]})
        accepted += gate.decision is Decision.ACCEPT
    assert accepted / 150 <= 0.05


def test_sequential_gate_runs_out_of_budget_as_inconclusive() -> None:
    rng = np.random.default_rng(11)
    gate = SequentialGate([TPUT], {"throughput": _noise(rng)}, max_pairs=3)
    while not gate.done:
        gate.update({"throughput": _runs(rng, 1000, 1)[0]},
                    {"throughput": _runs(rng, 1040, 1)[0]})
    assert gate.decision is Decision.INCONCLUSIVE and gate.n == 3
    assert "budget" in gate.record().reasons[0]
    with pytest.raises(ConfigError, match="already stopped"):
        gate.update({"throughput": 1.0}, {"throughput": 1.0})


def test_sequential_gate_needs_measured_noise() -> None:
    with pytest.raises(ConfigError, match="noise"):
        SequentialGate([TPUT], {})
