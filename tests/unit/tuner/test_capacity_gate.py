"""The gate under the capacity objective: two capacity searches compared through their
intervals (``tunegate.tuner.capacity_gate``)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tunegate.tuner import deciders
from tunegate.tuner.capacity_gate import compare, drifted, interval

KEPT = {"capacity": 10.0, "ci_low": 9.5, "ci_high": 10.5}


def side(capacity: float | None, low: float | None, high: float | None) -> dict[str, Any]:
    return {"capacity": capacity, "ci_low": low, "ci_high": high}


def verdict(kept: dict[str, Any], candidate: dict[str, Any], **kw: Any) -> dict[str, Any]:
    settings = {"threshold": 0.03, "alpha": 0.05, "confidence": 0.95} | kw
    return compare(kept, candidate, **settings)


def test_a_clearly_higher_capacity_is_accepted_with_its_effect() -> None:
    out = verdict(KEPT, side(12.0, 11.4, 12.6))
    assert out["decision"] == "ACCEPT"
    assert out["effect"] == pytest.approx(0.2)
    assert out["p_adjusted"] < 0.05


def test_a_gain_inside_the_intervals_is_inconclusive() -> None:
    out = verdict(KEPT, side(10.4, 9.9, 10.9))
    assert out["decision"] == "INCONCLUSIVE"
    assert "cannot tell a gain of 3%" in out["reason"]


def test_a_clearly_lower_capacity_is_rejected() -> None:
    assert verdict(KEPT, side(8.0, 7.6, 8.4))["decision"] == "REJECT"


def test_a_gain_below_the_threshold_is_never_accepted_however_narrow_the_intervals() -> None:
    narrow = side(10.0, 9.999, 10.001)
    assert verdict(narrow, side(10.2, 10.199, 10.201))["decision"] == "INCONCLUSIVE"
    assert verdict(narrow, side(10.4, 10.399, 10.401))["decision"] == "ACCEPT"


def test_the_test_uses_the_interval_widths_as_standard_errors() -> None:
    """Halfway widths of 5% at 95% are sigma 2.5% each in log load; a 12% gain over a 3%
    threshold is then z = (log 1.12 - log 1.03) / hypot(sigma, sigma)."""
    kept = side(10.0, 10.0 / math.exp(0.05), 10.0 * math.exp(0.05))
    cand = side(11.2, 11.2 / math.exp(0.05), 11.2 * math.exp(0.05))
    sigma = 0.05 / 1.959963984540054
    z = (math.log(1.12) - math.log(1.03)) / math.hypot(sigma, sigma)
    expected = 0.5 * math.erfc(z / math.sqrt(2))
    assert verdict(kept, cand)["p_adjusted"] == pytest.approx(expected, rel=1e-6)


def test_a_kept_capacity_that_is_only_a_lower_bound_cannot_be_beaten() -> None:
    at_least = side(1000.0, 1000.0, None)  # met the targets at max_load
    out = verdict(at_least, side(2000.0, 1900.0, 2100.0))
    assert out["decision"] == "INCONCLUSIVE" and "raise [capacity] max_load" in out["reason"]


def test_a_candidate_at_least_above_a_bounded_kept_capacity_is_accepted() -> None:
    assert verdict(KEPT, side(20.0, 20.0, None))["decision"] == "ACCEPT"
    assert verdict(KEPT, side(10.0, 10.0, None))["decision"] == "INCONCLUSIVE"


@pytest.mark.parametrize(("kept", "candidate", "decision"), [
    (side(0.0, 0.0, 0.1), side(0.0, 0.0, 0.1), "INCONCLUSIVE"),
    (side(0.0, 0.0, 0.1), side(2.0, 1.8, 2.2), "ACCEPT"),
    (side(0.0, 0.0, 2.0), side(2.0, 1.8, 2.2), "INCONCLUSIVE"),
    (KEPT, side(0.0, 0.0, 0.1), "REJECT"),
])
def test_capacity_zero_is_compared_by_its_bounds(kept: dict[str, Any],
                                                 candidate: dict[str, Any],
                                                 decision: str) -> None:
    out = verdict(kept, candidate)
    assert out["decision"] == decision
    assert math.isfinite(out["effect"])  # the journal is JSON


def test_a_search_without_an_answer_decides_nothing() -> None:
    assert verdict(KEPT, side(None, None, None))["decision"] == "INCONCLUSIVE"


def test_drift_is_a_two_sided_disagreement_of_the_intervals() -> None:
    assert not drifted(KEPT, side(10.3, 9.8, 10.8), alpha=0.05, confidence=0.95)
    assert drifted(KEPT, side(8.0, 7.6, 8.4), alpha=0.05, confidence=0.95)
    assert drifted(KEPT, side(12.0, 11.4, 12.6), alpha=0.05, confidence=0.95)


def test_the_answer_is_the_newest_search_of_the_config() -> None:
    values = {"capacity": [9.0, 10.0], "capacity_ci_low": [8.5, 9.5],
              "capacity_ci_high": [9.5, 10.5]}
    assert interval(values) == KEPT
    assert interval({}) == side(None, None, None)


def test_the_decider_replays_from_its_recorded_inputs() -> None:
    version, decide = deciders.REGISTRY["capacity_gate"]
    inputs = {"trial": 3, "kept": KEPT, "candidate": side(12.0, 11.4, 12.6),
              "threshold": 0.03, "alpha": 0.05, "confidence": 0.95}
    assert version == "1"
    assert decide(inputs, None) == decide(dict(inputs), 7) == verdict(KEPT, inputs["candidate"])
