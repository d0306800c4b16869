"""Results from an earlier run (a warm start) and how far the model trusts them.

What is specified here:

- a learnt result carries a weight in (0, 1]; anything else is refused;
- with every weight 1 the proposer keeps the homoskedastic model (``weights()`` is ``None``);
  with a weight below 1 each modelled row has its weight, this run's own rows 1;
- a down-weighted prior pulls the posterior less than a fully trusted one where this run's own
  data disagree, and its extra noise leaves the posterior wider there;
- weights replay: a history with weighted ``learn`` events rebuilds the same proposal.
"""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.search import acquisition
from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.tuner.deciders import replay_history

SPACE = SearchSpace.of([
    Param("x", "float", Layer.SCHEDULING, low=0.0, high=1.0, default=0.5),
    Param("y", "float", Layer.SCHEDULING, low=0.0, high=1.0, default=0.5),
])
FAST = {"initial": 4, "raw_samples": 64, "restarts": 2}


def own_and_prior(weight: float) -> BayesProposer:
    """Own measurements of a flat landscape (value 0) and one earlier result at the centre
    that says 3: they disagree there."""
    proposer = BayesProposer(SPACE, 0, **FAST)
    for x, y in [(0.2, 0.2), (0.8, 0.2), (0.2, 0.8), (0.8, 0.8), (0.5, 0.45), (0.45, 0.5)]:
        trial = proposer.register({"x": x, "y": y}, "own").trial
        proposer.tell(trial, 0.0)
    assert proposer.learn({"x": 0.5, "y": 0.5}, 3.0, weight=weight)
    return proposer


def centre(proposer: BayesProposer) -> tuple[float, float]:
    X_ok, Y_ok, _, _ = proposer.dataset()
    mean, std = acquisition.posterior(proposer.spec, X_ok, Y_ok, np.array([[0.5, 0.5]]),
                                      weights=proposer.weights())
    return float(mean[0, 0]), float(std[0, 0])


@pytest.mark.parametrize("weight", [0.0, -0.5, 1.5])
def test_a_weight_outside_zero_to_one_is_refused(weight: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        BayesProposer(SPACE, 0, **FAST).learn({"x": 0.5, "y": 0.5}, 1.0, weight=weight)


def test_fully_trusted_rows_keep_the_homoskedastic_model() -> None:
    assert own_and_prior(1.0).weights() is None


def test_each_modelled_row_has_its_weight_own_rows_one() -> None:
    weights = own_and_prior(0.5).weights()
    assert weights is not None and weights.tolist() == [1.0] * 6 + [0.5]


def test_a_down_weighted_prior_pulls_the_posterior_less_and_leaves_it_wider() -> None:
    trusted_mean, trusted_std = centre(own_and_prior(1.0))
    weighted_mean, weighted_std = centre(own_and_prior(0.5))
    assert 0.0 < weighted_mean < trusted_mean
    assert weighted_std > trusted_std


def test_weighted_learn_events_replay_to_the_same_proposal() -> None:
    history = [{"op": "learn", "run": "kb:a", "trial": t, "config": {"x": x, "y": 1 - x},
                "value": x, "values": {}, "weight": 0.5, "prior": True}
               for t, x in enumerate([0.1, 0.3, 0.5, 0.7, 0.9])]
    live = BayesProposer(SPACE, 2, objectives=(Objective("value"),), **FAST)
    replay_history(live, history)
    assert [r.weight for r in live.shared] == [0.5] * 5
    expected = live.ask()
    rebuilt = BayesProposer(SPACE, 2, objectives=(Objective("value"),), **FAST)
    replay_history(rebuilt, [*history])
    again = rebuilt.ask()
    assert expected.reason.startswith("gp-")  # the prior replaced the initial design
    assert (again.config, again.reason) == (expected.config, expected.reason)
