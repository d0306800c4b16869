"""The Pareto plot (PNG, matplotlib imported lazily with the ``Agg`` backend).

Every evaluated config is a grey dot, configs that missed an SLO are crosses, the delivered
front is joined in blue, the knee is a star and the recommendation a ring. With more than two
objectives the first two are drawn (the report's table has them all); with one objective the
x axis is the evaluation order.

The plot is returned as PNG bytes rather than saved: the caller writes them atomically, so a
run killed while drawing never leaves a truncated ``pareto.png`` behind.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["pareto_png"]


def pareto_png(points: Sequence[Mapping[str, Any]], delivery: Mapping[str, Any]) -> bytes:
    """Draw the delivery's front over all ``points``; return the PNG file's bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objectives = [tuple(o) for o in delivery["objectives"]]
    slos = set(delivery.get("slos") or [])
    front = {p["trial"] for p in delivery.get("pareto") or []}
    knee = (delivery.get("knee") or {}).get("trial")
    chosen = (delivery.get("recommendation") or {}).get("trial")

    def xy(point: Mapping[str, Any], index: int) -> tuple[float, float] | None:
        values = point.get("values") or {}
        if len(objectives) == 1:
            y = values.get(objectives[0][0])
            return None if y is None else (float(index), float(y))
        x, y = values.get(objectives[0][0]), values.get(objectives[1][0])
        return None if x is None or y is None else (float(x), float(y))

    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=100)
    front_xy = []
    for index, point in enumerate(points):
        where = xy(point, index)
        if where is None:
            continue
        missed = bool(slos) and point.get("meets_slos") is False
        ax.scatter(*where, s=18, c="0.6", marker="x" if missed else "o", zorder=1)
        if point["trial"] in front:
            front_xy.append(where)
        if point["trial"] == knee:
            ax.scatter(*where, s=220, marker="*", c="tab:orange", zorder=3, label="knee")
        if point["trial"] == chosen:
            ax.scatter(*where, s=260, facecolors="none", edgecolors="tab:red", linewidths=2,
                       zorder=4, label="recommendation")
    if front_xy:
        front_xy.sort()
        xs, ys = zip(*front_xy, strict=True)
        ax.plot(xs, ys, "-o", c="tab:blue", zorder=2, label="Pareto set")
    if len(objectives) == 1:
        ax.set_xlabel("evaluation")
        ax.set_ylabel(f"{objectives[0][0]} ({objectives[0][1]} is better)")
    else:
        ax.set_xlabel(f"{objectives[0][0]} ({objectives[0][1]} is better)")
        ax.set_ylabel(f"{objectives[1][0]} ({objectives[1][1]} is better)")
    ax.set_title("tunegate: near-optimal within budget")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        ax.legend(unique.values(), unique.keys(), loc="best", fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png")
    plt.close(fig)
    return image.getvalue()
