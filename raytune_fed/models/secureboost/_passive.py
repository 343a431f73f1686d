"""The passive party's side of SecureBoost, as plain in-process logic.

A :class:`PassiveWorker` holds one feature block (all aligned rows, by global id), a
public homomorphic context and nothing else.  It bins all its rows (never a subset the
active party names: :mod:`~raytune_fed.models.secureboost._binning`), answers a level of
node queries with encrypted per-bin sums, partitions a node when its own split wins, and
routes rows through its splits at prediction time.  Everything it receives goes into its
:class:`~raytune_fed.models.secureboost.PassiveView`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from raytune_fed._checks import check_int
from raytune_fed.crypto import Ciphertexts, Layout, load_public_context
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost._binning import apply_bins, grid_edges, mask_ids, quantile_edges
from raytune_fed.models.secureboost._protocol import NodeQuery
from raytune_fed.models.secureboost._view import PassiveView, positions_in, without
from raytune_fed.random import as_generator


def _learn(known: dict[int, np.ndarray], tree: int, node: int, rows: np.ndarray) -> None:
    """Record a node's rows; a node learnt before (a child of this party's own split) must not change."""
    if node in known and not np.array_equal(known[node], rows):
        raise ConfigError(f"tree {tree}: node {node} was sent before with other rows")
    known[node] = rows


class PassiveWorker:
    """Passive party logic over ``features`` (rows indexed by global instance id).

    Parameters
    ----------
    features : (n_rows, n_features) array of this party's columns, all aligned rows.
    seed : seed of the noise that hides non-target coefficients of returned ciphertexts.
    max_bins : the most bins per feature a session may ask for (the owner's grid); a
        session's cut points are moved onto the grid of ``max_bins`` quantile bins.
    """

    def __init__(self, features: np.ndarray, *, seed: int = 0, max_bins: int = 256) -> None:
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ConfigError(f"a passive party needs a 2-D feature block with >= 1 row and column, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ConfigError("a passive party's features must be finite")
        self._X = X
        self._max_bins = check_int("max_bins", max_bins, 2, 256)
        self._grid: list[np.ndarray] | None = None
        self._rng = as_generator(seed)
        self._context = None
        self._edges: list[np.ndarray] = []
        self._ids: np.ndarray | None = None   # mask ids of every row (binned with the training edges)
        self._n_bins = 0
        self._splits: dict[tuple[int, int], int] = {}
        self.view = PassiveView()

    @property
    def n_rows(self) -> int:
        return self._X.shape[0]

    @property
    def n_features(self) -> int:
        return self._X.shape[1]

    # ------------------------------------------------------------------ protocol
    @property
    def max_bins(self) -> int:
        return self._max_bins

    def open_session(self, public_context: bytes, n_bins: int, train_rows: np.ndarray) -> int:
        """Load the active party's public context and bin every row (``n_bins`` per feature at most, on
        the owner's grid; ``train_rows`` are the rows this session's trees may hold); return the mask count."""
        n_bins = check_int("n_bins (at most this party's max_bins)", n_bins, 2, self._max_bins)
        self._check_rows(train_rows)
        self._context = load_public_context(public_context)
        self.view = PassiveView(context_bytes=len(public_context))
        self._n_bins = int(n_bins)
        if self._grid is None:
            self._grid = quantile_edges(self._X, self._max_bins)
        self._edges = grid_edges(self._X, self._n_bins, self._grid)
        self._ids = mask_ids(apply_bins(self._X, self._edges), self._n_bins)
        self._splits = {}
        return self.n_features * self._n_bins

    def histograms(self, queries: Sequence[NodeQuery]) -> list[Ciphertexts]:
        """Encrypted per-bin sums for each direct query, in order; derived ones only update the view.

        The queries are one level of one or more trees (``q.tree``); a derived node names
        its parent and sibling in its own tree."""
        if self._context is None or self._ids is None:
            raise ConfigError("open_session must come before histogram queries")
        out = []
        self.view.n_queries += 1
        for q in queries:
            if q.direct:
                rows = self._check_rows(q.rows)
                _learn(self.view.tree(q.tree).nodes, q.tree, q.node, rows)
                self.view.ciphertext_bytes += q.gh.size
                layout = Layout(rows.size, self.n_features * self._n_bins, q.block)
                out.append(self._context.histogram(q.gh, self._ids[rows], layout, self._rng))
        for q in queries:
            if not q.direct:
                known = self.view.tree(q.tree).nodes
                if q.parent not in known or q.sibling not in known:
                    raise ConfigError(f"tree {q.tree}: node {q.node} is derived from unknown nodes "
                                      f"{q.parent}/{q.sibling}")
                at = positions_in(known[q.parent], known[q.sibling])
                if at is None:
                    raise ConfigError(f"tree {q.tree}: node {q.sibling} is not within node {q.parent}")
                _learn(known, q.tree, q.node, without(known[q.parent], at))
        return out

    def splits(self, picks: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
        """Apply this party's winning splits ``(tree, node, mask)`` (``mask = feature * K + bin``) of one
        level; the left rows of each, in order.  All are checked before any is applied."""
        checked = []
        for tree, node, mask in picks:
            tree, node, mask = int(tree), int(node), int(mask)
            known = self.view.trees[tree].nodes if tree in self.view.trees else {}
            if node not in known:
                raise ConfigError(f"tree {tree}: node {node} was never sent to this party")
            if (tree, node) in self._splits or 2 * node + 1 in known:
                raise ConfigError(f"tree {tree}: node {node} is split already")
            feature, k = divmod(mask, self._n_bins)
            if not 0 <= feature < self.n_features:
                raise ConfigError(f"split mask {mask} names feature {feature}, this party has {self.n_features}")
            checked.append((tree, node, mask, feature, k))
        if len({c[:2] for c in checked}) != len(checked):
            raise ConfigError("a node is named twice in one request")
        out = []
        for tree, node, mask, feature, k in checked:
            known = self.view.trees[tree].nodes
            rows = known[node]
            go_left = self._ids[rows, feature] - feature * self._n_bins <= k
            left = rows[go_left]
            known[2 * node + 1] = left
            known[2 * node + 2] = rows[~go_left]
            self._splits[(tree, node)] = mask
            out.append(left)
        return out

    def route(self, keys: Sequence[tuple[int, int]], rows: np.ndarray) -> np.ndarray:
        """Go-left bits ``(len(rows), len(keys))`` of this party's splits ``keys`` for ``rows``."""
        rows = self._check_rows(rows, sorted_unique=False)
        self.view.n_route_queries += 1
        return self._bits(keys, self._ids[rows])

    def route_features(self, keys: Sequence[tuple[int, int]], features: np.ndarray) -> np.ndarray:
        """Like :meth:`route` for new rows of this party's columns (in-process prediction)."""
        X = np.asarray(features, dtype=np.float64)
        return self._bits(keys, mask_ids(apply_bins(X, self._edges), self._n_bins))

    def op_counts(self) -> dict[str, int]:
        return self._context.counts.as_dict() if self._context is not None else {}

    # ------------------------------------------------------------------ helpers
    def _bits(self, keys: Sequence[tuple[int, int]], ids: np.ndarray) -> np.ndarray:
        out = np.zeros((ids.shape[0], len(keys)), dtype=bool)
        for c, key in enumerate(keys):
            key = (int(key[0]), int(key[1]))
            if key not in self._splits:
                raise ConfigError(f"this party holds no split {key}")
            feature, k = divmod(self._splits[key], self._n_bins)
            out[:, c] = ids[:, feature] - feature * self._n_bins <= k
        return out

    def _check_rows(self, rows: np.ndarray, sorted_unique: bool = True) -> np.ndarray:
        r = np.asarray(rows)
        if r.ndim != 1 or r.size == 0 or not np.issubdtype(r.dtype, np.integer):
            raise ConfigError(f"rows must be a non-empty 1-D array of row ids, got {r.dtype} shape {r.shape}")
        if r.min() < 0 or r.max() >= self.n_rows:
            raise ConfigError(f"row ids must lie in [0, {self.n_rows}), got [{r.min()}, {r.max()}]")
        if sorted_unique and np.any(np.diff(r) <= 0):
            raise ConfigError("row ids of a node must be sorted and unique")
        return r.astype(np.int64)
