"""Quantile bins per feature, fitted by the party that holds the feature.

Cut points are the ``1/K .. (K-1)/K`` quantiles of the column, duplicates removed, so a
feature has at most ``K`` bins.  Bin ``k`` holds the values in ``(edge[k-1], edge[k]]``; a
split "bin <= k" sends ``x <= edge[k]`` left, also for rows binned later (test rows).

The active party bins its training rows.  A passive party bins all the rows it holds
(the aligned rows, which no request can change) and moves every cut point onto its owner's
grid of at most ``max_bins`` quantile bins (:func:`grid_edges`), so whatever bin counts
sessions ask for, each session's bins are unions of the grid's bins (:func:`coarsen`); with
its privacy mechanism on, the grid bins it coarsens are moved once by
:func:`randomised_bins`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from raytune_fed.errors import ConfigError


def quantile_edges(X: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Cut points of each column of ``X`` (a list of increasing arrays, at most ``n_bins - 1`` long)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ConfigError(f"binning needs a non-empty 2-D array, got shape {X.shape}")
    qs = np.arange(1, n_bins) / n_bins  # j / K rounded once: the same float as (j m) / (K m), so grids nest
    edges = []
    for j in range(X.shape[1]):
        cuts = np.unique(np.quantile(X[:, j], qs, method="linear"))
        # the largest value needs no cut point of its own
        edges.append(cuts[cuts < X[:, j].max()])
    return edges


def apply_bins(X: np.ndarray, edges: list[np.ndarray]) -> np.ndarray:
    """Bin index of every value (``uint8``/``int16`` matrix shaped like ``X``)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(edges):
        raise ConfigError(f"expected a 2-D array with {len(edges)} columns, got shape {X.shape}")
    out = np.empty(X.shape, dtype=np.int16)
    for j, cuts in enumerate(edges):
        out[:, j] = np.searchsorted(cuts, X[:, j], side="left")
    return out


def mask_ids(bins: np.ndarray, n_bins: int) -> np.ndarray:
    """``feature * n_bins + bin``: the histogram slot of each value (``int32``)."""
    return (np.asarray(bins, dtype=np.int32) + np.arange(bins.shape[1], dtype=np.int32) * n_bins).astype(np.int32)


def grid_edges(X: np.ndarray, n_bins: int, grid: list[np.ndarray]) -> list[np.ndarray]:
    """:func:`quantile_edges` of ``X`` with every cut point moved to the nearest cut point of ``grid``.

    ``grid`` is ``quantile_edges(X, max_bins)``; where ``n_bins`` divides ``max_bins`` the
    quantiles already are grid cut points and nothing moves.
    """
    out = []
    for cuts, allowed in zip(quantile_edges(X, n_bins), grid):
        if allowed.size == 0:
            out.append(allowed.copy())
            continue
        at = np.clip(np.searchsorted(allowed, cuts), 1, allowed.size - 1) if allowed.size > 1 else np.zeros(
            cuts.size, dtype=np.int64)
        if allowed.size > 1:
            lower = allowed[at - 1]
            at = np.where(np.abs(cuts - lower) <= np.abs(allowed[at] - cuts), at - 1, at)
        out.append(np.unique(allowed[at]))
    return out


def randomised_bins(bins: np.ndarray, n_bins: np.ndarray | Sequence[int], epsilon: float,
                    rng: np.random.Generator) -> np.ndarray:
    """``bins`` moved by two-sided geometric noise, ``P(shift = d)`` proportional to ``exp(-epsilon |d|)``,
    then clipped to each feature's ``n_bins``: the geometric mechanism on the bin index, so any two values
    ``d`` bins apart are reported alike up to a factor ``exp(epsilon d)``."""
    alpha = np.exp(-epsilon)
    shift = rng.geometric(1 - alpha, bins.shape) - rng.geometric(1 - alpha, bins.shape)
    return np.clip(bins.astype(np.int64) + shift, 0, np.asarray(n_bins) - 1).astype(np.int16)


def coarsen(grid_bins: np.ndarray, grid: list[np.ndarray], edges: list[np.ndarray]) -> np.ndarray:
    """The bin, under cut points ``edges`` (a subset of ``grid``'s), of each grid bin in ``grid_bins``."""
    out = np.empty(grid_bins.shape, dtype=np.int16)
    for j, (cuts, sub) in enumerate(zip(grid, edges)):
        upper = np.append(cuts, np.inf)  # grid bin g holds values up to upper[g]
        out[:, j] = np.searchsorted(sub, upper[grid_bins[:, j]], side="left")
    return out
