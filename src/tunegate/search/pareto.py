"""Pareto dominance, hypervolume and the knee point, on plain arrays (every value maximised).

Callers turn their metrics into a matrix ``Y`` of shape ``(n, m)`` where larger is better in
every column (multiply "lower is better" metrics by -1, :meth:`Objective.sign`).

* :func:`pareto_mask`: the non-dominated rows. ``a`` dominates ``b`` when ``a >= b`` in every
  objective and ``a > b`` in at least one.
* :func:`dominance_rate`: for each row, the share of the *other* rows it dominates.
* :func:`hypervolume`: the volume dominated by ``Y`` and bounded below by a reference point
  (exact; slicing in the first objective, recursive over the rest; fine for <= 5 objectives and
  the few hundred points a tuning run has).
* :func:`knee_index`: the front point with the largest **exclusive hypervolume contribution**
  after normalising each objective to [0, 1] over the front (0 = the front's worst value, 1 =
  its best) with the reference at -0.1 in every objective. It is the point whose removal loses
  the most of the front's trade-off: at an extreme of a flat front its contribution is small,
  at a pronounced bend it is largest (the article's "maximum marginal utility" in volume form).

Example (a hand-checkable front: boxes 3x1, 2x2 and 1x3 overlap in 1x1 squares):
    >>> import numpy as np
    >>> Y = np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 3.0], [1.0, 1.0]])
    >>> pareto_mask(Y).tolist()
    [True, True, True, False]
    >>> hypervolume(Y, np.zeros(2))
    6.0
    >>> knee_index(Y)
    1
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["dominance_rate", "dominates", "hypervolume", "hypervolume_contributions",
           "knee_index", "pareto_mask"]

Array = NDArray[np.float64]


def _matrix(Y: ArrayLike) -> Array:
    out = np.asarray(Y, dtype=float)
    if out.ndim != 2:
        raise ValueError(f"expected a matrix of shape (n, m), got shape {out.shape}")
    return out


def dominates(a: ArrayLike, b: ArrayLike) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` (maximisation)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all(x >= y) and np.any(x > y))


def pareto_mask(Y: ArrayLike) -> NDArray[np.bool_]:
    """Boolean mask of the non-dominated rows of ``Y`` (duplicates are all kept)."""
    M = _matrix(Y)
    n = len(M)
    mask = np.ones(n, dtype=bool)
    for i in range(n):
        others = np.delete(M, i, axis=0)
        if len(others) and np.any(np.all(others >= M[i], axis=1) & np.any(others > M[i], axis=1)):
            mask[i] = False
    return mask


def dominance_rate(Y: ArrayLike) -> Array:
    """For each row, the share of the other rows it dominates (0 when ``n == 1``)."""
    M = _matrix(Y)
    n = len(M)
    if n <= 1:
        return np.zeros(n)
    counts = [sum(dominates(M[i], M[j]) for j in range(n) if j != i) for i in range(n)]
    return np.asarray(counts, dtype=float) / (n - 1)


def hypervolume(Y: ArrayLike, ref: ArrayLike) -> float:
    """Volume dominated by the rows of ``Y`` above the reference point ``ref`` (exact).

    Rows that do not strictly exceed ``ref`` in every objective contribute nothing.
    """
    M = _matrix(Y)
    r = np.asarray(ref, dtype=float)
    if len(M) == 0:
        return 0.0
    M = M[np.all(r < M, axis=1)]
    if len(M) == 0:
        return 0.0
    M = M[pareto_mask(M)]
    return float(_hv(M - r))


def _hv(P: Array) -> float:
    """Hypervolume of points ``P`` (all > 0) against the origin."""
    m = P.shape[1]
    if m == 1:
        return float(P[:, 0].max())
    if m == 2:
        order = np.argsort(-P[:, 0])
        volume, best_y = 0.0, 0.0
        for x, y in P[order]:
            if y > best_y:
                volume += x * (y - best_y)
                best_y = y
        return volume
    # Slice along the last objective: between consecutive levels, the points reaching above
    # the slab dominate an (m-1)-dimensional region.
    levels = np.unique(P[:, -1])
    volume, lower = 0.0, 0.0
    for level in levels:
        above = P[P[:, -1] >= level][:, :-1]
        volume += (level - lower) * _hv(above[pareto_mask(above)])
        lower = level
    return volume


def hypervolume_contributions(Y: ArrayLike, ref: ArrayLike) -> Array:
    """Each row's exclusive contribution: HV(all) - HV(all but that row)."""
    M = _matrix(Y)
    total = hypervolume(M, ref)
    return np.asarray([total - hypervolume(np.delete(M, i, axis=0), ref)
                       for i in range(len(M))], dtype=float)


def knee_index(front: ArrayLike) -> int:
    """Index (into ``front``) of the knee: max exclusive hypervolume contribution, normalised.

    See the module docstring for the method. One point is its own knee; ties go to the lowest
    index (deterministic).
    """
    F = _matrix(front)
    if len(F) == 0:
        raise ValueError("the front is empty")
    if len(F) == 1:
        return 0
    low, high = F.min(axis=0), F.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    normalised = (F - low) / span
    contributions = hypervolume_contributions(normalised, np.full(F.shape[1], -0.1))
    return int(np.argmax(np.round(contributions, 12)))
