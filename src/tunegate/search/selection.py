"""Which proposer a run uses, chosen from its budget, and the reason written to the report.

Rule: Bayesian optimisation needs its initial design
(:func:`~tunegate.search.bayes.default_initial`: ``dims + 3``, 5 to 10 points) plus enough
model-guided rounds to pay for it. With a budget below ``max(SMALL_BUDGET, initial + 6)``
proposals, the layered coarse sweep with local refinement is used instead
(:class:`~tunegate.search.sweep.LayeredSweepProposer`); otherwise
:class:`~tunegate.search.bayes.BayesProposer`. An unknown budget gets BO. With several
objectives and a small budget the sweep optimises the first (highest-priority) objective; the
delivery still reports the whole front of what was measured.

Example:
    >>> from tunegate.search.space import Layer, Param, SearchSpace
    >>> space = SearchSpace.of([Param("x", "int", Layer.SCHEDULING, low=1, high=64)])
    >>> select_proposer(space, 0, budget=8).selection["proposer"]
    'layered_sweep'
    >>> select_proposer(space, 0, budget=30).selection["proposer"]
    'bayes'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunegate.search.bayes import BayesProposer, default_initial
from tunegate.search.objectives import Objective, OutcomeConstraint, check_objectives
from tunegate.search.proposer import BaseProposer
from tunegate.search.space import SearchSpace
from tunegate.search.sweep import LayeredSweepProposer

__all__ = ["SMALL_BUDGET", "min_bo_budget", "select_proposer", "selection"]

SMALL_BUDGET = 12
"""Below this many proposals, BO's cold start eats the gain (the article's "a dozen rounds")."""


def min_bo_budget(space: SearchSpace) -> int:
    """The smallest budget for which BO is chosen on ``space``."""
    return max(SMALL_BUDGET, default_initial(space.dims) + 6)


def selection(space: SearchSpace, *, budget: int | None = None,
              objectives: Sequence[Objective] = (Objective("value"),),
              outcome_constraints: Sequence[OutcomeConstraint] = ()) -> dict[str, Any]:
    """Which proposer the budget chooses on ``space`` and why (nothing is built).

    Returns:
        ``proposer`` (its name), ``budget``, ``threshold`` (the smallest budget for BO),
        ``objectives``, ``outcome_constraints`` and ``reason``, the sentence the run's story
        and report show.
    """
    objectives = check_objectives(objectives)
    threshold = min_bo_budget(space)
    if budget is not None and budget < threshold:
        name = LayeredSweepProposer.name
        reason = (f"budget of {budget} proposals is below {threshold} (BO's initial design of "
                  f"{default_initial(space.dims)} plus 6 model-guided rounds): layered coarse "
                  "sweep with local refinement instead, since BO's cold start would eat the budget")
    else:
        name = BayesProposer.name
        shown = "unknown" if budget is None else str(budget)
        reason = (f"budget of {shown} proposals allows Bayesian optimisation (threshold "
                  f"{threshold}): GP surrogate, "
                  + ("qLogNEHVI" if len(objectives) > 1 else "LogEI") + " acquisition")
    return {"proposer": name, "budget": budget, "threshold": threshold,
            "objectives": [o.metric for o in objectives],
            "outcome_constraints": [str(c) for c in outcome_constraints], "reason": reason}


def select_proposer(space: SearchSpace, seed: int, *, budget: int | None = None,
                    objectives: Sequence[Objective] = (Objective("value"),),
                    outcome_constraints: Sequence[OutcomeConstraint] = (),
                    **options: Any) -> BaseProposer:
    """The proposer for this run, with ``proposer.selection`` saying which and why
    (:func:`selection`).

    Args:
        space: The search space.
        seed: The run's seed.
        budget: Proposals the run may evaluate (``None``: unknown).
        objectives: One to five objectives (more raises ``ConfigError``).
        outcome_constraints: SLOs.
        options: Passed to :class:`BayesProposer` when it is chosen.
    """
    chosen = selection(space, budget=budget, objectives=objectives,
                       outcome_constraints=outcome_constraints)
    proposer: BaseProposer
    if chosen["proposer"] == LayeredSweepProposer.name:
        proposer = LayeredSweepProposer(space, seed)
    else:
        proposer = BayesProposer(space, seed, objectives=check_objectives(objectives),
                                 outcome_constraints=outcome_constraints, **options)
    proposer.selection = chosen
    return proposer
