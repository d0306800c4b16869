"""Which configs the control experiment measures, and in which order.

With up to :data:`MAX_FACTORIAL` engine or environment changes every combination is measured
(the full factorial, ``2**k`` configs): each change's own effect, every interaction and the
Shapley values all follow exactly. With more, the factorial grows too fast, so each change is
measured alone on the baseline (*add-one*) and taken out of the kept config (*leave-one-out*):
``2k + 2`` configs. A change whose two estimates disagree interacts with the others, and that
interaction is reported as not separable by this design rather than credited to anyone.

Gauge changes are measured on the baseline's engine parameters only: the baseline with the gauge
as it was first configured (``gauge-before``), and, with several gauge fixes, with each fix
alone. Every engine cell is measured with the fixed gauge.

The order is interleaved: each round measures every cell once, and every other round runs the
cells backwards (A B C C B A A B C ...). Over an even number of rounds every cell sits at the same
mean position, so a linear drift of the machine adds the same amount to every cell and cancels
from every contrast instead of biasing whichever config ran last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

from tunegate.attribution.changes import BENCH_PREFIX, Change

__all__ = ["ALWAYS_FACTORIAL", "BASELINE", "GAUGE_BEFORE", "KEPT", "MAX_FACTORIAL", "Cell",
           "Design", "plan_design"]

MAX_FACTORIAL = 4
"""Engine changes up to which the full factorial is measured (16 configs)."""
ALWAYS_FACTORIAL = 3
"""Up to this many changes the factorial is measured whatever ``max_factorial`` says: ``2**k``
configs are then no more than one at a time's ``2k + 2``, and tell more."""

BASELINE = "baseline"
"""The cell with no engine change (and the fixed gauge)."""
KEPT = "kept"
"""The cell with every engine change: the kept config as it serves."""
GAUGE_BEFORE = "gauge-before"
"""The baseline's engine parameters measured with the gauge as it was first configured."""

Method = Literal["factorial", "one_at_a_time", "gauge_only", "none"]


@dataclass(frozen=True, slots=True)
class Cell:
    """One config of the experiment.

    Attributes:
        key: Its name in results and the journal (``baseline``, ``kept``,
            ``+enable_chunked_prefill``, ``kept-max_num_seqs``, ``gauge-before``...).
        on: The engine and environment changes applied to the baseline.
        gauge_on: The gauge changes applied (every one, except in the gauge cells).
    """

    key: str
    on: frozenset[str]
    gauge_on: frozenset[str]

    def params(self, changes: Sequence[Change], baseline: dict[str, Any]) -> dict[str, Any]:
        """The engine parameters this cell runs (the baseline's, with its changes applied)."""
        params = dict(baseline)
        for change in changes:
            if change.name in self.on:
                if change.after is None:
                    params.pop(change.name, None)
                else:
                    params[change.name] = change.after
        return params

    def bench(self, changes: Sequence[Change], before: dict[str, Any]) -> dict[str, Any]:
        """The ``[benchmark]`` settings this cell is measured with."""
        bench = dict(before)
        for change in changes:
            if change.name in self.gauge_on:
                bench[change.name.removeprefix(BENCH_PREFIX)] = change.after
        return bench

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "on": sorted(self.on), "gauge_on": sorted(self.gauge_on)}


@dataclass(frozen=True, slots=True)
class Design:
    """The experiment: its method and its cells, in measuring order for the first round."""

    method: Method
    cells: tuple[Cell, ...]

    def schedule(self, repeats: int) -> list[tuple[str, int]]:
        """``(cell key, round)`` in measuring order: forward, backward, forward...

        Example:
            >>> d = Design("factorial", (Cell("a", frozenset(), frozenset()),
            ...                          Cell("b", frozenset({"x"}), frozenset())))
            >>> d.schedule(2)
            [('a', 0), ('b', 0), ('b', 1), ('a', 1)]
        """
        order: list[tuple[str, int]] = []
        for round_ in range(repeats):
            keys = [c.key for c in self.cells]
            order += [(key, round_) for key in (keys if round_ % 2 == 0 else keys[::-1])]
        return order

    def cell(self, key: str) -> Cell:
        return next(c for c in self.cells if c.key == key)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "cells": [c.to_dict() for c in self.cells]}


def _key(on: frozenset[str], every: frozenset[str]) -> str:
    if not on:
        return BASELINE
    if on == every:
        return KEPT
    if len(on) == len(every) - 1:
        return f"{KEPT}-{next(iter(every - on))}" if len(every) > 2 else "+" + "+".join(sorted(on))
    return "+" + "+".join(sorted(on))


def plan_design(changes: Sequence[Change], *, max_factorial: int = MAX_FACTORIAL) -> Design:
    """The cells that separate ``changes`` (see the module docstring).

    Example:
        >>> from tunegate.attribution.changes import Change
        >>> cs = [Change("benchmark.stream", "gauge", "gauge", False, True),
        ...       Change("a", "engine", "features", 0, 1), Change("b", "engine", "features", 0, 1)]
        >>> [c.key for c in plan_design(cs).cells]
        ['gauge-before', 'baseline', '+a', '+b', 'kept']
    """
    if not changes:
        return Design("none", ())
    gauge = frozenset(c.name for c in changes if c.kind == "gauge")
    engine = [c.name for c in changes if c.kind != "gauge"]
    every = frozenset(engine)
    cells: list[Cell] = []
    if gauge:
        cells.append(Cell(GAUGE_BEFORE, frozenset(), frozenset()))
        if len(gauge) > 1:
            cells += [Cell(f"{GAUGE_BEFORE}+{g}", frozenset(), frozenset({g}))
                      for g in sorted(gauge)]
    subsets: list[frozenset[str]]
    # up to three changes the factorial (2^k) costs no more than one at a time (2k + 2)
    if len(engine) <= max(max_factorial, ALWAYS_FACTORIAL):
        method: Method = "factorial" if engine else "gauge_only"
        subsets = [frozenset(s) for size in range(len(engine) + 1)
                   for s in combinations(engine, size)]
    else:
        method = "one_at_a_time"
        subsets = ([frozenset()] + [frozenset({name}) for name in engine]
                   + [every - {name} for name in engine] + [every])
    cells += [Cell(_key(s, every), s, gauge) for s in subsets]
    return Design(method, tuple(cells))
