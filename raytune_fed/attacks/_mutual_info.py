"""Mutual information between a tree's instance distribution and the labels (Figure 3).

A tree's instance distribution is the cell (leaf, or finest known node) of each row; the
mutual information ``I(cell; label)`` in nats is high when cells are pure, which is what
the instance clustering attack exploits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import mutual_info_score

from raytune_fed.errors import ConfigError


def partition_mutual_information(cells: Sequence[np.ndarray], labels: np.ndarray,
                                 rows: np.ndarray | None = None) -> float:
    """``I(cell; label)`` over the rows in ``cells`` (``labels[i]`` is the class of id ``rows[i]``)."""
    labels = np.asarray(labels)
    rows = np.arange(labels.size) if rows is None else np.asarray(rows)
    if rows.shape != labels.shape:
        raise ConfigError(f"labels and rows must have equal length, got {labels.shape} and {rows.shape}")
    if not cells:
        return 0.0
    ids = np.concatenate(cells)
    cell_of = np.repeat(np.arange(len(cells)), [c.size for c in cells])
    return float(mutual_info_score(labels[np.searchsorted(rows, ids)], cell_of))


def leaf_mutual_information(leaves: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per tree, ``I(leaf; label)`` from a ``(n_rows, n_trees)`` leaf-index matrix (e.g. ``model.apply``)."""
    leaves = np.asarray(leaves)
    if leaves.ndim != 2 or leaves.shape[0] != np.asarray(labels).size:
        raise ConfigError(f"leaves must be (n_rows, n_trees) with one row per label, got {leaves.shape}")
    return np.array([mutual_info_score(labels, leaves[:, t]) for t in range(leaves.shape[1])])
