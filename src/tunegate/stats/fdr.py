"""Benjamini-Hochberg: judge several metrics together without inflating false discoveries.

Looking at throughput, TTFT, TPOT, their p99s and memory at once, "at least one is significant"
is likely even when nothing changed. BH (Benjamini & Hochberg 1995) controls the expected share
of false discoveries at ``q``: sort the m p-values, find the largest k with
``p_(k) <= k q / m`` and reject the k smallest. The adjusted p-value is
``min_{j >= i} min(1, m p_(j) / j)``; a metric is significant when its adjusted p <= q.
The adjustment is SciPy's ``scipy.stats.false_discovery_control(method="bh")``; this module adds
input checks and the reject mask. Valid under independence or positive dependence (PRDS), which
is the usual case for throughput and latency moving together.

Example (the 1995 paper's 15 p-values; at q = 0.05 the first four are rejected):

>>> p = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459,
...      0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.0]
>>> result = benjamini_hochberg(p, q=0.05)
>>> result.n_rejected, result.rejected[:5]
(4, (True, True, True, True, False))
>>> round(result.adjusted[3], 6)
0.035625
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from tunegate.errors import ConfigError

__all__ = ["FDRResult", "benjamini_hochberg"]


@dataclass(frozen=True)
class FDRResult:
    """BH outcome, in the input order.

    Attributes:
        q: the false discovery rate controlled.
        raw: the p-values as given.
        adjusted: BH-adjusted p-values.
        rejected: whether each null hypothesis is rejected (adjusted <= q).
    """

    q: float
    raw: tuple[float, ...]
    adjusted: tuple[float, ...]
    rejected: tuple[bool, ...]

    @property
    def n_rejected(self) -> int:
        """How many hypotheses were rejected."""
        return sum(self.rejected)


def benjamini_hochberg(p_values: Sequence[float], q: float = 0.05) -> FDRResult:
    """Adjust p-values with Benjamini-Hochberg and reject at FDR ``q``.

    Args:
        p_values: one p-value per metric judged together.
        q: the false discovery rate, in (0, 1).

    Raises:
        ConfigError: q out of range, or a p-value outside [0, 1] or NaN.
    """
    if not 0 < q < 1:
        raise ConfigError(f"FDR q must lie strictly between 0 and 1, got {q}")
    raw = tuple(float(p) for p in p_values)
    if not raw:
        return FDRResult(q, (), (), ())
    for p in raw:
        if math.isnan(p) or not 0 <= p <= 1:
            raise ConfigError(f"p-values must lie in [0, 1], got {p}")
    adjusted = np.asarray(sps.false_discovery_control(np.asarray(raw), method="bh"), dtype=float)
    adj = tuple(float(min(1.0, a)) for a in adjusted)
    return FDRResult(q, raw, adj, tuple(a <= q for a in adj))
