"""A passive party's view: everything it received during training, and what it can derive.

The instance clustering attack may use exactly this.  Per federated tree the passive
party learns instance sets: nodes whose rows were sent to it, nodes derived as "parent
minus sibling", and both children of the splits that it owned itself (it computed them).
:meth:`PassiveView.partitions` turns these into the finest partition of rows the party
can infer for each tree: every known node minus its known children, when not empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def positions_in(rows: np.ndarray, subset: np.ndarray) -> np.ndarray | None:
    """Positions in sorted distinct ``rows`` of each id of ``subset``; ``None`` if one is not in ``rows``."""
    at = np.searchsorted(rows, subset)
    if np.any(at >= rows.size) or not np.array_equal(rows[np.minimum(at, rows.size - 1)], subset):
        return None
    return at


def without(rows: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``rows`` minus the entries at positions ``at`` (a linear-time set difference of sorted ids)."""
    keep = np.ones(rows.size, dtype=bool)
    keep[at] = False
    return rows[keep]


@dataclass
class TreeView:
    """Known node row sets of one tree (node id -> sorted global row ids)."""

    tree: int
    nodes: dict[int, np.ndarray] = field(default_factory=dict)

    def cells(self) -> list[np.ndarray]:
        """The finest partition the party can infer: each known node minus its known children."""
        out = []
        for node, rows in sorted(self.nodes.items()):
            children = [self.nodes[c] for c in (2 * node + 1, 2 * node + 2) if c in self.nodes]
            rest = np.setdiff1d(rows, np.concatenate(children)) if children else rows
            if rest.size:
                out.append(rest)
        return out


@dataclass
class PassiveView:
    """The passive party's log: public context size, trees, bytes of ciphertext received."""

    context_bytes: int = 0
    ciphertext_bytes: int = 0
    n_queries: int = 0
    n_route_queries: int = 0
    trees: dict[int, TreeView] = field(default_factory=dict)

    def tree(self, index: int) -> TreeView:
        return self.trees.setdefault(index, TreeView(index))

    def partitions(self) -> list[tuple[int, list[np.ndarray]]]:
        """``(tree index, cells)`` for every tree the party took part in, in tree order."""
        return [(t, self.trees[t].cells()) for t in sorted(self.trees)]
