"""The measuring order: interleaved rounds, forward then backward (ABBA), so that a linear drift
of the machine adds the same amount to every cell and cancels from every contrast."""

from __future__ import annotations

import importlib
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest

from tunegate.attribution import analyse, plan_design
from tunegate.attribution.analysis import IMPROVES, NOT_ATTRIBUTABLE
from tunegate.attribution.design import Design

synth: Any = importlib.import_module("tunegate_tests_attribution_synth")  # conftest.py

DESIGNS = {
    "two engine changes": [synth.engine("a"), synth.engine("b")],
    "gauge and three engine": [synth.gauge("stream")] + [synth.engine(n) for n in "abc"],
    "one at a time": [synth.engine(n) for n in "abcde"],
}


def mean_positions(design: Design, repeats: int) -> dict[str, float]:
    positions: dict[str, list[int]] = defaultdict(list)
    for position, (key, _) in enumerate(design.schedule(repeats)):
        positions[key].append(position)
    return {key: float(np.mean(p)) for key, p in positions.items()}


@pytest.mark.parametrize("changes", DESIGNS.values(), ids=DESIGNS.keys())
@pytest.mark.parametrize("repeats", [1, 2, 5, 6])
def test_every_cell_is_measured_once_per_round(changes: list[Any], repeats: int) -> None:
    design = plan_design(changes)
    order = design.schedule(repeats)
    expected = {(c.key, r) for c in design.cells for r in range(repeats)}
    assert Counter(order) == Counter(expected)
    assert len(order) == len(design.cells) * repeats
    rounds = [r for _, r in order]
    assert rounds == sorted(rounds)  # a round is complete before the next one starts


def test_rounds_run_forward_then_backward() -> None:
    design = plan_design(DESIGNS["gauge and three engine"])
    keys = [c.key for c in design.cells]
    order = design.schedule(4)
    n = len(keys)
    for round_ in range(4):
        measured = [key for key, r in order[round_ * n:(round_ + 1) * n] if r == round_]
        assert measured == (keys if round_ % 2 == 0 else keys[::-1])


@pytest.mark.parametrize("changes", DESIGNS.values(), ids=DESIGNS.keys())
@pytest.mark.parametrize("repeats", [2, 4, 6])
def test_over_an_even_number_of_rounds_every_cell_sits_at_the_same_mean_position(
        changes: list[Any], repeats: int) -> None:
    design = plan_design(changes)
    means = mean_positions(design, repeats)
    centre = (len(design.cells) * repeats - 1) / 2
    assert means == pytest.approx(dict.fromkeys(means, centre))


def test_an_odd_number_of_rounds_leaves_the_order_unbalanced() -> None:
    means = mean_positions(plan_design(DESIGNS["two engine changes"]), 3)
    assert len(set(means.values())) > 1  # why the repeats should be even


# ---- end to end: the same drift, interleaved and not --------------------------------------
DRIFT = 0.005  # +0.5% of the value per measurement: strong, and linear
REPEATS = 6


def drifting_cells(design: Design, position_of: dict[tuple[str, int], int]) -> dict[str, Any]:
    """Every cell has the same true value (100); each measurement reads it with the drift of
    its position in the measuring order, plus 0.2% noise."""
    rng = np.random.default_rng(11)
    cells: dict[str, Any] = {}
    for cell in design.cells:
        values = [100.0 * (1 + DRIFT * position_of[(cell.key, r)])
                  * (1 + 0.002 * rng.standard_normal()) for r in range(REPEATS)]
        cells[cell.key] = {"values": {"x": values}, "failed": None, "invalid_metrics": []}
    return cells


def drift_analysis(naive: bool) -> dict[str, Any]:
    changes = DESIGNS["gauge and three engine"]
    design = plan_design(changes)
    if naive:  # every repeat of one cell, then the next cell
        slots = [(c.key, r) for c in design.cells for r in range(REPEATS)]
    else:
        slots = design.schedule(REPEATS)
    position_of = {slot: i for i, slot in enumerate(slots)}
    return analyse(synth.inputs(changes, design, drifting_cells(design, position_of)))


def verdicts(out: dict[str, Any]) -> dict[str, str]:
    found = {c["name"]: c["verdict"] for c in out["changes"]}
    found |= {i["id"]: i["verdict"] for i in out["interactions"]}
    return found | {"total": out["total"]["verdict"]}


def test_interleaved_drift_cancels_and_nothing_is_attributed() -> None:
    out = drift_analysis(naive=False)
    assert set(verdicts(out).values()) == {NOT_ATTRIBUTABLE}, verdicts(out)
    for entry in [*out["changes"], *out["interactions"], out["total"]]:
        assert abs(entry["effect"]) < 0.005, entry  # while the drift spans +26% of the order


def test_the_same_drift_measured_cell_after_cell_fakes_an_effect() -> None:
    out = drift_analysis(naive=True)
    assert out["total"]["verdict"] == IMPROVES
    assert out["total"]["effect"] > 0.05  # 'kept' ran 42 measurements after 'baseline'
    assert synth.change(out, "c")["verdict"] == IMPROVES  # '+c' ran 18 after 'baseline'
