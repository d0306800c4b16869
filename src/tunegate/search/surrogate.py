"""Gaussian-process surrogates (BoTorch), imported lazily so that ``tunegate bench`` never pays
for torch.

* :func:`fit_outcomes`: one ``SingleTaskGP`` over ``[0, 1]^d`` with an independent output per
  modelled metric (objectives first, then SLO metrics), outcomes standardised, BoTorch's
  default kernel (RBF with one lengthscale per dimension under a dimension-scaled log-normal
  prior, since BoTorch 0.12) and an inferred homoskedastic noise level (the search sees noisy
  values).
* :class:`FeasibilityModel`: configs that failed to start are data. A GP regression on the
  start outcome (1 = started, 0 = failed) gives a smooth probability of starting,
  ``p(x) = Phi((mu(x) - 1/2) / sqrt(var(x) + 1/16))``: near 1 close to configs that started,
  near 0 close to crashes, 1/2 far from everything. The acquisition is multiplied by ``p(x)``
  (added in log space), so the search steers away from regions that crash without ever
  declaring them forbidden.

Determinism: :func:`torch_module` pins torch to one thread (measured here: two threads were 5-40x
slower under load) and every fit starts from ``torch.manual_seed(seed)``; L-BFGS-B from the same
start on the same data gives the same hyperparameters, so a replayed history refits the same
model.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PRIOR_SPREAD", "FeasibilityModel", "fit_outcomes", "torch_module"]

_CONFIGURED = False
_ATTEMPTS = 2  # botorch retries a fit that warns from new random starts; 5 by default


def torch_module() -> Any:
    """``torch``, imported on first use, with one intra-op thread and double precision math.

    GPyTorch's "added jitter to the diagonal" warning is silenced: near-duplicate configs make
    the kernel matrix nearly singular, the jitter is the standard remedy, and the warning gave
    ``tunegate tune --quiet`` and ``tunegate replay`` dozens of lines a user cannot act on.
    """
    global _CONFIGURED
    import torch

    if not _CONFIGURED:
        torch.set_num_threads(1)
        warnings.filterwarnings("ignore", message=r"A not p\.d\., added jitter")
        _CONFIGURED = True
    return torch


def _tensor(array: NDArray[np.float64]) -> Any:
    torch = torch_module()
    return torch.as_tensor(np.asarray(array, dtype=float), dtype=torch.double)


PRIOR_SPREAD = 0.5
"""A row of weight ``w`` < 1 gets an extra noise variance of ``PRIOR_SPREAD**2 * (1/w - 1)``
in standardised outcome units: at ``w = 1/2`` an extra standard deviation of half the outcomes'
spread, so a prior from a similar environment shapes the model where this run has no data and
gives way where its own measurements disagree."""


def fit_outcomes(X: NDArray[np.float64], Y: NDArray[np.float64], *, seed: int,
                 weights: NDArray[np.float64] | None = None) -> Any:
    """A fitted BoTorch ``SingleTaskGP`` on ``X`` (n x d, unit cube) and ``Y`` (n x m).

    Columns of ``Y`` are modelled independently (a batched GP); each is standardised. When the
    marginal-likelihood optimiser fails to converge the model keeps its last hyperparameters
    (a warning, not an error: a rough model still ranks candidates).

    ``weights`` (one per row, in (0, 1]; ``None``: all 1): rows below 1 are trusted less, by
    the extra noise :data:`PRIOR_SPREAD` gives them on top of the noise level the fit infers
    for every row (a fixed-noise likelihood that learns an additional homoskedastic noise).
    """
    torch = torch_module()
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms.outcome import Standardize
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.manual_seed(seed)
    train_x, train_y = _tensor(X), _tensor(Y)
    outputs = train_y.shape[-1]
    likelihood = None
    if weights is not None and np.any(weights < 1.0):
        from gpytorch.likelihoods import FixedNoiseGaussianLikelihood

        extra = _tensor(PRIOR_SPREAD**2 * (1.0 / np.clip(weights, 1e-3, 1.0) - 1.0) + 1e-6)
        batch = torch.Size([outputs]) if outputs > 1 else torch.Size()  # as SingleTaskGP's
        likelihood = FixedNoiseGaussianLikelihood(
            noise=extra.expand(*batch, len(weights)), learn_additional_noise=True,
            batch_shape=batch)
    model = SingleTaskGP(train_x, train_y, likelihood=likelihood,
                         outcome_transform=Standardize(m=outputs))
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):  # ModelFittingError: keep the last parameters
            fit_gpytorch_mll(mll, max_attempts=_ATTEMPTS)
    model.eval()
    return model


class FeasibilityModel:
    """Probability that a config starts, learnt from which configs started and which crashed.

    Args:
        X: Evaluated points (n x d, unit cube).
        started: ``True`` where the config started, ``False`` where it failed to.
        seed: Seeds the fit.
    """

    def __init__(self, X: NDArray[np.float64], started: NDArray[np.bool_], *, seed: int) -> None:
        labels = np.asarray(started, dtype=float).reshape(-1, 1)
        self.trivial = bool(labels.min() == 1.0)
        self._model = None if self.trivial else _fit_labels(X, labels, seed)

    def log_prob(self, X: Any) -> Any:
        """``log p(start)`` at points ``X`` (a torch tensor ``... x q x d``), shape ``...``.

        For a batch of ``q`` points, the joint probability of all starting is approximated as
        the product of the marginals.
        """
        torch = torch_module()
        if self._model is None:
            return torch.zeros(X.shape[:-2], dtype=X.dtype)
        posterior = self._model.posterior(X)
        mean = posterior.mean.squeeze(-1)
        var = posterior.variance.squeeze(-1).clamp_min(1e-9)
        z = (mean - 0.5) / torch.sqrt(var + 1.0 / 16.0)
        log_p = torch.special.log_ndtr(z)
        return log_p.sum(dim=-1)

    def prob(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """``p(start)`` at unit points (n x d), as numbers (for reports and tests)."""
        torch = torch_module()
        with torch.no_grad():
            values = self.log_prob(_tensor(points).unsqueeze(-2)).exp()
        return np.asarray(values.numpy(), dtype=float).reshape(-1)


def _fit_labels(X: NDArray[np.float64], labels: NDArray[np.float64], seed: int) -> Any:
    """A GP regression on 0/1 start labels (no outcome standardisation: 1/2 is the midpoint)."""
    torch = torch_module()
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    torch.manual_seed(seed)
    model = SingleTaskGP(_tensor(X), _tensor(labels))
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):
            fit_gpytorch_mll(mll, max_attempts=_ATTEMPTS)
    model.eval()
    return model
