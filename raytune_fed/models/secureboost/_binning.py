"""Quantile bins per feature, fitted by the party that holds the feature.

Cut points are the ``1/K .. (K-1)/K`` quantiles of the training column, duplicates
removed, so a feature has at most ``K`` bins.  Bin ``k`` holds the values in
``(edge[k-1], edge[k]]``; a split "bin <= k" sends ``x <= edge[k]`` left, also for rows
binned later (test rows).
"""

from __future__ import annotations

import numpy as np

from raytune_fed.errors import ConfigError


def quantile_edges(X: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Cut points of each column of ``X`` (a list of increasing arrays, at most ``n_bins - 1`` long)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ConfigError(f"binning needs a non-empty 2-D array, got shape {X.shape}")
    qs = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
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
