"""Synthetic control experiments with a known truth, for the attribution tests.

A *truth* gives each cell of a design its true value per metric; :func:`measure` draws the
repeats with seeded relative noise (or none), and :func:`inputs` packs them as the record the
ATTRIBUTE state hands to ``analyse`` (changes, design, cells, metrics and the gate's settings).
The truth used most is multiplicative: each change has its own relative effect and each group of
changes an extra joint one, so on the log scale own effects and interactions are exactly the
quantities the analysis estimates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tunegate.attribution.changes import Change
from tunegate.attribution.design import Cell, Design

Truth = Callable[[Cell], Mapping[str, float]]
"""The true value of each metric in a cell."""

GATE = {"alpha": 0.05, "fdr": 0.05, "multiplier": 2.0, "floor": 0.03}
"""The gate's defaults: 95% intervals, BH at 5%, threshold max(2 sigma, 3%)."""


def engine(name: str, layer: str = "features") -> Change:
    return Change(name, "engine", layer, False, True)


def gauge(setting: str) -> Change:
    return Change(f"benchmark.{setting}", "gauge", "gauge", False, True)


def multiplicative(own: Mapping[str, float],
                   joint: Mapping[frozenset[str], float] | None = None,
                   *, metric: str = "x", base: float = 100.0) -> Truth:
    """``base x prod(1 + own[c]) x prod(1 + joint[g])`` over the changes ``c`` a cell has on and
    the groups ``g`` it contains whole."""
    groups = dict(joint or {})

    def truth(cell: Cell) -> dict[str, float]:
        value = base
        for name in cell.on:
            value *= 1 + own.get(name, 0.0)
        for group, extra in groups.items():
            if group <= cell.on:
                value *= 1 + extra
        return {metric: value}

    return truth


def measure(design: Design, truth: Truth, *, seed: int = 0, repeats: int = 6,
            noise: float = 0.02) -> dict[str, dict[str, Any]]:
    """Each cell's repeats: its true values times ``1 + noise x N(0, 1)`` (``noise`` 0: the
    same value every repeat, a noise-free simulator)."""
    rng = np.random.default_rng(seed)
    cells: dict[str, dict[str, Any]] = {}
    for cell in design.cells:
        values = {m: [float(v) for v in true * (1 + noise * rng.standard_normal(repeats))]
                  for m, true in truth(cell).items()}
        cells[cell.key] = {"values": values, "failed": None, "invalid_metrics": []}
    return cells


def inputs(changes: Sequence[Change], design: Design, cells: Mapping[str, Any],
           metrics: Iterable[tuple[str, str]] = (("x", "higher"),),
           **gate: float) -> dict[str, Any]:
    """What ``analyse`` reads; ``metrics`` as ``(name, direction)``, the objective first."""
    return {"changes": [c.to_dict() for c in changes], "design": design.to_dict(),
            "cells": dict(cells),
            "metrics": [{"name": n, "direction": d} for n, d in metrics],
            **{**GATE, **gate}}


def change(out: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The entry of ``name`` in an analysis's ``changes``."""
    found: dict[str, Any] = next(c for c in out["changes"] if c["name"] == name)
    return found


def interaction(out: Mapping[str, Any], ident: str) -> dict[str, Any]:
    """The entry ``ident`` (``"a x b"``) in an analysis's ``interactions``."""
    found: dict[str, Any] = next(i for i in out["interactions"] if i["id"] == ident)
    return found


def log1p(effect: float) -> float:
    """An effect back on the log scale, where effects add up."""
    return math.log1p(effect)
