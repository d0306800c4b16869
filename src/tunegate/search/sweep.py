"""Layered coarse sweep plus local refinement: the strategy for budgets too small for BO.

With a dozen rounds, Bayesian optimisation's cold start (its initial
design alone) eats most of the budget. A structured search spends it better:

1. **Coarse sweep, layer by layer**, in the layers' order (memory & concurrency, scheduling,
   feature switches, parallelism, environment): each parameter in turn is set to a few coarse
   levels (every value of a bool or categorical; 1/6, 1/2 and 5/6 of a numeric range) while
   every other parameter stays at the incumbent, the best config observed so far. The first
   layers are swept first because they usually matter most; a budget that runs out mid-sweep
   has spent itself where it counts.
2. **Local refinement**: numeric parameters, one at a time in a cycle, are nudged up and down
   around the incumbent with a step that shrinks by ``shrink`` per full cycle.

Everything is a pure function of the history (the incumbent is recomputed at each ask), so a
replayed history gives the same proposals. A purely random point every ``random_every`` rounds
is available but off by default here: a tiny budget has no round to spare for it.
"""

from __future__ import annotations

import numpy as np

from tunegate.search.design import snap
from tunegate.search.proposer import BaseProposer
from tunegate.search.space import Layer, SearchSpace

__all__ = ["LayeredSweepProposer"]

_LEVELS = (1 / 6, 1 / 2, 5 / 6)


class LayeredSweepProposer(BaseProposer):
    """Coarse one-parameter-at-a-time sweep by layer, then local refinement (module docs).

    Example:
        >>> from tunegate.search.space import Layer, Param, SearchSpace
        >>> space = SearchSpace.of([
        ...     Param("seqs", "int", Layer.MEMORY_CONCURRENCY, low=1, high=60, default=30),
        ...     Param("eager", "bool", Layer.FEATURES, default=True)])
        >>> proposer = LayeredSweepProposer(space, seed=0)
        >>> [proposer.ask().config for _ in range(3)]  # doctest: +NORMALIZE_WHITESPACE
        [{'seqs': 11, 'eager': True}, {'seqs': 31, 'eager': True},
         {'seqs': 51, 'eager': True}]
    """

    name = "layered_sweep"
    version = "1"

    def __init__(self, space: SearchSpace, seed: int = 0, *, step: float = 0.12,
                 shrink: float = 0.5, random_every: int = 0) -> None:
        super().__init__(space, seed)
        self.step = step
        self.shrink = shrink
        self.random_every = random_every
        self._plan = self._sweep_plan()
        self._cursor = 0
        self._local = 0

    def _sweep_plan(self) -> list[tuple[int, float]]:
        order = {layer: i for i, layer in enumerate(Layer)}
        indexed = sorted(enumerate(self.space.tunable), key=lambda ip: (order[ip[1].layer], ip[0]))
        plan = []
        for i, param in indexed:
            if param.kind in ("bool", "categorical"):
                plan += [(i, param.to_unit(v)) for v in param.values]
            else:
                plan += [(i, level) for level in _LEVELS]
        return plan

    def incumbent(self) -> tuple[float, ...]:
        """The best observed config's unit point (the default config before any value)."""
        scored = {o.trial: o.value for o in self.observations
                  if o.value is not None and 0 <= o.trial < len(self.proposals)}
        if scored:
            best = max(sorted(scored), key=lambda t: scored[t])
            return tuple(self.space.to_unit(self.proposals[best].config))
        default = self.space.default()
        if all(p.name in default for p in self.space.tunable):
            return tuple(self.space.to_unit(default))
        if self.proposals:
            return tuple(self.space.to_unit(self.proposals[0].config))
        return tuple([0.5] * self.space.dims)

    def _seen(self) -> set[tuple[float, ...]]:
        return {tuple(self.space.to_unit(p.config)) for p in self.proposals}

    def _next_point(self) -> tuple[tuple[float, ...], str]:
        round_number = len(self.proposals) + 1
        rng = np.random.default_rng([self.seed, round_number, 11])
        if self.random_every and round_number % self.random_every == 0:
            return snap(self.space, rng.random(self.space.dims)), "random"
        base = self.incumbent()
        seen = self._seen()
        while self._cursor < len(self._plan):
            index, level = self._plan[self._cursor]
            self._cursor += 1
            point = snap(self.space, [level if i == index else u for i, u in enumerate(base)])
            if point not in seen:
                return point, f"sweep:{self.space.tunable[index].name}"
        numeric = [i for i, p in enumerate(self.space.tunable)
                   if p.kind not in ("bool", "categorical")]
        for _ in range(4 * max(len(numeric), 1)):
            if not numeric:
                break
            cycle, position = divmod(self._local, 2 * len(numeric))
            self._local += 1
            index = numeric[position // 2]
            delta = self.step * self.shrink ** cycle * (1 if position % 2 == 0 else -1)
            moved = [min(max(u + delta, 0.0), 1.0) if i == index else u
                     for i, u in enumerate(base)]
            point = snap(self.space, moved)
            if point not in seen:
                return point, f"refine:{self.space.tunable[index].name}"
        return snap(self.space, rng.random(self.space.dims)), "random"
