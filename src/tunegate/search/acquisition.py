"""Acquisition functions for Bayesian optimisation (BoTorch, imported lazily).

* one objective: ``qLogNoisyExpectedImprovement`` (noise-aware: the incumbent is the model's,
  not the luckiest noisy draw) or ``UpperConfidenceBound`` (``beta = 4``);
* several objectives: ``qLogNoisyExpectedHypervolumeImprovement`` with the reference point
  0.1 of the observed range below the worst observed value of each objective;
* SLOs: constraint callables on the modelled SLO metrics (feasible where ``<= 0``), which the
  LogEI family weighs by the model's probability of meeting them;
* crashes: ``+ log p(start)`` from :class:`~tunegate.search.surrogate.FeasibilityModel`.

MC samplers are quasi-random with fixed seeds and the optimiser uses fixed raw samples and
restarts, so the scores are a pure function of the data and the seed.

This module knows nothing of the proposer that calls it: it takes the data as arrays and the
search's goals as an :class:`AcquisitionSpec` (plain values), so ``bayes`` depends on it and
never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.stats import qmc

from tunegate.search.design import snap
from tunegate.search.objectives import Objective, OutcomeConstraint
from tunegate.search.space import SearchSpace
from tunegate.search.surrogate import FeasibilityModel, fit_outcomes, torch_module

__all__ = ["AcquisitionSpec", "neighbours", "posterior", "reason", "score_candidates",
           "warm_up"]


@dataclass(frozen=True, slots=True)
class AcquisitionSpec:
    """What the acquisition optimises and with how much effort.

    Args:
        objectives: One to five; the outcome columns start with them, in this order.
        outcome_constraints: SLOs, modelled as the columns after the objectives.
        kind: ``ei`` (the LogEI family) or ``ucb`` (one objective, no SLOs).
        raw_samples / restarts: The optimiser's fixed effort.
    """

    objectives: tuple[Objective, ...]
    outcome_constraints: tuple[OutcomeConstraint, ...] = ()
    kind: Literal["ei", "ucb"] = "ei"
    raw_samples: int = 256
    restarts: int = 4

    @property
    def signs(self) -> NDArray[np.float64]:
        """Per outcome column: +1 where higher is better (and for SLO metrics), -1 where lower
        is; multiplying by it turns every objective into one to maximise."""
        return np.asarray([o.sign for o in self.objectives]
                          + [1.0] * len(self.outcome_constraints), dtype=float)


_POOL = 256
_INCUMBENTS = 3
_MAXITER = 40
_STEPS = (-0.08, -0.03, 0.03, 0.08)


def neighbours(space: SearchSpace, point: NDArray[np.float64]) -> NDArray[np.float64]:
    """One-parameter moves from ``point``: every other value of a bool or categorical, and
    small steps (3% and 8% of the unit range, both ways) of a numeric parameter."""
    out = []
    for i, param in enumerate(space.tunable):
        if param.kind in ("bool", "categorical"):
            moves = [param.to_unit(v) for v in param.values]
        else:
            moves = [float(point[i]) + step for step in _STEPS]
        for u in moves:
            moved = np.array(point, dtype=float, copy=True)
            moved[i] = min(max(u, 0.0), 1.0)
            out.append(moved)
    return np.asarray(out, dtype=float).reshape(-1, len(point))


_MC_SAMPLES = 64
_MC_SAMPLES_MO = 32  # qLogNEHVI partitions the front once per sample: the cost scales with it


def warm_up() -> None:
    """Import torch and the BoTorch modules used here (a one-time cost of ~2 s per process)."""
    torch_module()
    import botorch.acquisition.multi_objective.logei
    import botorch.optim  # noqa: F401
    from botorch.models import SingleTaskGP  # noqa: F401


def reason(spec: AcquisitionSpec) -> str:
    """The proposal reason recorded for a model-based round."""
    if len(spec.objectives) > 1:
        return "gp-qlognehvi"
    return "gp-ucb" if spec.kind == "ucb" else "gp-logei"


def _constraints(spec: AcquisitionSpec) -> list[Any]:
    k = len(spec.objectives)
    out = []
    for j, slo in enumerate(spec.outcome_constraints):
        sign = 1.0 if slo.op == "<=" else -1.0

        def constraint(Z: Any, X: Any = None, i: int = k + j, b: float = slo.bound,
                       s: float = sign) -> Any:
            return s * (Z[..., i] - b)

        out.append(constraint)
    return out


def _first(Z: Any, X: Any = None) -> Any:
    return Z[..., 0]


def _acquisition(spec: AcquisitionSpec, model: Any, X_ok: NDArray[np.float64],
                 Y: NDArray[np.float64], seed: int) -> Any:
    torch = torch_module()
    from botorch.acquisition import UpperConfidenceBound, qLogNoisyExpectedImprovement
    from botorch.acquisition.multi_objective.logei import (
        qLogNoisyExpectedHypervolumeImprovement,
    )
    from botorch.acquisition.multi_objective.objective import IdentityMCMultiOutputObjective
    from botorch.acquisition.objective import GenericMCObjective
    from botorch.sampling import SobolQMCNormalSampler

    k = len(spec.objectives)
    constraints = _constraints(spec) or None
    samples = _MC_SAMPLES if k == 1 else _MC_SAMPLES_MO
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([samples]), seed=seed)
    train_x = torch.as_tensor(X_ok, dtype=torch.double)
    if k == 1:
        if spec.kind == "ucb":
            return UpperConfidenceBound(model, beta=4.0)
        objective = GenericMCObjective(_first) if Y.shape[1] > 1 else None
        return qLogNoisyExpectedImprovement(model, X_baseline=train_x, sampler=sampler,
                                            objective=objective, constraints=constraints,
                                            prune_baseline=True, cache_root=False)
    low, high = Y[:, :k].min(axis=0), Y[:, :k].max(axis=0)
    ref = low - 0.1 * np.maximum(high - low, 1e-9)
    return qLogNoisyExpectedHypervolumeImprovement(
        model, ref_point=ref.tolist(), X_baseline=train_x, sampler=sampler,
        objective=IdentityMCMultiOutputObjective(outcomes=list(range(k))),
        constraints=constraints, prune_baseline=True, cache_root=False)


def score_candidates(space: SearchSpace, spec: AcquisitionSpec, X_ok: NDArray[np.float64],
                     Y_ok: NDArray[np.float64], X_all: NDArray[np.float64],
                     started: NDArray[np.bool_], *, seed: int,
                     weights: NDArray[np.float64] | None = None
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Candidate points (snapped), their acquisition values, and which of them are one-move
    neighbours of the incumbent (the best observed config by posterior mean).

    ``X_ok``/``Y_ok``: points with outcomes (raw metric values, columns as ``spec``);
    ``X_all``/``started``: every evaluated point and whether it started (the feasibility model).
    ``weights``: the trust in each row of ``X_ok`` (:func:`~.surrogate.fit_outcomes`).

    Candidates: the optima of ``restarts`` gradient runs from ``raw_samples`` seeded starts,
    plus a seeded pool of Sobol points, plus the one-parameter :func:`neighbours` of the three
    best observed configs by posterior mean; each is snapped to the config it maps to and scored
    there (a rounded optimum can lose its value; the pool keeps discrete cells covered).
    """
    torch = torch_module()
    from botorch.optim import optimize_acqf

    dims = space.dims
    Y = Y_ok * spec.signs
    model = fit_outcomes(X_ok, Y, seed=seed, weights=weights)
    feasibility = FeasibilityModel(X_all, started, seed=seed) if not started.all() else None
    torch.manual_seed(seed)
    acq = _acquisition(spec, model, X_ok, Y, seed)
    scale = float(np.std(Y[:, 0])) or 1.0

    def score(X: Any) -> Any:
        value = acq(X)
        if feasibility is not None:
            penalty = feasibility.log_prob(X)
            value = value + (penalty * scale if spec.kind == "ucb" else penalty)
        return value

    bounds = torch.stack([torch.zeros(dims, dtype=torch.double),
                          torch.ones(dims, dtype=torch.double)])
    optima, _ = optimize_acqf(score, bounds=bounds, q=1, num_restarts=spec.restarts,
                              raw_samples=spec.raw_samples, return_best_only=False,
                              options={"seed": seed, "maxiter": _MAXITER,
                                       "batch_limit": spec.restarts},
                              retry_on_optimization_warning=False)
    pool = qmc.Sobol(d=dims, scramble=True, seed=seed).random(_POOL)
    with torch.no_grad():
        means = model.posterior(torch.as_tensor(X_ok, dtype=torch.double)).mean[:, 0].numpy()
    incumbents = X_ok[np.argsort(-means, kind="stable")[:_INCUMBENTS]]
    moves = [neighbours(space, x) for x in incumbents]
    raw = np.vstack([optima.detach().numpy().reshape(-1, dims), pool, *moves])
    local = np.zeros(len(raw), dtype=bool)
    local[len(raw) - sum(len(m) for m in moves):][: len(moves[0])] = True
    candidates = np.asarray([snap(space, row) for row in raw], dtype=float)
    with torch.no_grad():
        values = score(torch.as_tensor(candidates, dtype=torch.double).unsqueeze(-2))
    return candidates, np.asarray(values.numpy(), dtype=float).reshape(-1), local


def posterior(spec: AcquisitionSpec, X_ok: NDArray[np.float64], Y_ok: NDArray[np.float64],
              points: NDArray[np.float64], *, seed: int = 0,
              weights: NDArray[np.float64] | None = None
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The surrogate's mean and standard deviation of every modelled metric (raw units,
    columns as ``Y_ok``) at unit ``points``, fitted on ``X_ok``/``Y_ok``.

    Noisy single measurements flatter lucky configs; the posterior mean shrinks them towards
    their neighbours, so recommending by it resists the winner's curse.
    """
    torch = torch_module()
    signs = spec.signs
    model = fit_outcomes(X_ok, Y_ok * signs, seed=seed, weights=weights)
    with torch.no_grad():
        post = model.posterior(torch.as_tensor(points, dtype=torch.double))
        mean = np.asarray(post.mean.numpy(), dtype=float).reshape(len(points), -1)
        var = np.asarray(post.variance.numpy(), dtype=float).reshape(len(points), -1)
    std: NDArray[np.float64] = np.sqrt(np.maximum(var, 0.0))
    scaled: NDArray[np.float64] = mean * signs
    return scaled, std
