"""Search: the space (layers, traffic lights, constraints) and proposers behind ask/tell."""

from __future__ import annotations

from tunegate.search.proposer import BaseProposer, Observation, Proposal, SobolLocalProposer
from tunegate.search.space import Config, Constraint, Layer, Light, Param, SearchSpace

__all__ = ["BaseProposer", "Config", "Constraint", "Layer", "Light", "Observation", "Param",
           "Proposal", "SearchSpace", "SobolLocalProposer"]
