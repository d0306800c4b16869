"""Early stopping with a cheap fidelity: successive halving, Hyperband, and its asynchronous form.

A *fidelity* is how much one evaluation costs: fewer requests per benchmark, or fewer repeats
per config. A clearly bad config shows itself at low fidelity, so it need not get the full
measurement:

* :func:`successive_halving`: one bracket. ``n`` configs at the lowest fidelity, keep the best
  ``1/eta``, multiply their fidelity by ``eta``, repeat until the full fidelity.
* :func:`hyperband`: the brackets of Hyperband (Li et al., 2018), each a successive-halving run
  that starts at a different fidelity, hedging between "many cheap looks" and "few full ones".
* :class:`AsyncHalving`: the rule a sequential tuner applies (ASHA, Li et al., 2020): after a
  candidate's cheap measurement, continue only if it ranks in the top ``1/eta`` of everything
  measured at that fidelity so far; a failure (``None``) always stops.

Example (27 configs, fidelity 1 to 9 repeats, eta 3):
    >>> [(r.configs, r.fidelity) for r in successive_halving(27, 1, 9, eta=3)]
    [(27, 1), (9, 3), (3, 9)]
    >>> [[(r.configs, r.fidelity) for r in b] for b in hyperband(1, 9, eta=3)]
    [[(9, 1), (3, 3), (1, 9)], [(5, 3), (1, 9)], [(3, 9)]]
    >>> rule = AsyncHalving(eta=3, min_seen=3)
    >>> rule.should_stop([10.0, 11.0, 12.0, 13.0], 10.5), rule.should_stop([10.0, 12.0], 9.0)
    (True, False)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["AsyncHalving", "Rung", "hyperband", "promote", "successive_halving"]


@dataclass(frozen=True, slots=True)
class Rung:
    """One rung of a bracket: how many configs are evaluated, at which fidelity."""

    configs: int
    fidelity: int


def successive_halving(n: int, min_fidelity: int, max_fidelity: int, *,
                       eta: int = 3) -> list[Rung]:
    """The rungs of one successive-halving bracket (see the module docstring).

    Raises:
        ValueError: ``n < 1``, ``eta < 2`` or ``min_fidelity`` outside ``1..max_fidelity``.
    """
    if n < 1 or eta < 2 or not 1 <= min_fidelity <= max_fidelity:
        raise ValueError(f"invalid bracket: n={n}, eta={eta}, fidelity {min_fidelity}.."
                         f"{max_fidelity}")
    rungs, configs, fidelity = [], n, min_fidelity
    while True:
        rungs.append(Rung(configs, min(fidelity, max_fidelity)))
        if fidelity >= max_fidelity or configs <= 1:
            return rungs
        configs = max(1, configs // eta)
        fidelity *= eta


def hyperband(min_fidelity: int, max_fidelity: int, *, eta: int = 3) -> list[list[Rung]]:
    """Hyperband's brackets, most aggressive first (each a :func:`successive_halving` run)."""
    s_max = math.floor(math.log(max_fidelity / min_fidelity, eta) + 1e-9)
    brackets = []
    for s in range(s_max, -1, -1):
        n = math.ceil((s_max + 1) / (s + 1) * eta ** s)
        start = max(min_fidelity, round(max_fidelity / eta ** s))
        brackets.append(successive_halving(n, start, max_fidelity, eta=eta))
    return brackets


def promote(scores: Sequence[float | None], keep: int) -> list[int]:
    """Indices of the ``keep`` best scores (higher is better), failures never; ties go to the
    earlier index (deterministic)."""
    valid = [(i, s) for i, s in enumerate(scores) if s is not None and np.isfinite(s)]
    ranked = sorted(valid, key=lambda item: (-float(item[1]), item[0]))
    return sorted(i for i, _ in ranked[:keep])


@dataclass(frozen=True, slots=True)
class AsyncHalving:
    """ASHA's promotion rule for one config at a time.

    Attributes:
        eta: Keep the top ``1/eta`` at each fidelity.
        min_seen: Never stop before this many configs were seen at the fidelity (too few to
            rank against).
    """

    eta: int = 3
    min_seen: int = 3

    def should_stop(self, rung_scores: Sequence[float], score: float | None) -> bool:
        """Whether a config scoring ``score`` at a cheap fidelity should stop there, given the
        scores of the configs measured at that fidelity before it (higher is better)."""
        if score is None or not np.isfinite(score):
            return True
        seen = [float(s) for s in rung_scores if np.isfinite(s)]
        if len(seen) < self.min_seen:
            return False
        cut = float(np.quantile(np.asarray([*seen, score]), 1.0 - 1.0 / self.eta))
        return score < cut
