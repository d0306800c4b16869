"""Bayesian optimisation behind ask/tell: a GP surrogate, LogEI / UCB or qLogNEHVI, SLOs as
outcome constraints, a learnt start-feasibility model, and one random point every few rounds.

Round by round (``r`` = number of proposals so far + 1):

1. every ``random_every``-th round: one uniformly random point (exploration the model cannot
   talk itself out of);
2. while fewer than ``initial`` proposals exist (or fewer than two configs produced values):
   the next point of the initial design (default config, then scrambled Sobol or LHS);
3. otherwise fit the surrogate on every observation so far (objectives and SLO metrics, one GP
   output each; failures train only the feasibility model) and maximise the acquisition:
   ``qLogNoisyExpectedImprovement`` for one objective (``acquisition="ei"``; ``"ucb"`` gives
   ``UpperConfidenceBound`` when there are no SLOs), ``qLogNoisyExpectedHypervolumeImprovement``
   for several, each with the SLOs as constraints, plus ``log p(start)``.

Discrete parameters are handled by rounding: the acquisition is maximised over ``[0, 1]^d``
(fixed raw samples and restarts), every candidate is snapped through ``SearchSpace.from_unit``
to the config it stands for, and the snapped candidates (restart optima plus a seeded Sobol
pool) are scored again; the best one not yet evaluated wins.

Determinism and replay: every random choice is seeded by ``(seed, round)``, torch by the same,
the MC samplers by the seed, so a proposer rebuilt from the recorded history returns the same
config, and so does one that was fed the same history in several steps. Rebuilding replays
every earlier ask and so refits the model once per earlier model round; the tuner avoids that
by keeping one live proposer per run (or per replayed log) and feeding it only the new events
(:class:`tunegate.tuner.proposal_history.ProposerSession`). Nothing is remembered between
proposer instances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from tunegate.errors import ConfigError
from tunegate.search import acquisition
from tunegate.search.design import initial_design, snap
from tunegate.search.objectives import Objective, OutcomeConstraint, check_objectives
from tunegate.search.pareto import pareto_mask
from tunegate.search.proposer import BaseProposer, Proposal
from tunegate.search.space import Config, SearchSpace

__all__ = ["BayesProposer", "default_initial"]


def default_initial(dims: int) -> int:
    """Initial design size: ``dims + 3``, between 5 and 10 (the default config included)."""
    return min(10, max(5, dims + 3))


class BayesProposer(BaseProposer):
    """GP-based Bayesian optimisation (see the module docstring).

    Args:
        space: The search space.
        seed: Seeds the design, the random rounds, torch and the MC samplers.
        objectives: One to five objectives. The default, ``value`` (higher), reads the scalar
            each :meth:`tell` gives; other names are read from ``tell(values=...)``.
        outcome_constraints: SLOs the proposals should meet (read from ``values``).
        initial: Initial design size (default :func:`default_initial`).
        design: ``sobol`` or ``lhs``.
        acquisition: ``ei`` (LogEI family) or ``ucb`` (one objective, no SLOs).
        random_every: One random point every this many rounds (0: never).
        raw_samples / restarts: The acquisition optimiser's fixed effort.
        min_distance: A candidate with the same discrete values as an evaluated config and
            every numeric coordinate within this distance (unit scale) counts as a repeat.
        local_every: Every this many model rounds, the best candidate is taken among the
            one-parameter moves from the incumbent (flip a switch, nudge a number): a
            trust-region step that tests what the model cannot tell apart (0: never).
    """

    name = "bayes"
    version = "1"

    def __init__(self, space: SearchSpace, seed: int = 0, *,
                 objectives: Sequence[Objective] = (Objective("value"),),
                 outcome_constraints: Sequence[OutcomeConstraint] = (),
                 initial: int | None = None, design: Literal["sobol", "lhs"] = "sobol",
                 acquisition: Literal["ei", "ucb"] = "ei", random_every: int = 5,
                 raw_samples: int = 256, restarts: int = 4,
                 min_distance: float = 0.02, local_every: int = 3) -> None:
        super().__init__(space, seed)
        self.objectives = check_objectives(objectives)
        self.outcome_constraints = tuple(outcome_constraints)
        if acquisition == "ucb" and (len(self.objectives) > 1 or self.outcome_constraints):
            raise ConfigError("acquisition 'ucb' supports one objective without SLOs; use 'ei'")
        self.initial = initial if initial is not None else default_initial(space.dims)
        self.design_method = design
        self.acquisition = acquisition
        self.random_every = random_every
        self.raw_samples = raw_samples
        self.restarts = restarts
        self.min_distance = min_distance
        self.local_every = local_every
        self._design = initial_design(space, self.initial + 8, seed=seed, method=design)
        self._design_cursor = 0
        self._model_rounds = 0
        """Proposals the surrogate chose so far (every ``local_every``-th is a local one)."""
        self._chose_by_model = False
        """Whether the surrogate chose the point :meth:`_next_point` returned last."""

    # ---- data ---------------------------------------------------------------------------------
    @property
    def spec(self) -> acquisition.AcquisitionSpec:
        """The search's goals and the optimiser's effort, as the acquisition takes them."""
        return acquisition.AcquisitionSpec(self.objectives, self.outcome_constraints,
                                           self.acquisition, self.raw_samples, self.restarts)

    @property
    def metrics(self) -> list[str]:
        """Modelled outcomes: the objectives' metrics, then each SLO's metric."""
        return [o.metric for o in self.objectives] + [c.metric for c in self.outcome_constraints]

    def _outcome(self, value: float | None, values: dict[str, float]) -> list[float] | None:
        row = []
        for metric in self.metrics:
            got = values.get(metric, value if metric == "value" else None)
            if got is None or not np.isfinite(got):
                return None
            row.append(float(got))
        return row

    def _evaluated_rows(self) -> list[tuple[Config, float | None, Mapping[str, float], float]]:
        """``(config, value, values, weight)`` of this run's observations (weight 1), then of
        the results learnt from outside it: data for the model, not trials of this run."""
        latest = {o.trial: o for o in self.observations}
        rows: list[tuple[Config, float | None, Mapping[str, float], float]] = [
            (self.proposals[t].config, latest[t].value, latest[t].values, 1.0)
            for t in sorted(latest) if 0 <= t < len(self.proposals)]
        rows += [(r.config, r.value, r.values, r.weight) for r in self.shared]
        return rows

    def dataset(self) -> tuple[NDArray[np.float64], NDArray[np.float64],
                               NDArray[np.float64], NDArray[np.bool_]]:
        """``(X_ok, Y_ok, X_all, started)``: points with outcomes (raw metric values, one column
        per :attr:`metrics`) and every evaluated point with whether it started."""
        x_ok, y_ok, x_all, started = [], [], [], []
        for config, value, values, _ in self._evaluated_rows():
            x = self.space.to_unit(config)
            x_all.append(x)
            started.append(value is not None or bool(values))
            row = self._outcome(value, dict(values))
            if row is not None:
                x_ok.append(x)
                y_ok.append(row)
        dims = self.space.dims
        return (np.asarray(x_ok, dtype=float).reshape(-1, dims),
                np.asarray(y_ok, dtype=float).reshape(-1, len(self.metrics)),
                np.asarray(x_all, dtype=float).reshape(-1, dims),
                np.asarray(started, dtype=bool))

    def weights(self) -> NDArray[np.float64] | None:
        """The model's trust in each row of :meth:`dataset`'s ``X_ok`` (``None``: every row is
        fully trusted, the common case, which keeps the homoskedastic model)."""
        weights = [weight for _, value, values, weight in self._evaluated_rows()
                   if self._outcome(value, dict(values)) is not None]
        if all(w >= 1.0 for w in weights):
            return None
        return np.asarray(weights, dtype=float)

    # ---- proposing ----------------------------------------------------------------------------
    def _rng(self, round_number: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, round_number, 7])

    def _evaluated(self) -> set[tuple[float, ...]]:
        return {tuple(self.space.to_unit(p.config)) for p in self.proposals}

    def _designed(self) -> int:
        """Configs that count toward the initial design: this run's proposals and the distinct
        configs other workers evaluated that this run did not (every worker's trial 0 is the
        same baseline: four copies of it are one point, not four), so a late joiner models
        sooner but never on copies of one point."""
        own = self._evaluated()
        others = {tuple(self.space.to_unit(r.config)) for r in self.shared}
        return len(self.proposals) + len(others - own)

    def _from_design(self) -> tuple[tuple[float, ...], str] | None:
        seen = self._evaluated()
        while self._design_cursor < len(self._design):
            point = self._design[self._design_cursor]
            self._design_cursor += 1  # advances on repaired or rejected points too
            if point not in seen:
                reason = "default" if not self.proposals and self._design_cursor == 1 else "design"
                return point, reason
        return None

    def ask(self) -> Proposal:
        """The next config; counts it as a model round when the surrogate chose it (a point
        the constraints could not repair is skipped, and does not count)."""
        proposal = super().ask()
        self._model_rounds += self._chose_by_model
        return proposal

    def _next_point(self) -> tuple[tuple[float, ...], str]:
        self._chose_by_model = False
        round_number = len(self.proposals) + 1
        if self.random_every and round_number % self.random_every == 0:
            return snap(self.space, self._rng(round_number).random(self.space.dims)), "random"
        X_ok, Y_ok, X_all, started = self.dataset()
        if self._designed() < self.initial or len(X_ok) < 2:
            designed = self._from_design()
            if designed is not None:
                return designed
            return snap(self.space, self._rng(round_number).random(self.space.dims)), "random"
        return self._model_point(round_number, X_ok, Y_ok, X_all, started)

    def _model_point(self, round_number: int, X_ok: NDArray[np.float64],
                     Y_ok: NDArray[np.float64], X_all: NDArray[np.float64],
                     started: NDArray[np.bool_]) -> tuple[tuple[float, ...], str]:
        round_seed = self.seed * 100_003 + round_number
        candidates, scores, local = acquisition.score_candidates(
            self.space, self.spec, X_ok, Y_ok, X_all, started, seed=round_seed,
            weights=self.weights())
        seen = np.asarray(sorted(self._evaluated()), dtype=float).reshape(-1, self.space.dims)
        model_rounds = self._model_rounds
        if self.local_every and model_rounds % self.local_every == self.local_every - 1:
            for index in np.argsort(-np.where(local, scores, -np.inf), kind="stable"):
                if local[index] and not self._near(candidates[index], seen):
                    self._chose_by_model = True
                    return tuple(float(u) for u in candidates[index]), "gp-local"
        for index in np.argsort(-scores, kind="stable"):
            if not self._near(candidates[index], seen):
                self._chose_by_model = True
                return tuple(float(u) for u in candidates[index]), acquisition.reason(self.spec)
        return snap(self.space, self._rng(round_number).random(self.space.dims)), "random"

    def _near(self, point: NDArray[np.float64], seen: NDArray[np.float64]) -> bool:
        """Whether ``point`` repeats an evaluated config: same discrete values and every
        numeric coordinate within :attr:`min_distance` (a re-measurement teaches little)."""
        if not len(seen):
            return False
        gap = np.abs(seen - point)
        discrete = np.array([p.kind in ("bool", "categorical") for p in self.space.tunable])
        same = np.all(np.where(discrete, gap < 1e-9, gap < self.min_distance), axis=1)
        return bool(np.any(same))

    # ---- recommending ------------------------------------------------------------------------
    def _judged(self, confidence: float) -> tuple[list[int], NDArray[np.float64],
                                                  NDArray[np.bool_]]:
        """Evaluated trials with outcomes, posterior means, and whether each met every SLO
        when measured *and* meets it with probability >= ``confidence`` under the model
        (normal approximation, each SLO alone)."""
        from scipy.stats import norm

        latest = {o.trial: o for o in self.observations}
        trials = [t for t in sorted(latest) if 0 <= t < len(self.proposals)
                  and self._outcome(latest[t].value, dict(latest[t].values)) is not None]
        if not trials:
            return [], np.zeros((0, len(self.metrics))), np.zeros(0, dtype=bool)
        points = np.asarray([self.space.to_unit(self.proposals[t].config) for t in trials])
        X_ok, Y_ok, _, _ = self.dataset()
        mean, std = acquisition.posterior(self.spec, X_ok, Y_ok, points, seed=self.seed,
                                          weights=self.weights())
        z = float(norm.ppf(confidence))
        observed = [{**dict(latest[t].values), "value": latest[t].value} for t in trials]
        ok = np.asarray([all(c.satisfied(v) for c in self.outcome_constraints)
                         for v in observed], dtype=bool)
        k = len(self.objectives)
        for j, slo in enumerate(self.outcome_constraints):
            margin = z * std[:, k + j]
            if slo.op == "<=":
                ok &= mean[:, k + j] + margin <= slo.bound
            else:
                ok &= mean[:, k + j] - margin >= slo.bound
        return trials, mean, ok

    def recommend(self, confidence: float = 0.95) -> int | None:
        """The evaluated trial with the best posterior mean of the first objective among those
        that met every SLO when measured and meet it with probability >= ``confidence`` under
        the model (``None``: nothing evaluated).

        When no evaluated config is that sure of its SLOs, the one closest to meeting them
        (the largest minimum normalised slack) is returned.
        """
        trials, mean, ok = self._judged(confidence)
        if not trials:
            return None
        first = self.objectives[0].sign * mean[:, 0]
        if ok.any():
            return trials[int(np.argmax(np.where(ok, first, -np.inf)))]
        k = len(self.objectives)
        slack = np.min([[c.slack(float(m)) / max(abs(c.bound), 1e-9)
                         for c, m in zip(self.outcome_constraints, row[k:], strict=True)]
                        for row in mean], axis=1)
        return trials[int(np.argmax(slack))]

    def recommend_front(self, confidence: float = 0.95) -> list[int]:
        """Evaluated trials on the Pareto front of the posterior means, among those meeting
        every SLO with probability >= ``confidence``."""
        trials, mean, ok = self._judged(confidence)
        if not ok.any():
            return []
        signs = np.asarray([o.sign for o in self.objectives])
        chosen = [t for t, keep in zip(trials, ok, strict=True) if keep]
        Y = mean[ok][:, : len(self.objectives)] * signs
        return [t for t, front in zip(chosen, pareto_mask(Y), strict=True) if front]

    def state(self) -> dict[str, Any]:
        out = super().state()
        out.update({"objectives": [o.metric for o in self.objectives],
                    "outcome_constraints": [str(c) for c in self.outcome_constraints],
                    "initial": self.initial, "acquisition": self.acquisition})
        return out
