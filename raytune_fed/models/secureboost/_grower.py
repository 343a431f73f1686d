"""Growing one tree: Algorithm 1 (split finding with passive parties) inside Algorithm 4.

Level by level.  Every node to split gets the active party's plaintext histogram; a node
*shared* with the passive parties also gets each passive party's encrypted histogram: the
active party encrypts the node's packed gradients (node-compact: only the node's rows),
the passive party sums them per bin, the active party decrypts.  Of two sibling nodes
both to split, only the one with fewer rows is computed; the other is its parent's
histogram minus it (the passive party is told the node is "parent minus sibling").

Purity threshold (the paper's second defence): a node is shared only if its tree is
federated, its parent was shared, and the majority-class share of *both* it and its
sibling is below ``theta_p``.  A node at or above the threshold is split by the active
party alone, and so is its sibling: a passive party that knows a parent and one child
knows the other child too, so hiding a pure node means hiding its sibling.  (Children of
a split the passive party owned are known to it regardless: it computed them.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from raytune_fed.crypto import GHCodec, Layout, SecretContext, choose_block
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost._protocol import NodeQuery, PassiveEndpoint
from raytune_fed.models.secureboost._split import Candidate, SplitRule, best_split, leaf_value, purity
from raytune_fed.models.secureboost._tree import ACTIVE, Tree


@dataclass
class Session:
    """What stays fixed over one training (built by the estimator)."""

    keys: SecretContext
    codec: GHCodec
    rule: SplitRule
    learning_rate: float
    max_depth: int
    purity_threshold: float
    n_bins: int
    active_ids: np.ndarray          # (n_train, n_active_features) mask ids
    labels: np.ndarray              # class codes of the training rows
    n_classes: int
    row_ids: np.ndarray             # global id of each training position (sorted)
    endpoints: Sequence[PassiveEndpoint]
    passive_masks: Sequence[int]
    max_block: int


@dataclass
class _Node:
    id: int
    pos: np.ndarray
    g: int
    h: int
    shared: bool
    hist: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def _active_hist(s: Session, pos: np.ndarray, gq: np.ndarray, hq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = s.active_ids[pos]
    m = ids.shape[1] * s.n_bins
    flat = ids.ravel()
    hg = np.bincount(flat, weights=np.repeat(gq[pos], ids.shape[1]).astype(np.float64), minlength=m)
    hh = np.bincount(flat, weights=np.repeat(hq[pos], ids.shape[1]).astype(np.float64), minlength=m)
    return np.rint(hg).astype(np.int64), np.rint(hh).astype(np.int64)


def _plan(nodes: list[_Node], parents: dict[int, _Node], party: int) -> dict[int, int]:
    """Node id -> sibling id to subtract from the parent, for the larger of two computable siblings."""
    ids = {n.id: n for n in nodes}
    derived = {}
    for n in nodes:
        if n.id == 0 or n.id % 2 == 0:
            continue
        sib = ids.get(n.id + 1)
        parent = parents.get((n.id - 1) // 2)
        if sib is None or parent is None or party not in parent.hist:
            continue
        small, large = (n, sib) if n.pos.size <= sib.pos.size else (sib, n)
        derived[large.id] = small.id
    return derived


class TreeGrower:
    """Grows the trees of one training over one :class:`Session`."""

    def __init__(self, session: Session) -> None:
        self.s = session

    def grow(self, index: int, output: int, sample: np.ndarray, gq: np.ndarray, hq: np.ndarray,
             federated: bool) -> tuple[Tree, np.ndarray]:
        """One tree on the sorted training positions ``sample``; returns it and each sample row's leaf."""
        s = self.s
        tree = Tree(index, output, s.max_depth, federated)
        leaf_of = np.zeros(s.labels.size, dtype=np.int64)
        root = _Node(0, sample, int(gq[sample].sum()), int(hq[sample].sum()),
                     federated and bool(s.endpoints) and purity(s.labels[sample], s.n_classes) < s.purity_threshold)
        level, parents = [root], {}
        for depth in range(s.max_depth + 1):
            todo = [n for n in level if depth < s.max_depth and n.pos.size >= 2]
            for n in level:
                if n not in todo:
                    self._leaf(tree, n, leaf_of)
            if not todo:
                break
            self._histograms(index, todo, parents, gq, hq)
            children = []
            for n, kids in zip(todo, self._split_level(tree, index, todo, gq, hq)):
                if kids is None:
                    self._leaf(tree, n, leaf_of)
                else:
                    children.extend(kids)
            parents = {n.id: n for n in todo}
            level = children
        return tree, leaf_of

    # ------------------------------------------------------------------ steps
    def _leaf(self, tree: Tree, n: _Node, leaf_of: np.ndarray) -> None:
        tree.set_leaf(n.id, leaf_value(n.g, n.h, self.s.rule, self.s.learning_rate), n.shared)
        leaf_of[n.pos] = n.id

    def _histograms(self, index: int, todo: list[_Node], parents: dict[int, _Node], gq: np.ndarray,
                    hq: np.ndarray) -> None:
        s = self.s
        derived = _plan(todo, parents, ACTIVE)
        for n in todo:
            if n.id not in derived:
                n.hist[ACTIVE] = _active_hist(s, n.pos, gq, hq)
        self._subtract(todo, parents, derived, ACTIVE)
        shared = [n for n in todo if n.shared]
        if not shared:
            return
        sealed = {}
        for party, endpoint in enumerate(s.endpoints, start=1):
            derived = _plan(shared, parents, party)
            queries = []
            for n in shared:
                parent = (n.id - 1) // 2 if n.id else -1
                if n.id in derived:
                    queries.append(NodeQuery(n.id, parent, sibling=derived[n.id]))
                    continue
                if n.id not in sealed:  # the same ciphertexts serve every passive party
                    layout = Layout.for_node(n.pos.size, max(s.passive_masks), s.max_block)
                    sealed[n.id] = (s.keys.encrypt(s.codec.pack(gq[n.pos], hq[n.pos]), layout), layout.block)
                gh, block = sealed[n.id]
                queries.append(NodeQuery(n.id, parent, rows=s.row_ids[n.pos], gh=gh, block=block))
            replies = iter(endpoint.histograms(index, queries))
            for n in shared:
                if n.id not in derived:
                    layout = Layout(n.pos.size, s.passive_masks[party - 1], sealed[n.id][1])
                    n.hist[party] = s.codec.unpack_sums(s.keys.decrypt_sums(next(replies), layout))
            self._subtract(shared, parents, derived, party)

    @staticmethod
    def _subtract(nodes: list[_Node], parents: dict[int, _Node], derived: dict[int, int], party: int) -> None:
        ids = {n.id: n for n in nodes}
        for node_id, sib_id in derived.items():
            pg, ph = parents[(node_id - 1) // 2].hist[party]
            sg, sh = ids[sib_id].hist[party]
            ids[node_id].hist[party] = (pg - sg, ph - sh)

    def _split_level(self, tree: Tree, index: int, todo: list[_Node], gq: np.ndarray,
                     hq: np.ndarray) -> list[list[_Node] | None]:
        """Each node's best split over every party's histograms; the children (``None``: a leaf).

        A passive party applies the splits it won at this level in one request."""
        s = self.s
        bests: list[Candidate | None] = []
        for n in todo:
            best: Candidate | None = None
            for party, (hg, hh) in sorted(n.hist.items()):
                cand = best_split(hg, hh, s.n_bins, n.g, n.h, s.rule, party)
                if cand is not None and (best is None or cand.gain > best.gain):
                    best = cand
            bests.append(best)
        lefts: dict[int, np.ndarray] = {}
        for party in sorted({b.party for b in bests if b is not None and b.party != ACTIVE}):
            won = [(n, b) for n, b in zip(todo, bests) if b is not None and b.party == party]
            answers = s.endpoints[party - 1].splits(index, [(n.id, b.mask) for n, b in won])
            if len(answers) != len(won):
                raise ConfigError(f"passive party {party} answered {len(answers)} splits for {len(won)} asked")
            for (n, _), left_ids in zip(won, answers):
                lefts[n.id] = np.searchsorted(s.row_ids, np.asarray(left_ids, dtype=np.int64))
        return [None if best is None else self._children(tree, n, best, lefts.get(n.id), gq, hq)
                for n, best in zip(todo, bests)]

    def _children(self, tree: Tree, n: _Node, best: Candidate, left: np.ndarray | None, gq: np.ndarray,
                  hq: np.ndarray) -> list[_Node]:
        s = self.s
        if best.party == ACTIVE:
            feature, k = divmod(best.mask, s.n_bins)
            go_left = s.active_ids[n.pos, feature] - feature * s.n_bins <= k
            left = n.pos[go_left]
            tree.set_split(n.id, ACTIVE, best.mask, n.shared)
        else:
            tree.set_split(n.id, best.party, -1, n.shared)
        right = np.setdiff1d(n.pos, left)
        shared = n.shared and max(purity(s.labels[left], s.n_classes),
                                  purity(s.labels[right], s.n_classes)) < s.purity_threshold
        return [_Node(2 * n.id + 1, left, int(gq[left].sum()), int(hq[left].sum()), shared),
                _Node(2 * n.id + 2, right, int(gq[right].sum()), int(hq[right].sum()), shared)]
