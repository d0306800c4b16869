"""The factorial analysis on a planted truth: two changes worth nothing alone and +10% together,
a third worth +1.5% (under the threshold). The interaction is reported as an interaction and
credited to neither change alone; own effects, interactions and Shapley shares add up."""

from __future__ import annotations

import importlib
import math
from itertools import combinations
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

CHANGES = [synth.engine(n) for n in "ABC"]
DESIGN = plan_design(CHANGES)
PLANTED = synth.multiplicative({"C": 0.015}, {frozenset("AB"): 0.10})
SEEDS = range(8)


def planted(seed: int, noise: float = 0.02) -> dict[str, Any]:
    cells = synth.measure(DESIGN, PLANTED, seed=seed, repeats=6, noise=noise)
    return analyse(synth.inputs(CHANGES, DESIGN, cells))


@pytest.fixture(scope="module")
def runs() -> list[dict[str, Any]]:
    return [planted(seed) for seed in SEEDS]


def test_the_planted_pair_is_an_interaction_only_never_an_improvement(
        runs: list[dict[str, Any]]) -> None:
    for out in runs:
        for name in "AB":
            entry = synth.change(out, name)
            assert entry["verdict"] == INTERACTION_ONLY, entry
            assert entry["interactions"] == ["A x B"]
            assert "A x B" in entry["reason"]


def test_the_pairs_joint_effect_is_the_interaction_a_x_b(runs: list[dict[str, Any]]) -> None:
    for out in runs:
        pair = synth.interaction(out, "A x B")
        assert pair["verdict"] == INTERACTION
        assert pair["changes"] == ["A", "B"]
        assert pair["ci_low"] < pair["effect"] < pair["ci_high"]
        others = [i for i in out["interactions"] if i["id"] != "A x B"]
        assert {i["verdict"] for i in others} == {NOT_ATTRIBUTABLE}
    mean = float(np.mean([synth.interaction(out, "A x B")["effect"] for out in runs]))
    assert mean == pytest.approx(0.10, abs=0.015)


def test_the_pairs_own_effects_are_intervals_around_zero(runs: list[dict[str, Any]]) -> None:
    covering = [synth.change(out, n)["ci_low"] <= 0 <= synth.change(out, n)["ci_high"]
                for out in runs for n in "AB"]
    assert sum(covering) >= 14  # 95% intervals: 15.2 of 16 expected; 14 leaves room for one


def test_a_change_below_the_threshold_is_not_attributable(runs: list[dict[str, Any]]) -> None:
    for out in runs:
        entry = synth.change(out, "C")
        assert entry["verdict"] == NOT_ATTRIBUTABLE
        assert entry["interactions"] == []


def test_the_shapley_share_of_each_partner_is_half_the_interaction(
        runs: list[dict[str, Any]]) -> None:
    half = math.expm1(math.log(1.10) / 2)  # +4.88%
    shares = [synth.change(out, n)["shapley"]["effect"] for out in runs for n in "AB"]
    assert float(np.mean(shares)) == pytest.approx(half, abs=0.006)


def test_the_total_is_judged_kept_against_baseline(runs: list[dict[str, Any]]) -> None:
    for out in runs:
        assert out["total"]["verdict"] == IMPROVES
        assert out["method"] == "factorial" and out["not_separated"] is None
    mean = float(np.mean([out["total"]["effect"] for out in runs]))
    assert mean == pytest.approx(1.10 * 1.015 - 1, abs=0.015)


# ---- noise-free: the decomposition is exact ------------------------------------------------
def test_noise_free_the_planted_truth_comes_back_exactly() -> None:
    out = planted(0, noise=0.0)
    assert synth.change(out, "A")["effect"] == pytest.approx(0.0, abs=1e-12)
    assert synth.interaction(out, "A x B")["effect"] == pytest.approx(0.10, abs=1e-12)
    assert synth.change(out, "A")["shapley"]["effect"] == pytest.approx(
        math.expm1(math.log(1.10) / 2), abs=1e-12)
    c = synth.change(out, "C")
    assert c["effect"] == pytest.approx(0.015, abs=1e-12)
    assert c["p"] == 0.0
    assert c["verdict"] == NOT_ATTRIBUTABLE and "below the threshold 3.0%" in c["reason"]


def arbitrary_cells(k: int, seed: int) -> tuple[list[Any], Any, dict[str, Any]]:
    """Noise-free cells with unrelated true values: no structure for the sums to lean on."""
    rng = np.random.default_rng(seed)
    changes = [synth.engine(n) for n in "abcd"[:k]]
    design = plan_design(changes)
    truth = {c.key: float(rng.uniform(50, 150)) for c in design.cells}
    cells = synth.measure(design, lambda cell: {"x": truth[cell.key]}, noise=0.0)
    return changes, design, cells


@pytest.mark.parametrize("k", [2, 3, 4])
def test_shapley_shares_add_up_to_the_total_on_the_log_scale(k: int) -> None:
    changes, design, cells = arbitrary_cells(k, seed=k)
    out = analyse(synth.inputs(changes, design, cells))
    means = {key: cell["values"]["x"][0] for key, cell in cells.items()}
    log_total = math.log(means["kept"] / means["baseline"])
    shares = [synth.log1p(c["shapley"]["effect"]) for c in out["changes"]]
    assert sum(shares) == pytest.approx(log_total, abs=1e-9)
    assert synth.log1p(out["total"]["effect"]) == pytest.approx(log_total, abs=1e-9)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_own_effects_and_interactions_add_up_to_the_total(k: int) -> None:
    changes, design, cells = arbitrary_cells(k, seed=10 + k)
    out = analyse(synth.inputs(changes, design, cells))
    assert len(out["interactions"]) == 2**k - 1 - k  # every group of two or more
    parts = [synth.log1p(c["effect"]) for c in out["changes"]]
    parts += [synth.log1p(i["effect"]) for i in out["interactions"]]
    assert sum(parts) == pytest.approx(synth.log1p(out["total"]["effect"]), abs=1e-9)


def test_an_interaction_is_the_moebius_term_of_its_group() -> None:
    changes, design, cells = arbitrary_cells(3, seed=7)
    out = analyse(synth.inputs(changes, design, cells))
    log_mean = {frozenset(c.on): math.log(cells[c.key]["values"]["x"][0])
                for c in design.cells}
    for group in (("a", "b"), ("a", "c"), ("a", "b", "c")):
        term = sum((-1) ** (len(group) - size) * log_mean[frozenset(sub)]
                   for size in range(len(group) + 1) for sub in combinations(group, size))
        found = synth.interaction(out, " x ".join(group))
        assert synth.log1p(found["effect"]) == pytest.approx(term, abs=1e-9)
