"""Plot rules every report follows.

* :func:`distribution` - a box only where a group has at least :data:`MIN_BOX_POINTS`
  values; smaller groups show their points (a box of two points says nothing); medians
  are drawn in black over the box's own colour so they stay visible.
* :func:`fit_axis` - limits that fit the data (finite values, a small margin), so points
  never crowd into one corner of a plot whose axis starts at zero.
* :func:`integer_ticks` - whole-number ticks for counts such as generations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MIN_BOX_POINTS = 5
"""Fewest values a group needs to be drawn as a box (below: the points themselves)."""

MEDIAN_STYLE = {"color": "black", "linewidth": 2.0}


def fit_axis(ax: Any, values: Any, axis: str = "y", *, margin: float = 0.08, floor: float | None = None,
             ceiling: float | None = None) -> tuple[float, float] | None:
    """Set ``axis`` limits to the finite ``values`` plus ``margin`` of their range (clipped to
    ``floor``/``ceiling``); a single value gets a window around it.  Returns the limits."""
    v = np.asarray([x for x in np.ravel(np.asarray(values, dtype=float)) if np.isfinite(x)], dtype=float)
    if v.size == 0:
        return None
    lo, hi = float(v.min()), float(v.max())
    span = hi - lo if hi > lo else max(abs(hi), 1.0) * 0.1
    lo, hi = lo - margin * span, hi + margin * span
    if floor is not None:
        lo = max(lo, floor)
    if ceiling is not None:
        hi = min(hi, ceiling)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    return lo, hi


def integer_ticks(ax: Any, axis: str = "x") -> None:
    """Only whole numbers as ticks on ``axis`` (generations, rounds, counts)."""
    from matplotlib.ticker import MaxNLocator

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def distribution(ax: Any, groups: Sequence[Any], labels: Sequence[str], colours: Sequence[Any] | None = None) -> None:
    """One column per group: a box plot (median in black, mean as a white diamond) for groups
    of at least :data:`MIN_BOX_POINTS` values, the points and their median otherwise."""
    data = [np.asarray([x for x in np.ravel(np.asarray(g, dtype=float)) if np.isfinite(x)]) for g in groups]
    colours = list(colours) if colours is not None else [None] * len(data)
    positions = np.arange(1, len(data) + 1)
    boxed = [i for i, d in enumerate(data) if d.size >= MIN_BOX_POINTS]
    if boxed:
        box = ax.boxplot([data[i] for i in boxed], positions=positions[boxed], widths=0.6, patch_artist=True,
                         showmeans=True, medianprops=MEDIAN_STYLE,
                         meanprops={"marker": "D", "markerfacecolor": "white", "markeredgecolor": "black",
                                    "markersize": 5}, flierprops={"markersize": 3})
        for patch, i in zip(box["boxes"], boxed):
            patch.set(facecolor=colours[i] or "#9db4d0", alpha=0.55)
    for i, d in enumerate(data):
        if d.size == 0 or i in boxed:
            continue
        offsets = (np.arange(d.size) - (d.size - 1) / 2) * min(0.12, 0.5 / max(d.size, 1))
        ax.scatter(positions[i] + offsets, d, s=30, color=colours[i] or "#3a6ea5", edgecolor="black",
                   linewidth=0.5, zorder=3)
        ax.hlines(np.median(d), positions[i] - 0.25, positions[i] + 0.25, zorder=4, **MEDIAN_STYLE)
    ax.set_xticks(positions, list(labels))
    ax.set_xlim(0.4, len(data) + 0.6)
    fit_axis(ax, np.concatenate(data) if data else [], "y")


def describe_distribution(groups: Sequence[Any]) -> str:
    """The sentence a caption needs: which columns are boxes and which are points."""
    sizes = [int(np.isfinite(np.asarray(g, dtype=float)).sum()) for g in groups]
    if all(n >= MIN_BOX_POINTS for n in sizes):
        return "Boxes: quartiles, black line the median, white diamond the mean."
    if all(n < MIN_BOX_POINTS for n in sizes):
        return (f"Each point is one value (fewer than {MIN_BOX_POINTS} per column, too few for a box); "
                "black line the median.")
    return (f"Columns with at least {MIN_BOX_POINTS} values are boxes (black line the median, white diamond the "
            "mean); the others show their points and median.")
