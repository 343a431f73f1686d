"""One decision tree of a SecureBoost model, in heap layout (children of node j: 2j+1, 2j+2).

Each internal node is owned by one party: the active party (``owner == 0``) keeps its
split as a histogram mask ``feature * K + bin``; a passive party (``owner == p``) keeps
its own split and the tree only knows the key ``(tree index, node)``, so routing a row
through a passive node needs that party's answer (:meth:`Tree.passive_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

ABSENT, LEAF, ACTIVE = -2, -1, 0


@dataclass
class Tree:
    """Arrays over heap node ids; ``owner`` is ABSENT, LEAF, ACTIVE or a passive party index."""

    index: int
    output: int
    max_depth: int
    federated: bool
    owner: np.ndarray
    mask: np.ndarray
    value: np.ndarray
    shared: np.ndarray  # node built with passive parties

    @classmethod
    def empty(cls, index: int, output: int, max_depth: int, federated: bool) -> Tree:
        """A tree of depth ``max_depth`` whose nodes are all ABSENT."""
        size = 2 ** (max_depth + 1) - 1
        return cls(index, output, max_depth, federated, np.full(size, ABSENT, dtype=np.int16),
                   np.full(size, -1, dtype=np.int32), np.zeros(size, dtype=np.float64), np.zeros(size, dtype=bool))

    def set_leaf(self, node: int, value: float, shared: bool) -> None:
        self.owner[node], self.value[node], self.shared[node] = LEAF, value, shared

    def set_split(self, node: int, owner: int, mask: int, shared: bool) -> None:
        self.owner[node], self.mask[node], self.shared[node] = owner, mask, shared

    def passive_keys(self) -> dict[int, list[tuple[int, int]]]:
        """Per passive party, the keys ``(tree index, node)`` of its splits in this tree."""
        out: dict[int, list[tuple[int, int]]] = {}
        for node in np.flatnonzero(self.owner > ACTIVE):
            out.setdefault(int(self.owner[node]), []).append((self.index, int(node)))
        return out

    @property
    def n_leaves(self) -> int:
        return int(np.count_nonzero(self.owner == LEAF))

    def apply(self, active_bins: np.ndarray, n_bins: int,
              passive_left: Mapping[tuple[int, int], np.ndarray]) -> np.ndarray:
        """Leaf node of every row; ``passive_left[(tree, node)]`` is the passive party's go-left bits."""
        n = active_bins.shape[0]
        node = np.zeros(n, dtype=np.int64)
        for _ in range(self.max_depth):
            owner = self.owner[node]
            inner = owner >= ACTIVE
            if not inner.any():
                break
            go_left = np.zeros(n, dtype=bool)
            for j in np.unique(node[inner]):
                rows = np.flatnonzero(node == j)
                if self.owner[j] == ACTIVE:
                    feature, k = divmod(int(self.mask[j]), n_bins)
                    go_left[rows] = active_bins[rows, feature] <= k
                else:
                    go_left[rows] = passive_left[(self.index, int(j))][rows]
            node = np.where(inner, np.where(go_left, 2 * node + 1, 2 * node + 2), node)
        return node

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe description (no pickle): the arrays as lists."""
        return {"index": self.index, "output": self.output, "max_depth": self.max_depth,
                "federated": self.federated, "owner": self.owner.tolist(), "mask": self.mask.tolist(),
                "value": self.value.tolist(), "shared": self.shared.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Tree:
        return cls(int(d["index"]), int(d["output"]), int(d["max_depth"]), bool(d["federated"]),
                   np.asarray(d["owner"], dtype=np.int16), np.asarray(d["mask"], dtype=np.int32),
                   np.asarray(d["value"], dtype=np.float64), np.asarray(d["shared"], dtype=bool))
