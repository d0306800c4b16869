"""Which proposer a budget gets, and the layered sweep used for small budgets."""

from __future__ import annotations

from tunegate.search.bayes import BayesProposer
from tunegate.search.selection import SMALL_BUDGET, min_bo_budget, select_proposer
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.search.sweep import LayeredSweepProposer
from tunegate.tuner.deciders import build_proposer, replay_history

SPACE = SearchSpace.of([
    Param("eager", "bool", Layer.FEATURES, default=True),
    Param("tokens", "log_int", Layer.SCHEDULING, low=512, high=8192, default=2048),
    Param("seqs", "int", Layer.MEMORY_CONCURRENCY, low=1, high=120, default=60),
])


def _objective(config: dict) -> float:
    return -abs(config["seqs"] - 80) / 10 - (2.0 if config["eager"] else 0.0)


def test_small_budgets_get_the_layered_sweep_and_say_why() -> None:
    threshold = min_bo_budget(SPACE)
    assert threshold >= SMALL_BUDGET
    small = select_proposer(SPACE, 0, budget=threshold - 1)
    assert isinstance(small, LayeredSweepProposer)
    assert small.selection["proposer"] == "layered_sweep"
    assert "cold start would eat the budget" in small.selection["reason"]
    assert small.state()["selection"]["budget"] == threshold - 1
    large = select_proposer(SPACE, 0, budget=threshold)
    assert isinstance(large, BayesProposer) and "Bayesian" in large.selection["reason"]
    assert isinstance(select_proposer(SPACE, 0), BayesProposer)  # unknown budget
    assert build_proposer(SPACE, 0, budget=10).selection["proposer"] == "layered_sweep"


def test_sweep_goes_layer_by_layer_then_refines() -> None:
    proposer = LayeredSweepProposer(SPACE, seed=0)
    reasons = []
    for _ in range(14):
        proposal = proposer.ask()
        proposer.tell(proposal.trial, _objective(proposal.config))
        reasons.append(proposal.reason)
    swept = [r.split(":")[1] for r in reasons if r.startswith("sweep:")]
    # memory & concurrency first, then scheduling, then the feature switch
    assert swept[0] == "seqs" and swept.index("tokens") < swept.index("eager")
    assert any(r.startswith("refine:") for r in reasons)
    best = max(o.value for o in proposer.observations if o.value is not None)
    assert best >= -1.0  # seqs near 80, eager off


def test_sweep_replays_to_the_same_next_config() -> None:
    history = []
    live = build_proposer(SPACE, 3, budget=8)
    live.register(SPACE.default(), "baseline")
    history.append({"op": "register", "config": SPACE.default(), "reason": "baseline"})
    live.tell(0, _objective(SPACE.default()), kept=True)
    history.append({"op": "tell", "trial": 0, "value": _objective(SPACE.default()),
                    "kept": True})
    for _ in range(5):
        proposal = live.ask()
        history.append({"op": "ask"})
        live.tell(proposal.trial, _objective(proposal.config))
        history.append({"op": "tell", "trial": proposal.trial,
                        "value": _objective(proposal.config)})
    rebuilt = build_proposer(SPACE, 3, budget=8)
    replay_history(rebuilt, history)
    assert rebuilt.ask().config == live.ask().config
