"""Five changes, measured one at a time (add-one to the baseline, leave-one-out from the kept
config): A and B are worth nothing alone and +10% together, C is worth +8%, D and E nothing.
The design cannot separate the pair, and says so: each partner's two estimates disagree
(flagged as an interaction with the others), and the part of the total that no own effect
explains is reported as not separated."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest

from tunegate.attribution import analyse, plan_design
from tunegate.attribution.analysis import (
    IMPROVES,
    INTERACTION,
    INTERACTION_ONLY,
    NOT_ATTRIBUTABLE,
)

synth: Any = importlib.import_module("tunegate_tests_attribution_synth")  # conftest.py

CHANGES = [synth.engine(n) for n in "ABCDE"]
DESIGN = plan_design(CHANGES)
TRUTH = synth.multiplicative({"C": 0.08}, {frozenset("AB"): 0.10})


def analysed(seed: int, noise: float = 0.02) -> dict[str, Any]:
    cells = synth.measure(DESIGN, TRUTH, seed=seed, noise=noise)
    return analyse(synth.inputs(CHANGES, DESIGN, cells))


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    return [analysed(seed) for seed in range(8)]


def test_the_design_is_one_at_a_time_with_an_interaction_per_change(
        runs: list[dict[str, Any]]) -> None:
    assert DESIGN.method == "one_at_a_time" and len(DESIGN.cells) == 12
    for out in runs:
        assert out["method"] == "one_at_a_time"
        assert [i["id"] for i in out["interactions"]] == [f"{n} x the others" for n in "ABCDE"]
        assert synth.interaction(out, "A x the others")["changes"] == ["A", "the others"]


def test_the_interacting_pair_is_flagged_and_the_rest_is_not(
        runs: list[dict[str, Any]]) -> None:
    for out in runs:
        verdicts = {i["id"]: i["verdict"] for i in out["interactions"]}
        assert verdicts == {"A x the others": INTERACTION, "B x the others": INTERACTION,
                            "C x the others": NOT_ATTRIBUTABLE,
                            "D x the others": NOT_ATTRIBUTABLE,
                            "E x the others": NOT_ATTRIBUTABLE}


def test_the_partners_are_interaction_only_and_the_others_judged_alone(
        runs: list[dict[str, Any]]) -> None:
    for out in runs:
        verdicts = {c["name"]: c["verdict"] for c in out["changes"]}
        assert verdicts == {"A": INTERACTION_ONLY, "B": INTERACTION_ONLY, "C": IMPROVES,
                            "D": NOT_ATTRIBUTABLE, "E": NOT_ATTRIBUTABLE}
        assert synth.change(out, "A")["interactions"] == ["A x the others"]
        assert out["total"]["verdict"] == IMPROVES


def test_leave_one_out_shows_what_taking_a_partner_away_costs(
        runs: list[dict[str, Any]]) -> None:
    for name, alone, loo in (("A", 0.0, 0.10), ("C", 0.08, 0.08), ("D", 0.0, 0.0)):
        own = np.mean([synth.change(out, name)["effect"] for out in runs])
        left_out = np.mean([synth.change(out, name)["leave_one_out"]["effect"] for out in runs])
        assert own == pytest.approx(alone, abs=0.01)
        assert left_out == pytest.approx(loo, abs=0.015)
    assert "shapley" not in synth.change(runs[0], "A")  # no fair split without the factorial


def test_not_separated_carries_the_remainder(runs: list[dict[str, Any]]) -> None:
    for out in runs:
        rest = out["not_separated"]
        assert rest["verdict"] in (INTERACTION, NOT_ATTRIBUTABLE)  # never a gain of anyone's
        assert rest["ci_low"] < 0.10 < rest["ci_high"]
    mean = np.mean([out["not_separated"]["effect"] for out in runs])
    assert mean == pytest.approx(0.10, abs=0.025)


def test_noise_free_the_remainder_is_exactly_the_planted_interaction() -> None:
    out = analysed(0, noise=0.0)
    rest = out["not_separated"]
    assert rest["effect"] == pytest.approx(0.10, abs=1e-12)
    assert rest["verdict"] == INTERACTION
    own = sum(synth.log1p(c["effect"]) for c in out["changes"])
    assert own + synth.log1p(rest["effect"]) == pytest.approx(
        math.log(1.10 * 1.08), abs=1e-12)  # own effects + the remainder = the total
    assert synth.interaction(out, "A x the others")["effect"] == pytest.approx(0.10, abs=1e-12)
    assert synth.interaction(out, "C x the others")["effect"] == pytest.approx(0.0, abs=1e-12)
