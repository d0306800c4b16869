"""Space-filling initial designs: scrambled Sobol or Latin hypercube, plus the default config.

A surrogate model needs a first look at the whole space before it can be trusted. Sobol points
(``scipy.stats.qmc.Sobol``, scrambled and seeded) fill ``[0, 1]^d`` more evenly than random
draws at every prefix; a Latin hypercube guarantees each parameter's range is cut into ``n``
strata with one point in each. The default config (what the service runs today) is always worth
one evaluation: it is the reference every change is compared with.

Points are *snapped*: each coordinate moves to the centre of the bin of the value it maps to
(:func:`snap`), so the design evaluates exactly what the surrogate will be trained on.

Example:
    >>> from tunegate.search.space import Layer, Param, SearchSpace
    >>> space = SearchSpace.of([Param("seqs", "log_int", Layer.SCHEDULING, low=8, high=512,
    ...                                default=256)])
    >>> points = initial_design(space, 4, seed=0)
    >>> len(points), space.from_unit(points[0])["seqs"]
    (4, 256)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.stats import qmc

from tunegate.search.space import SearchSpace

__all__ = ["initial_design", "snap"]


def snap(space: SearchSpace, point: Sequence[float] | NDArray[np.float64]
         ) -> tuple[float, ...]:
    """The unit point of the config ``point`` maps to (discrete values at their bin centre)."""
    config = space.from_unit([min(max(float(u), 0.0), 1.0) for u in point])
    return tuple(float(u) for u in space.to_unit(config))


def initial_design(space: SearchSpace, n: int, *, seed: int,
                   method: Literal["sobol", "lhs"] = "sobol",
                   include_default: bool = True) -> list[tuple[float, ...]]:
    """``n`` snapped points of ``[0, 1]^dims``: the default config first (when asked), then a
    seeded scrambled Sobol or Latin hypercube sample.

    Args:
        space: The search space.
        n: Points wanted (>= 1).
        seed: Seeds the scrambling; the same seed gives the same design.
        method: ``sobol`` or ``lhs``.
        include_default: Put the space's default config first (when every tunable parameter
            has a default inside its range).

    Raises:
        ValueError: ``n < 1`` or an unknown method.
    """
    if n < 1:
        raise ValueError(f"a design needs n >= 1 points, got {n}")
    dims = max(space.dims, 1)
    out: list[tuple[float, ...]] = []
    default = space.default()
    if include_default and all(p.name in default and p.contains(default[p.name])
                               for p in space.tunable):
        out.append(tuple(float(u) for u in space.to_unit(default)))
    needed = n - len(out)
    if needed > 0:
        if method == "sobol":
            size = 1 << max(needed - 1, 1).bit_length()  # a power of two keeps the balance
            sample = qmc.Sobol(d=dims, scramble=True, seed=seed).random(size)[:needed]
        elif method == "lhs":
            sample = qmc.LatinHypercube(d=dims, seed=seed).random(needed)
        else:
            raise ValueError(f"unknown design method {method!r}; use 'sobol' or 'lhs'")
        seen = set(out)
        for row in np.asarray(sample):
            point = snap(space, row[: space.dims])
            if point not in seen:  # two draws in one discrete cell: keep one
                seen.add(point)
                out.append(point)
    return out[:n]
