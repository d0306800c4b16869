"""Bayesian optimisation: determinism, replay, SLOs, several objectives, crashes as data."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective, OutcomeConstraint
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.search.surrogate import FeasibilityModel
from tunegate.tuner.deciders import replay_history

SPACE = SearchSpace.of([
    Param("x", "float", Layer.SCHEDULING, low=0.0, high=1.0, default=0.5),
    Param("y", "int", Layer.MEMORY_CONCURRENCY, low=0, high=40, default=20),
    Param("flag", "bool", Layer.FEATURES, default=False),
])
FAST = {"initial": 5, "raw_samples": 64, "restarts": 2}


def _f(config: dict) -> float:
    return -((config["x"] - 0.7) ** 2) * 4 - ((config["y"] - 30) / 20) ** 2 \
        + (0.3 if config["flag"] else 0.0)


def _run(seed: int, rounds: int, *, crash=lambda c: False, **options) -> BayesProposer:
    proposer = BayesProposer(SPACE, seed, **{**FAST, **options})
    for _ in range(rounds):
        proposal = proposer.ask()
        value = None if crash(proposal.config) else _f(proposal.config)
        proposer.tell(proposal.trial, value, values={} if value is None else {
            "value": value, "latency": 10 * proposal.config["x"]})
    return proposer


def test_same_seed_same_proposals_and_the_model_takes_over() -> None:
    a, b = _run(1, 10), _run(1, 10)
    assert [p.config for p in a.proposals] == [p.config for p in b.proposals]
    assert [p.config for p in a.proposals] != [p.config for p in _run(2, 10).proposals]
    reasons = [p.reason for p in a.proposals]
    assert reasons[0] == "default" and reasons[4] == "random" and reasons[9] == "random"
    assert {"gp-logei", "gp-local"} & set(reasons[5:])


def test_replaying_the_history_gives_the_same_next_config() -> None:
    live = BayesProposer(SPACE, 5, **FAST)
    history: list[dict] = []
    for _ in range(8):
        proposal = live.ask()
        history.append({"op": "ask"})
        live.tell(proposal.trial, _f(proposal.config))
        history.append({"op": "tell", "trial": proposal.trial, "value": _f(proposal.config)})
    expected = live.ask()
    assert expected.reason.startswith("gp-")
    rebuilt = BayesProposer(SPACE, 5, **FAST)
    replay_history(rebuilt, history)
    again = rebuilt.ask()
    assert (again.config, again.reason) == (expected.config, expected.reason)


def test_finds_the_optimum_region_within_a_small_budget() -> None:
    proposer = _run(0, 16)
    best = max(o.value for o in proposer.observations if o.value is not None)
    assert best > 0.2  # optimum 0.3 at x=0.7, y=30, flag on
    trial = proposer.recommend()
    assert trial is not None and proposer.proposals[trial].config["flag"] is True


def test_feasibility_model_learns_where_configs_crash() -> None:
    rng = np.random.default_rng(0)
    X = rng.random((24, 3))
    started = X[:, 0] < 0.5
    model = FeasibilityModel(X, started, seed=0)
    safe, crashing = model.prob(np.array([[0.2, 0.5, 0.5]])), model.prob(
        np.array([[0.85, 0.5, 0.5]]))
    assert safe[0] > 0.7 and crashing[0] < 0.3
    assert FeasibilityModel(X, np.ones(24, dtype=bool), seed=0).trivial


def test_search_steers_away_from_a_crashing_region() -> None:
    def crash(config: dict) -> bool:
        return config["x"] > 0.8

    proposer = _run(4, 16, crash=crash)
    model_rounds = [p for p in proposer.proposals if p.reason.startswith("gp-")]
    assert len(model_rounds) >= 5
    crashed = sum(crash(p.config) for p in model_rounds)
    assert crashed <= 1, [p.config for p in model_rounds]


def test_slos_are_outcome_constraints() -> None:
    slo = OutcomeConstraint("latency", "<=", 6.0)  # x <= 0.6: the optimum x=0.7 is excluded
    proposer = _run(3, 14, outcome_constraints=(slo,))
    model_rounds = [p for p in proposer.proposals if p.reason.startswith("gp-")]
    inside = sum(10 * p.config["x"] <= 6.0 + 0.5 for p in model_rounds)
    assert inside >= len(model_rounds) - 1
    trial = proposer.recommend()
    assert trial is not None and 10 * proposer.proposals[trial].config["x"] <= 6.0


def test_several_objectives_use_qlognehvi_and_deliver_a_front() -> None:
    objectives = (Objective("value"), Objective("latency", "lower"))
    proposer = _run(0, 9, objectives=objectives)
    assert proposer.proposals[-2].reason == "gp-qlognehvi" or any(
        p.reason == "gp-qlognehvi" for p in proposer.proposals)
    front = proposer.recommend_front()
    assert front and all(0 <= t < len(proposer.proposals) for t in front)


def test_ucb_refuses_slos() -> None:
    from tunegate.errors import ConfigError

    with pytest.raises(ConfigError, match="ucb"):
        BayesProposer(SPACE, 0, acquisition="ucb",
                      outcome_constraints=(OutcomeConstraint("latency", "<=", 1.0),))
    proposer = _run(0, 8, acquisition="ucb")
    assert any(p.reason == "gp-ucb" for p in proposer.proposals)


def test_every_proposal_satisfies_the_known_constraints() -> None:
    from tunegate.search.constraints import parse_constraints

    params = [Param("chunked", "bool", Layer.FEATURES, default=True),
              Param("tokens", "log_int", Layer.SCHEDULING, low=512, high=8192, default=2048),
              Param("seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8, high=1024, default=256)]
    rules = ["chunked or tokens >= 4096", "seqs <= tokens"]
    space = SearchSpace.of(params, parse_constraints(rules, params))
    proposer = BayesProposer(space, 0, **FAST)
    for _ in range(8):
        proposal = proposer.ask()
        config = proposal.config
        assert config["chunked"] or config["tokens"] >= 4096
        assert config["seqs"] <= config["tokens"]
        proposer.tell(proposal.trial, -abs(config["seqs"] - 100) / 100)


# ---- other workers' results (a shared study) -------------------------------------------------
def _shared_from(worker: BayesProposer) -> list[dict]:
    """``learn`` events for everything ``worker`` was told, as a shared study hands them on."""
    return [{"op": "learn", "run": "other", "trial": o.trial,
             "config": worker.proposals[o.trial].config, "value": o.value,
             "values": dict(o.values)} for o in worker.observations]


def test_another_workers_results_replace_the_initial_design() -> None:
    other = _run(7, 8)
    joiner = BayesProposer(SPACE, 1, **FAST)
    replay_history(joiner, _shared_from(other))
    assert len(joiner.shared) == 8 and joiner.proposals == []
    X_ok, _, X_all, _ = joiner.dataset()
    assert len(X_ok) == len(X_all) == 8
    first = joiner.ask()
    assert first.trial == 0 and first.reason.startswith("gp-")  # modelled at once
    alone = BayesProposer(SPACE, 1, **FAST).ask()
    assert alone.reason == "default"


def test_learnt_results_replay_to_the_same_proposal() -> None:
    history = [*_shared_from(_run(7, 8)), {"op": "ask"}]
    live = BayesProposer(SPACE, 1, **FAST)
    replay_history(live, history)
    expected = live.ask()
    rebuilt = BayesProposer(SPACE, 1, **FAST)
    replay_history(rebuilt, history)
    assert rebuilt.proposals[0].config == live.proposals[0].config
    again = rebuilt.ask()
    assert (again.config, again.reason) == (expected.config, expected.reason)


@pytest.mark.parametrize("config", [{"x": 0.5, "y": 20},  # a parameter missing
                                    {"x": 0.5, "y": 99, "flag": True}])  # outside the space
def test_a_result_from_another_space_is_not_learnt(config: dict) -> None:
    proposer = BayesProposer(SPACE, 1, **FAST)
    assert proposer.learn(config, 1.0) is False
    assert proposer.shared == []
    assert proposer.learn({"x": 0.5, "y": 20, "flag": True}, None) is True  # a failed start
    _, _, X_all, started = proposer.dataset()
    assert len(X_all) == 1 and not started[0]


def test_another_workers_results_change_the_proposal_and_replay_with_it() -> None:
    """Two proposers with the same own trials, one of them also knowing another worker's
    results: the second gets the point its own data gives, and a rebuild gives it again."""
    own = _run(3, 8)
    history = [event for p, o in zip(own.proposals, own.observations, strict=True)
               for event in ({"op": "register", "config": p.config, "reason": p.reason},
                             {"op": "tell", "trial": o.trial, "value": o.value})]
    shared = _shared_from(_run(7, 8))
    alone = BayesProposer(SPACE, 1, **FAST)
    replay_history(alone, history)
    informed = BayesProposer(SPACE, 1, **FAST)
    replay_history(informed, [*shared, *history])
    first, second = alone.ask(), informed.ask()
    fresh = BayesProposer(SPACE, 1, **FAST)
    replay_history(fresh, [*shared, *history])
    assert second.config == fresh.ask().config != first.config
