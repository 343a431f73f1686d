"""The passive party's side of SecureBoost, as plain in-process logic.

A :class:`PassiveWorker` holds one feature block (all aligned rows, by global id), a
public homomorphic context and nothing else.  It bins all its rows (never a subset the
active party names: :mod:`~raytune_fed.models.secureboost._binning`), answers a level of
node queries with encrypted sums, partitions a node when its own split wins, and routes
rows through its splits at prediction time.  Everything it receives goes into its
:class:`~raytune_fed.models.secureboost.PassiveView`.

What it sums are the left sides of its candidate splits ("feature ``f``, bin ``<= k``"),
one per threshold, in an order drawn afresh for every tree and known only to this party
(:class:`~raytune_fed.crypto.ThresholdMasks`): the active party finds the best split from
the sums and names it by its place in that order, so it cannot name a (feature, bin) it
did not read from the sums.  The party answers only requests that follow the protocol:
a tree starts with its root (training rows only), a node is queried once and only as a
child of a node of the tree's previous level (its rows within the parent's), and a split
names a node of the tree's last level that nobody split before.  Of the candidates that
divide a node the same way, the party applies the lowest (feature, bin), as the active
party's tie rule did when it named (feature, bin) itself.  With ``bin_privacy`` every row's
bin on the owner's grid is moved once by the geometric mechanism, and every answer uses the
moved bins (``route_features``, for rows that are not aligned rows, bins them as they are).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.crypto import Ciphertexts, Layout, PublicContext, ThresholdMasks, load_public_context
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost._binning import apply_bins, coarsen, grid_edges, quantile_edges, randomised_bins
from raytune_fed.models.secureboost._protocol import NodeQuery
from raytune_fed.models.secureboost._view import PassiveView, positions_in, without
from raytune_fed.random import as_generator, derive


@dataclass
class _TreeState:
    """One tree as this party knows it: its candidate order, the nodes of its last level, the nodes answered."""

    slot_of: np.ndarray                 # candidate f * (K - 1) + k -> its place in this tree's sums
    candidate_of: np.ndarray            # the inverse
    level: set[int] = field(default_factory=set)
    answered: set[int] = field(default_factory=set)
    split: set[int] = field(default_factory=set)


class PassiveWorker:
    """Passive party logic over ``features`` (rows indexed by global instance id).

    Parameters
    ----------
    features : (n_rows, n_features) array of this party's columns, all aligned rows.
    seed : seed of the noise that hides non-target coefficients of returned ciphertexts and
        of each tree's candidate order.
    max_bins : the most bins per feature a session may ask for (the owner's grid); a
        session's cut points are moved onto the grid of ``max_bins`` quantile bins.
    bin_privacy : ``epsilon`` of the geometric mechanism on every row's grid bin (None: off).
        Each row's bin of each feature on the owner's grid is moved once, by noise with
        ``P(shift = d)`` proportional to ``exp(-epsilon |d|)`` drawn from ``privacy_seed``,
        and every answer (sums, splits, routes) uses the moved bins, so no reading of the
        answers, in any number of sessions, tells more about a value than its moved bin.
    privacy_seed : seed of that noise (an int or a ``SeedSequence``); the same for every
        session of a party, and secret (a party draws it from its owner credential).
    """

    def __init__(self, features: np.ndarray, *, seed: int = 0, max_bins: int = 256,
                 bin_privacy: float | None = None, privacy_seed: Any = 0) -> None:
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ConfigError(f"a passive party needs a 2-D feature block with >= 1 row and column, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ConfigError("a passive party's features must be finite")
        self._X = X
        self._max_bins = check_int("max_bins", max_bins, 2, 256)
        self._grid: list[np.ndarray] | None = None
        self._bin_privacy = None if bin_privacy is None else check_float("bin_privacy", bin_privacy, 0.0)
        if self._bin_privacy == 0:
            raise ConfigError("bin_privacy must be > 0 (None switches it off), got 0")
        self._privacy_seed = privacy_seed
        self._grid_bins: np.ndarray | None = None
        self._seed = seed
        self._rng = as_generator(seed)
        self._context: PublicContext | None = None
        self._edges: list[np.ndarray] = []
        self._bins: np.ndarray | None = None   # every row's bin of every feature
        self._train = np.zeros(self.n_rows, dtype=bool)
        self._n_bins = 0
        self._trees: dict[int, _TreeState] = {}
        self._splits: dict[tuple[int, int], tuple[int, int]] = {}  # (tree, node) -> (feature, bin)
        self.view = PassiveView()

    @property
    def n_rows(self) -> int:
        return self._X.shape[0]

    @property
    def n_features(self) -> int:
        return self._X.shape[1]

    @property
    def max_bins(self) -> int:
        return self._max_bins

    @property
    def n_candidates(self) -> int:
        """Candidate splits (masks) per tree: ``n_features * (n_bins - 1)``."""
        return self.n_features * (self._n_bins - 1)

    # ------------------------------------------------------------------ protocol
    def open_session(self, public_context: bytes, n_bins: int, train_rows: np.ndarray) -> int:
        """Load the active party's public context and bin every row (``n_bins`` per feature at most, on
        the owner's grid; ``train_rows`` are the rows this session's trees may hold); return the mask count."""
        n_bins = check_int("n_bins (at most this party's max_bins)", n_bins, 2, self._max_bins)
        rows = self._check_rows(train_rows)
        self._context = load_public_context(public_context)
        self.view = PassiveView(context_bytes=len(public_context))
        self._n_bins = int(n_bins)
        if self._grid is None or self._grid_bins is None:  # both are made once, together
            self._grid = quantile_edges(self._X, self._max_bins)
            self._grid_bins = apply_bins(self._X, self._grid)
            if self._bin_privacy is not None:
                self._grid_bins = randomised_bins(self._grid_bins, [c.size + 1 for c in self._grid],
                                                  self._bin_privacy, as_generator(self._privacy_seed))
        self._edges = grid_edges(self._X, self._n_bins, self._grid)
        self._bins = coarsen(self._grid_bins, self._grid, self._edges)
        self._train = np.zeros(self.n_rows, dtype=bool)
        self._train[rows] = True
        self._trees, self._splits = {}, {}
        return self.n_candidates

    def members(self, tree: int, rows: np.ndarray) -> np.ndarray:
        """Which of tree ``tree``'s masks each of ``rows`` falls into, ``(len(rows), n_masks)`` (the owner's view)."""
        state = self._trees[int(tree)]
        return ThresholdMasks(self._opened_bins()[np.asarray(rows)], self._n_bins, state.slot_of).member(
            0, len(rows), self.n_candidates)

    def histograms(self, queries: Sequence[NodeQuery],
                   deadline: Callable[[], None] | None = None) -> list[Ciphertexts]:
        """Encrypted left-side sums of every candidate split for each direct query, in order; derived
        ones only update the view.  The queries are one level of one or more trees (``q.tree``).

        The whole request is checked before any of it is answered (see the module docstring);
        ``deadline()`` (a request's CPU limit) is called before each sum and may raise, leaving the
        level half-answered (the caller then ends the session)."""
        if self._context is None or self._bins is None:
            raise ConfigError("open_session must come before histogram queries")
        plan = self._check_level(queries)
        self.view.n_queries += 1
        out = []
        for q, rows in plan:
            known = self.view.tree(q.tree).nodes
            if q.direct:
                if q.gh is None:  # _check_level refuses a direct query without ciphertexts; None is a bug
                    raise RuntimeError(f"tree {q.tree}: node {q.node} has no ciphertexts")
                if deadline is not None:
                    deadline()
                self.view.ciphertext_bytes += q.gh.size
                layout = Layout(rows.size, self.n_candidates, q.block)
                masks = ThresholdMasks(self._bins[rows], self._n_bins, self._trees[q.tree].slot_of)
                out.append(self._context.histogram(q.gh, masks, layout, self._rng))
            known[q.node] = rows
        for tree in {q.tree for q, _ in plan}:
            state = self._trees[tree]
            state.level = {q.node for q, _ in plan if q.tree == tree}
            state.answered |= state.level
        return out

    def _check_level(self, queries: Sequence[NodeQuery]) -> list[tuple[NodeQuery, np.ndarray]]:
        """Each query with its node's rows, once the whole request is checked; new trees get their order."""
        by_tree: dict[int, list[NodeQuery]] = {}
        for q in queries:
            if q.direct and q.gh is None:
                raise ConfigError(f"tree {q.tree}: node {q.node} is sent with its rows but without their ciphertexts")
            by_tree.setdefault(int(q.tree), []).append(q)
        plan: list[tuple[NodeQuery, np.ndarray]] = []
        new_trees = []
        for tree, qs in by_tree.items():
            known = self.view.trees[tree].nodes if tree in self.view.trees else {}
            state = self._trees.get(tree)
            if state is None:
                if len(qs) != 1 or qs[0].node != 0 or qs[0].parent != -1 or qs[0].rows is None:
                    raise ConfigError(f"tree {tree}: a new tree starts with its root alone")
                rows = self._check_rows(qs[0].rows)
                if not np.all(self._train[rows]):
                    raise ConfigError(f"tree {tree}: the root holds rows outside this session's training rows")
                plan.append((qs[0], rows))
                new_trees.append(tree)
                continue
            nodes = {q.node: q for q in qs}
            if len(nodes) != len(qs):
                raise ConfigError(f"tree {tree}: a node is named twice in one request")
            for q in qs:
                if q.node in state.answered:
                    raise ConfigError(f"tree {tree}: node {q.node} was answered before")
                if q.node <= 0 or q.parent != (q.node - 1) // 2 or q.parent not in state.level:
                    raise ConfigError(f"tree {tree}: node {q.node} is not a child of a node of the tree's last level")
                parent = known[q.parent]
                if q.rows is not None:  # a direct query
                    rows = self._check_rows(q.rows)
                    if positions_in(parent, rows) is None:
                        raise ConfigError(f"tree {tree}: node {q.node} holds rows outside node {q.parent}")
                else:
                    sibling = nodes.get(q.sibling)
                    if q.sibling != q.node + (1 if q.node % 2 else -1) or sibling is None or not sibling.direct:
                        raise ConfigError(f"tree {tree}: node {q.node} is derived from a sibling not sent with it")
                    at = positions_in(parent, np.asarray(sibling.rows, dtype=np.int64))
                    if at is None:
                        raise ConfigError(f"tree {tree}: node {q.sibling} is not within node {q.parent}")
                    rows = without(parent, at)
                if q.node in known and not np.array_equal(known[q.node], rows):
                    raise ConfigError(f"tree {tree}: node {q.node} was sent before with other rows")
                plan.append((q, rows))
        for tree in new_trees:
            order = as_generator(derive(self._seed, "candidates", tree)).permutation(self.n_candidates)
            self._trees[tree] = _TreeState(order, np.argsort(order))
        return plan

    def splits(self, picks: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
        """Apply this party's winning splits ``(tree, node, slot)`` of one level (``slot``: the candidate's place
        in the tree's sums); the left rows of each, in order.  All are checked before any is applied."""
        checked = []
        for tree, node, slot in picks:
            tree, node, slot = int(tree), int(node), int(slot)
            state = self._trees.get(tree)
            if state is None or node not in state.level:
                raise ConfigError(f"tree {tree}: node {node} is not a node of the tree's last level")
            if node in state.split:
                raise ConfigError(f"tree {tree}: node {node} is split already")
            if not 0 <= slot < self.n_candidates:
                raise ConfigError(f"split {slot} names no candidate; this party has {self.n_candidates}")
            feature, k = divmod(int(state.candidate_of[slot]), self._n_bins - 1)
            rows = self.view.trees[tree].nodes[node]
            go_left = self._opened_bins()[rows, feature] <= k
            if go_left.all() or not go_left.any():
                raise ConfigError(f"tree {tree}: split {slot} does not divide node {node}")
            checked.append((tree, node, rows, go_left))
        if len({c[:2] for c in checked}) != len(checked):
            raise ConfigError("a node is named twice in one request")
        out = []
        for tree, node, rows, go_left in checked:
            self._trees[tree].split.add(node)
            known = self.view.trees[tree].nodes
            known[2 * node + 1], known[2 * node + 2] = rows[go_left], rows[~go_left]
            self._splits[(tree, node)] = self._lowest(rows, go_left)
            out.append(rows[go_left])
        return out

    def _lowest(self, rows: np.ndarray, go_left: np.ndarray) -> tuple[int, int]:
        """The lowest (feature, bin) that divides ``rows`` as ``go_left`` does."""
        bins = self._opened_bins()
        left, right = bins[rows[go_left]], bins[rows[~go_left]]
        top, bottom = left.max(axis=0), right.min(axis=0)
        feature = int(np.flatnonzero(top < bottom)[0])
        return feature, int(top[feature])

    def route(self, keys: Sequence[tuple[int, int]], rows: np.ndarray) -> np.ndarray:
        """Go-left bits ``(len(rows), len(keys))`` of this party's splits ``keys`` for ``rows``."""
        rows = self._check_rows(rows, sorted_unique=False)
        self.view.n_route_queries += 1
        return self._bits(keys, self._opened_bins()[rows])

    def route_features(self, keys: Sequence[tuple[int, int]], features: np.ndarray) -> np.ndarray:
        """Like :meth:`route` for new rows of this party's columns (in-process prediction)."""
        return self._bits(keys, apply_bins(np.asarray(features, dtype=np.float64), self._edges))

    def op_counts(self) -> dict[str, int]:
        return self._context.counts.as_dict() if self._context is not None else {}

    # ------------------------------------------------------------------ helpers
    def _bits(self, keys: Sequence[tuple[int, int]], bins: np.ndarray) -> np.ndarray:
        out = np.zeros((bins.shape[0], len(keys)), dtype=bool)
        for c, key in enumerate(keys):
            key = (int(key[0]), int(key[1]))
            if key not in self._splits:
                raise ConfigError(f"this party holds no split {key}")
            feature, k = self._splits[key]
            out[:, c] = bins[:, feature] <= k
        return out

    def _opened_bins(self) -> np.ndarray:
        """Every row's bin of every feature under this session's cut points."""
        if self._bins is None:
            raise ConfigError("open_session must come before split and route queries")
        return self._bins

    def _check_rows(self, rows: np.ndarray, sorted_unique: bool = True) -> np.ndarray:
        r = np.asarray(rows)
        if r.ndim != 1 or r.size == 0 or not np.issubdtype(r.dtype, np.integer):
            raise ConfigError(f"rows must be a non-empty 1-D array of row ids, got {r.dtype} shape {r.shape}")
        if r.min() < 0 or r.max() >= self.n_rows:
            raise ConfigError(f"row ids must lie in [0, {self.n_rows}), got [{r.min()}, {r.max()}]")
        if sorted_unique and np.any(np.diff(r) <= 0):
            raise ConfigError("row ids of a node must be sorted and unique")
        return r.astype(np.int64)
