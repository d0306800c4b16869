"""The sequential gate against a fixed reference arm, as a specification.

The kept config's repeats are measured once (the reference); the candidate is judged after each
of its repeats and stops at the first record marked ``stopped``. Seeds are fixed: every
statistical statement here is checked on the same draws every run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.stats import evaluate_against_reference
from tunegate.stats.decision import Decision, MetricSpec
from tunegate.stats.gate import GateConfig, GateRecord, evaluate, replay
from tunegate.stats.gate_reference import t_mixture_evidence
from tunegate.stats.gate_sequential import SequentialGate
from tunegate.stats.noise import estimate_noise

TPUT = MetricSpec("throughput", "higher")
TTFT_GUARD = MetricSpec("ttft_p99", "lower", "guardrail", tolerance=0.05)
MEANS = {"throughput": 1000.0, "ttft_p99": 200.0}


def _arm(rng: np.random.Generator, n: int, effects: dict[str, float],
         sigma: float = 0.02) -> dict[str, list[float]]:
    return {k: list(MEANS[k] * (1 + effects.get(k, 0.0)) * (1 + sigma * rng.standard_normal(n)))
            for k in effects}


def _run(reference: dict[str, list[float]], candidate: dict[str, list[float]],
         specs: list[MetricSpec], max_n: int = 10, min_n: int = 2) -> list[GateRecord]:
    """Look after every candidate repeat until the gate stops; every record on the way."""
    records = []
    for n in range(1, max_n + 1):
        records.append(evaluate_against_reference(
            reference, {k: v[:n] for k, v in candidate.items()}, specs, max_n=max_n,
            min_n=min_n))
        if records[-1].extra["stopped"]:
            break
    return records


def test_a_clear_winner_is_accepted_within_three_repeats() -> None:
    rng = np.random.default_rng(101)
    for _ in range(20):
        records = _run(_arm(rng, 10, {"throughput": 0.0}), _arm(rng, 10, {"throughput": 0.2}),
                       [TPUT])
        assert records[-1].decision is Decision.ACCEPT, records[-1].reasons
        assert records[-1].extra["n"] <= 3
        assert all(r.decision is Decision.INCONCLUSIVE for r in records[:-1])


@pytest.mark.parametrize("min_n", [2, 3])
def test_a_clear_loser_is_rejected_at_min_n(min_n: int) -> None:
    rng = np.random.default_rng(102)
    for _ in range(20):
        records = _run(_arm(rng, 10, {"throughput": 0.0}), _arm(rng, 10, {"throughput": -0.2}),
                       [TPUT], min_n=min_n)
        assert (records[-1].decision, records[-1].extra["n"]) == (Decision.REJECT, min_n)


def test_a_decision_before_min_n_is_not_final() -> None:
    rng = np.random.default_rng(103)
    ref, cand = _arm(rng, 10, {"throughput": 0.0}), _arm(rng, 2, {"throughput": 0.3})
    early = evaluate_against_reference(ref, cand, [TPUT], max_n=10, min_n=3)
    assert early.decision is Decision.INCONCLUSIVE and not early.extra["stopped"]
    assert early.reasons[0] == "ACCEPT after 2 repeats is not final before min_n=3"


def test_aa_false_accepts_stay_below_alpha_when_looking_after_every_repeat() -> None:
    rng = np.random.default_rng(104)
    accepted = 0
    for _ in range(200):
        records = _run(_arm(rng, 10, {"throughput": 0.0}), _arm(rng, 10, {"throughput": 0.0}),
                       [TPUT])
        accepted += records[-1].decision is Decision.ACCEPT
    assert accepted / 200 <= 0.05


def test_the_anytime_p_value_is_valid_over_a_hundred_looks() -> None:
    """A/A: the share of sequences whose p-value ever drops to alpha stays below alpha."""
    rng = np.random.default_rng(105)
    ever = sum(
        t_mixture_evidence(list(1000 * (1 + 0.02 * rng.standard_normal(10))),
                           list(1000 * (1 + 0.02 * rng.standard_normal(100))),
                           alpha=0.05, n_opt=5).p_value <= 0.05
        for _ in range(400))
    assert ever / 400 <= 0.05


def test_interval_excludes_zero_exactly_when_the_p_value_is_below_alpha() -> None:
    rng = np.random.default_rng(106)
    for effect in (0.0, 0.01, 0.02, 0.03, -0.02):
        for n in (1, 2, 4, 8):
            ev = t_mixture_evidence(list(100 * (1 + 0.02 * rng.standard_normal(6))),
                                    list(100 * (1 + effect + 0.02 * rng.standard_normal(n))),
                                    alpha=0.05, n_opt=5)
            lo, hi = ev.interval
            assert (ev.p_value <= 0.05) == (lo > 0 or hi < 0), (effect, n, ev)


def test_once_no_difference_is_excluded_it_stays_excluded() -> None:
    """The p-value is the minimum over the looks and the interval their intersection."""
    ref = [990.0, 1010.0, 1000.0, 995.0, 1005.0, 1002.0, 998.0, 1000.0]
    cand = [1100.0, 1105.0, 1098.0, 900.0, 905.0, 898.0]  # a mean of 1001 by the last look
    early = t_mixture_evidence(ref, cand[:3], alpha=0.05, n_opt=5)
    late = t_mixture_evidence(ref, cand, alpha=0.05, n_opt=5)
    assert early.p_value <= 0.05 and early.interval[0] > 0
    assert late.effect == pytest.approx(0.001, abs=1e-3)
    assert late.p_value == early.p_value and late.interval[0] >= early.interval[0]


def test_a_near_threshold_candidate_runs_to_the_cap_and_ends_inconclusive() -> None:
    # Reference: mean 1000, relative sd 2% (threshold 4%); candidate 3.5% better with the
    # same noise: real, just under the bar, its interval reaching above it at every look.
    z = np.array([1.2, -0.8, 0.3, -1.5, 0.9, -0.2, 1.6, -0.6, -1.1, 0.2])
    z = (z - z.mean()) / z.std(ddof=1)
    ref = {"throughput": list(1000 + 20 * z)}
    cand = {"throughput": list(1035 + 20 * z[::-1])}
    records = _run(ref, cand, [TPUT])
    assert len(records) == 10
    last = records[-1]
    assert last.decision is Decision.INCONCLUSIVE and last.extra["stopped"]
    assert last.reasons[0] == "cap of 10 repeats reached without a decision"
    assert last.metrics[0].threshold == pytest.approx(0.04)
    assert last.metrics[0].verdict == "unclear"


def test_a_guardrail_breach_rejects_a_throughput_win() -> None:
    rng = np.random.default_rng(107)
    ref = _arm(rng, 10, {"throughput": 0.0, "ttft_p99": 0.0})
    cand = _arm(rng, 10, {"throughput": 0.1, "ttft_p99": 0.3})
    last = _run(ref, cand, [TPUT, TTFT_GUARD])[-1]
    assert last.decision is Decision.REJECT
    assert [m.verdict for m in last.metrics] == ["improved", "breached"]


def test_threshold_and_sigma_are_the_fixed_gates() -> None:
    rng = np.random.default_rng(108)
    ref = _arm(rng, 8, {"throughput": 0.0, "ttft_p99": 0.0})
    cand = _arm(rng, 5, {"throughput": 0.05, "ttft_p99": 0.0})
    noise = {"throughput": estimate_noise(_arm(rng, 10, {"throughput": 0.0})["throughput"])}
    config = GateConfig(multiplier=2.5, floor=0.02)
    seq = evaluate_against_reference(ref, cand, [TPUT, TTFT_GUARD], config=config, max_n=10,
                                     noise=noise)
    fixed = evaluate(ref, cand, [TPUT, TTFT_GUARD], config=config, noise=noise)
    for s, f in zip(seq.metrics, fixed.metrics, strict=True):
        assert (s.sigma_baseline, s.threshold, s.threshold_binding) == (
            f.sigma_baseline, f.threshold, f.threshold_binding)
        assert s.effect == pytest.approx(f.effect)
        assert s.method == "t-mixture-cs" and (s.n_baseline, s.n_candidate) == (8, 5)


def _reference_record(n: int, reference_repeats: int = 10) -> GateRecord:
    rng = np.random.default_rng(109)
    ref = _arm(rng, reference_repeats, {"throughput": 0.0, "ttft_p99": 0.0})
    cand = _arm(rng, n, {"throughput": 0.06, "ttft_p99": 0.01})
    return evaluate_against_reference(ref, cand, [TPUT, TTFT_GUARD], max_n=10,
                                      noise={"ttft_p99": estimate_noise([199.0, 203.0, 201.0])})


def _sequential_record() -> GateRecord:
    rng = np.random.default_rng(110)
    gate = SequentialGate([TPUT], {"throughput": estimate_noise(_arm(rng, 10, {"throughput": 0})[
        "throughput"])}, max_pairs=6)
    while not gate.done:
        gate.update({"throughput": 1000.0 * (1 + 0.02 * rng.standard_normal())},
                    {"throughput": 1030.0 * (1 + 0.02 * rng.standard_normal())})
    return gate.record()


def _fixed_record() -> GateRecord:
    rng = np.random.default_rng(111)
    return evaluate(_arm(rng, 6, {"throughput": 0.0}), _arm(rng, 6, {"throughput": 0.05}), [TPUT])


@pytest.mark.parametrize("make", [
    lambda: _reference_record(1, reference_repeats=2),  # unbounded interval: null in JSON
    lambda: _reference_record(3), lambda: _reference_record(10), _sequential_record,
    _fixed_record], ids=["reference-n1-unbounded", "reference-n3", "reference-n10",
                         "sequential", "fixed"])
def test_every_mode_replays_to_the_same_record(make: Callable[[], GateRecord]) -> None:
    rec = make()
    doc = json.loads(rec.to_json())
    assert replay(doc).to_dict() == rec.to_dict() == doc
    if rec.mode == "sequential-reference":
        assert doc["methods"]["test"] == "t-mixture-cs"
        assert set(doc["inputs"]["throughput"]) == {"baseline", "candidate"}
        assert {"n", "max_n", "min_n", "n_opt", "stopped"} <= set(doc["extra"])


def test_an_unbounded_interval_is_written_as_null() -> None:
    rec = _reference_record(1, reference_repeats=2)
    assert math.isinf(rec.metrics[0].interval[1])
    assert json.loads(rec.to_json())["metrics"][0]["interval"] == [None, None]


def test_replay_refuses_an_altered_reference_record() -> None:
    doc = _reference_record(4).to_dict()
    doc["inputs"]["throughput"]["baseline"][0] *= 0.9
    with pytest.raises(ConfigError, match="sha256"):
        replay(doc)


@pytest.mark.parametrize(("reference", "candidate", "kwargs", "message"), [
    ({"throughput": [1.0, 1.1]}, {"ttft": [1.0]}, {}, "candidate has no values for metric "
     "'throughput'"),
    ({"ttft": [1.0, 1.1]}, {"throughput": [1.0]}, {}, "reference arm has no values for metric "
     "'throughput'"),
    ({"throughput": []}, {"throughput": [1.0]}, {}, "reference arm of metric 'throughput' has 0"),
    ({"throughput": [1.0, 1.1]}, {"throughput": [1.0, math.nan]}, {},
     "candidate values of metric 'throughput' contain NaN"),
    ({"throughput": [1.0, math.inf]}, {"throughput": [1.0]}, {},
     "reference arm values of metric 'throughput' contain NaN"),
    ({"throughput": [1.0, -1.0]}, {"throughput": [1.0]}, {}, "reference mean of metric "
     "'throughput' is 0"),
    ({"throughput": [1.0, 1.1]}, {"throughput": []}, {}, "no repeats of metric 'throughput'"),
    ({"throughput": [1.0, 1.1]}, {"throughput": [1.0] * 4}, {"max_n": 3},
     "4 repeats of metric 'throughput', more than max_n=3"),
    ({"throughput": [1.0, 1.1]}, {"throughput": [1.0]}, {"min_n": 5}, "min_n <= max_n"),
])
def test_bad_input_names_the_metric_in_one_config_error(
        reference: dict[str, list[float]], candidate: dict[str, list[float]],
        kwargs: dict[str, int], message: str) -> None:
    args: dict[str, int] = {"max_n": 4, **kwargs}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        evaluate_against_reference(reference, candidate, [TPUT], **args)


def test_every_metric_needs_the_same_number_of_candidate_repeats() -> None:
    with pytest.raises(ConfigError, match="differ across metrics"):
        evaluate_against_reference({"throughput": [1.0, 1.1], "ttft_p99": [2.0, 2.1]},
                                   {"throughput": [1.0, 1.1], "ttft_p99": [2.0]},
                                   [TPUT, TTFT_GUARD], max_n=4)
