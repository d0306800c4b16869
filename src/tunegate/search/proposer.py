"""Proposers behind an ask/tell interface: the tuner asks for a config, then tells its value.

:class:`BaseProposer` is the small interface every search strategy implements (as Optuna's
samplers do). Configs that fail to start are told as failures (``None``): a crash is data, not
an exception. A proposer is deterministic in the sequence of calls it receives, so the same
history fed again, whole or in steps, gives the same proposals (replay relies on it).

The tuner's strategies live beside this module: :class:`~tunegate.search.sweep.LayeredSweepProposer`
for small budgets and :class:`~tunegate.search.bayes.BayesProposer` otherwise, chosen by
:func:`~tunegate.search.selection.select_proposer`. :class:`SobolLocalProposer` is chosen by
no run: a model-free reference with no heavy dependency (a scrambled Sobol design, then local
refinement around the best point with a shrinking radius, and one random point every
``random_every`` rounds), for comparing strategies and for tests. (The ``sobol_local/1``
version found in old decision logs names the tuner's proposer component of that time, which
ran Bayesian optimisation, not this class.)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import qmc

from tunegate.search.space import Config, SearchSpace

__all__ = ["BaseProposer", "Observation", "Proposal", "SharedResult", "SobolLocalProposer"]


@dataclass(frozen=True, slots=True)
class Proposal:
    """One config to try, and why it was chosen (``sobol``, ``local``, ``random``)."""

    trial: int
    config: Config
    reason: str
    point: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Observation:
    """What the tuner learnt about a proposal: its objective (higher is better) or a failure.

    ``values`` holds the measured metrics by name (objectives and SLO metrics) when the caller
    has them; a multi-objective proposer reads those, a single-objective one ``value``.
    """

    trial: int
    value: float | None
    kept: bool = False
    values: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SharedResult:
    """A config evaluated outside this run: by another worker of the same search (read from a
    shared study) or by an earlier run in the knowledge base (a warm start). What its proposer
    was told, without a trial number of this run.

    ``weight`` in (0, 1]: how far the model trusts it; 1 is a result of this very search, less
    is a result from a similar environment (the model gives it extra noise, so this run's own
    data wins wherever they disagree).
    """

    config: Config
    value: float | None
    values: Mapping[str, float] = field(default_factory=dict)
    weight: float = 1.0


class BaseProposer(ABC):
    """Ask/tell search strategy over a :class:`SearchSpace`."""

    name: str = "base"
    version: str = "1"

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        self.space = space
        self.seed = seed
        self.observations: list[Observation] = []
        self.proposals: list[Proposal] = []
        self.shared: list[SharedResult] = []
        """Other workers' results (:meth:`learn`); only Bayesian optimisation models them."""
        self.selection: dict[str, Any] = {}
        """Which strategy was chosen and why (set by ``search.select``; shown in reports)."""

    @abstractmethod
    def _next_point(self) -> tuple[tuple[float, ...], str]:
        """A point in ``[0, 1]^dims`` and the reason it was chosen."""

    def ask(self) -> Proposal:
        """The next config (constraints repaired; a point that cannot be repaired is skipped)."""
        for _ in range(100):
            point, reason = self._next_point()
            config = self.space.repair(self.space.from_unit(point))
            if config is not None:
                proposal = Proposal(len(self.proposals), config, reason, point)
                self.proposals.append(proposal)
                return proposal
        raise RuntimeError("no point satisfying the constraints in 100 draws")

    def register(self, config: Config, reason: str) -> Proposal:
        """Record a proposal made outside the strategy (the baseline, a known remedy), so that
        refinement can build on it."""
        point = tuple(self.space.to_unit(config))
        proposal = Proposal(len(self.proposals), dict(config), reason, point)
        self.proposals.append(proposal)
        return proposal

    def tell(self, trial: int, value: float | None, *, kept: bool = False,
             values: Mapping[str, float] | None = None) -> None:
        """Record a proposal's objective (higher is better), ``None`` when it failed.

        ``values``: the measured metrics by name (for several objectives and SLOs).
        """
        self.observations.append(Observation(trial, value, kept, dict(values or {})))

    def learn(self, config: Config, value: float | None,
              values: Mapping[str, float] | None = None, weight: float = 1.0) -> bool:
        """Record a result from outside this run (``value`` ``None``: it failed to start), with
        the ``weight`` the model gives it (see :class:`SharedResult`). Returns ``False``,
        recording nothing, when ``config`` lacks a tunable parameter or holds a value outside
        the space (another version of the space wrote it)."""
        if any(p.name not in config or not p.contains(config[p.name])
               for p in self.space.tunable):
            return False
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"weight {weight} is not in (0, 1]")
        self.shared.append(SharedResult(dict(config), value, dict(values or {}), weight))
        return True

    def state(self) -> dict[str, Any]:
        """Everything needed to rebuild this proposer by replaying asks and tells."""
        return {"name": self.name, "version": self.version, "seed": self.seed,
                "proposals": len(self.proposals), "observations": len(self.observations),
                "shared": len(self.shared), "selection": dict(self.selection)}


class SobolLocalProposer(BaseProposer):
    """Sobol start, local refinement around the best, a random point every few rounds.

    Example:
        >>> from tunegate.search.space import Layer, Param, SearchSpace
        >>> space = SearchSpace.of([Param("x", "int", Layer.SCHEDULING, low=1, high=64)])
        >>> proposer = SobolLocalProposer(space, seed=0, initial=4)
        >>> [proposer.ask().reason for _ in range(5)]
        ['sobol', 'sobol', 'sobol', 'sobol', 'random']
    """

    name = "sobol_local"

    def __init__(self, space: SearchSpace, seed: int = 0, *, initial: int = 8,
                 random_every: int = 5, radius: float = 0.25, shrink: float = 0.7) -> None:
        super().__init__(space, seed)
        self.initial = initial
        self.random_every = random_every
        self.radius = radius
        self.shrink = shrink
        self._rng = np.random.default_rng(seed)
        dims = max(space.dims, 1)
        self._design = qmc.Sobol(d=dims, scramble=True, seed=seed).random(
            max(2, 1 << max(initial - 1, 1).bit_length()))
        self._design_cursor = 0

    def _best(self) -> tuple[float, ...] | None:
        scored = {o.trial: o.value for o in self.observations if o.value is not None}
        if not scored:
            return None
        best_trial = max(scored, key=lambda t: scored[t])
        return self.proposals[best_trial].point

    def _next_point(self) -> tuple[tuple[float, ...], str]:
        round_number = len(self.proposals) + 1
        if self.random_every and round_number % self.random_every == 0:
            return tuple(self._rng.random(self.space.dims)), "random"
        if len(self.proposals) < self.initial and self._design_cursor < len(self._design):
            row = self._design[self._design_cursor]
            self._design_cursor += 1  # advances on rejected points too
            return tuple(float(x) for x in row[: self.space.dims]), "sobol"
        best = self._best()
        if best is None:
            return tuple(self._rng.random(self.space.dims)), "random"
        local_rounds = len(self.proposals) - self.initial
        radius = self.radius * self.shrink ** (local_rounds / 3)
        step = self._rng.normal(0.0, radius, self.space.dims)
        return tuple(float(x) for x in np.clip(np.asarray(best) + step, 0.0, 1.0)), "local"


