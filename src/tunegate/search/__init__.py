"""Search: the space (layers, traffic lights, constraints), proposers behind ask/tell, and the
delivery (Pareto set, knee, recommendation).

Modules: ``space``/``constraints`` (what may change), ``objectives`` (up to five, SLOs as
outcome constraints), ``design`` (Sobol/LHS + the default config), ``proposer`` (the ask/tell
interface and the Sobol + local baseline), ``bayes``/``acquisition``/``surrogate`` (GP
Bayesian optimisation, BoTorch, imported lazily), ``sweep`` (layered coarse sweep for small
budgets), ``selection`` (which proposer, and why), ``fidelity`` (successive halving,
Hyperband, ASHA), ``pareto``/``delivery``/``plot`` (front, knee, recommendation, PNG),
``storage`` (the Optuna study mirror).
"""

from __future__ import annotations

from tunegate.search.bayes import BayesProposer
from tunegate.search.delivery import deliver, hypervolume_per_round
from tunegate.search.objectives import MAX_OBJECTIVES, Objective, OutcomeConstraint
from tunegate.search.proposer import BaseProposer, Observation, Proposal, SobolLocalProposer
from tunegate.search.selection import select_proposer
from tunegate.search.space import Config, Constraint, Layer, Light, Param, SearchSpace
from tunegate.search.sweep import LayeredSweepProposer

__all__ = [
           "MAX_OBJECTIVES",
           "BaseProposer",
           "BayesProposer",
           "Config",
           "Constraint",
           "Layer",
           "LayeredSweepProposer",
           "Light",
           "Objective",
           "Observation",
           "OutcomeConstraint",
           "Param",
           "Proposal",
           "SearchSpace",
           "SobolLocalProposer",
           "deliver",
           "hypervolume_per_round",
           "select_proposer",
]
