"""The Sobol + local refinement proposer: deterministic, constraint-respecting, exploring."""

from __future__ import annotations

from tunegate.search.proposer import SobolLocalProposer
from tunegate.search.space import Constraint, Layer, Param, SearchSpace

SPACE = SearchSpace.of([
    Param("x", "int", Layer.SCHEDULING, low=0, high=100, default=50),
    Param("y", "float", Layer.MEMORY_CONCURRENCY, low=0.0, high=1.0, default=0.5),
])


def _objective(config: dict) -> float:
    return -((config["x"] - 70) ** 2) / 100 - (config["y"] - 0.3) ** 2 * 10


def _run(seed: int, rounds: int = 30) -> list:
    proposer = SobolLocalProposer(SPACE, seed=seed, initial=8)
    proposals = []
    for _ in range(rounds):
        proposal = proposer.ask()
        proposer.tell(proposal.trial, _objective(proposal.config))
        proposals.append(proposal)
    return proposals


def test_same_seed_same_proposals() -> None:
    assert [p.config for p in _run(3)] == [p.config for p in _run(3)]
    assert [p.config for p in _run(3)] != [p.config for p in _run(4)]


def test_starts_with_sobol_and_injects_a_random_point_every_five_rounds() -> None:
    reasons = [p.reason for p in _run(0, 15)]
    assert reasons[:4] == ["sobol"] * 4
    assert [reasons[i] for i in (4, 9, 14)] == ["random"] * 3
    assert "local" in reasons[8:]


def test_local_refinement_improves_on_the_initial_design() -> None:
    proposals = _run(1, 30)
    initial_best = max(_objective(p.config) for p in proposals[:8])
    final_best = max(_objective(p.config) for p in proposals)
    assert final_best > initial_best
    assert final_best > -1.0  # near x=70, y=0.3


def test_failures_are_data_not_exceptions() -> None:
    proposer = SobolLocalProposer(SPACE, seed=0, initial=2)
    for _ in range(6):
        proposal = proposer.ask()
        proposer.tell(proposal.trial, None)  # every start failed
    assert len(proposer.observations) == 6


def test_proposals_satisfy_constraints() -> None:
    space = SearchSpace.of(SPACE.params, [
        Constraint("x <= 100 * y", lambda c: c if c["x"] <= 100 * c["y"] else None)])
    proposer = SobolLocalProposer(space, seed=0)
    for _ in range(20):
        proposal = proposer.ask()
        assert proposal.config["x"] <= 100 * proposal.config["y"]
