"""Bayesian online change-point detection (Adams & MacKay 2007), Gaussian with unknown mean.

Model (on standardised inputs): within a segment the values are ``N(mu, 1)`` with an unknown
mean ``mu ~ N(mu0, prior_sd^2)``; segments end with a constant hazard ``H = 1 / expected_run``.
The run-length posterior ``P(r_t | x_1..t)`` (r = values in the current segment) is updated
exactly by the paper's recursion:

    growth:      P(r_t = r + 1, x_1..t) = P(r_{t-1} = r, x_1..t-1) pi_r(x_t) (1 - H)
    change:      P(r_t = 0,     x_1..t) = sum_r P(r_{t-1} = r, x_1..t-1) pi_r(x_t) H

with the conjugate predictive ``pi_r = N(mu_r, 1 + 1/lambda_r)``, ``lambda_r = 1/prior_sd^2 +
r``, ``mu_r = (mu0 / prior_sd^2 + sum of the r values) / lambda_r``. Run lengths beyond
``max_run`` are truncated (their mass is far below float precision for the defaults).

Decision rule (ours, the paper gives the posterior only): drift when the posterior probability
that the current segment is at most ``window`` values long exceeds ``threshold``, i.e. a change
happened within the last ``window`` values, once more than ``window`` values were seen. The change
is located at the start of the MAP run length.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(8)
>>> det = BOCPD(mean=0.0, std=1.0)
>>> hits = []
>>> for i, z in enumerate(np.concatenate([rng.normal(0, 1, 300), rng.normal(-3, 1, 50)])):
...     det.update(float(z))
...     if det.drift_detected:
...         hits.append((i, det.change_index))
>>> hits
[(302, 300)]
"""

from __future__ import annotations

import math

import numpy as np

from tunegate.errors import ConfigError
from tunegate.stats.drift.base import DriftDetector

__all__ = ["BOCPD"]

_LOG_2PI = math.log(2.0 * math.pi)


class BOCPD(DriftDetector):
    """Adams-MacKay change-point detector with a Gaussian unknown-mean model.

    Args:
        expected_run: 1 / hazard, the prior mean segment length in samples.
        prior_sd: prior standard deviation of a segment's mean, in sigmas.
        window: a change within this many most recent values counts as drift.
        threshold: posterior probability of such a recent change that raises the alarm.
        max_run: longest run length kept.
        mean: reference mean in raw units (None: learned, self-starting).
        std: reference standard deviation (None: learned, self-starting).
        warmup: values that only feed the running estimates at the start.
        guard: the newest values kept out of the running estimates (see the base class).
    """

    def __init__(self, expected_run: float = 1000.0, prior_sd: float = 2.0, window: int = 30,
                 threshold: float = 0.99, *, max_run: int = 2000, mean: float | None = None,
                 std: float | None = None, warmup: int = 10,
                 guard: int = 0) -> None:
        if expected_run <= 1 or prior_sd <= 0 or window < 1 or not 0 < threshold < 1:
            raise ConfigError(
                "BOCPD needs expected_run > 1, prior_sd > 0, window >= 1, 0 < threshold < 1; got "
                f"{expected_run}, {prior_sd}, {window}, {threshold}")
        if max_run <= window:
            raise ConfigError(f"BOCPD max_run must exceed window, got {max_run} <= {window}")
        super().__init__(mean=mean, std=std, warmup=warmup, guard=guard)
        self.log_h = math.log(1.0 / expected_run)
        self.log_1mh = math.log1p(-1.0 / expected_run)
        self.prior_prec = 1.0 / (prior_sd * prior_sd)
        self.window = window
        self.threshold = threshold
        self.max_run = max_run
        self._reset()

    def _reset(self) -> None:
        self._log_p = np.zeros(1)  # log P(r_t = r | x_1..t), r = 0..len-1
        self._sums = np.zeros(1)  # sum of the r values of each run length
        self._t = 0

    @property
    def run_length_posterior(self) -> np.ndarray:
        """``P(r_t = r)`` for r = 0, 1, ... (a copy)."""
        return np.exp(self._log_p)

    def _step(self, z: float, index: int) -> int | None:
        r = np.arange(self._log_p.size, dtype=float)
        prec = self.prior_prec + r
        mu = self._sums / prec  # prior mean 0 on the standardised scale
        var = 1.0 + 1.0 / prec
        log_pred = -0.5 * (_LOG_2PI + np.log(var) + (z - mu) ** 2 / var)
        joint = self._log_p + log_pred
        growth = joint + self.log_1mh
        change = np.logaddexp.reduce(joint) + self.log_h
        log_p = np.concatenate(([change], growth))
        sums = np.concatenate(([0.0], self._sums + z))
        if log_p.size > self.max_run:
            log_p, sums = log_p[: self.max_run], sums[: self.max_run]
        self._log_p = log_p - np.logaddexp.reduce(log_p)
        self._sums = sums
        self._t += 1
        if self._t <= self.window:
            return None
        recent = float(np.exp(np.logaddexp.reduce(self._log_p[: self.window + 1])))
        if recent <= self.threshold:
            return None
        run = int(np.argmax(self._log_p))
        return index - run + 1
