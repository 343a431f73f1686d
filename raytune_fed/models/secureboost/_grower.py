"""Growing trees: Algorithm 1 (split finding with passive parties) inside Algorithm 4.

Level by level, the trees of one boosting round together.  Every node to split gets the
active party's plaintext histogram; a node *shared* with the passive parties also gets
each passive party's encrypted histogram: the active party encrypts the node's packed
gradients (node-compact: only the node's rows), the passive party sums them over the left
side of each of its candidate splits (in an order only it knows), the active party
decrypts and names the winning candidate by its place.  Of two sibling nodes
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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from raytune_fed.crypto import Ciphertexts, GHCodec, Layout, SecretContext
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost._protocol import NodeQuery, PassiveEndpoint
from raytune_fed.models.secureboost._split import Candidate, SplitRule, best_left_split, best_split, leaf_value, purity
from raytune_fed.models.secureboost._tree import ACTIVE, Tree
from raytune_fed.models.secureboost._view import positions_in, without


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


@dataclass
class TreeJob:
    """One tree to grow: its index and output, sample positions, quantised gradients, whether federated."""

    index: int
    output: int
    sample: np.ndarray
    gq: np.ndarray
    hq: np.ndarray
    federated: bool


@dataclass(eq=False)
class _Growing:
    """A tree being grown: its current level and the nodes split at the level before."""

    job: TreeJob
    tree: Tree
    leaf_of: np.ndarray
    level: list[_Node]
    parents: dict[int, _Node] = field(default_factory=dict)
    todo: list[_Node] = field(default_factory=list)


class TreeGrower:
    """Grows the trees of one training over one :class:`Session`.

    The trees of one boosting round (one per class for multi-class, Algorithm 4) depend only
    on the round's gradients, so :meth:`grow_round` grows them together, level by level: a
    passive party gets one histogram request and one split request per level for all of
    them, not one per tree and node.
    """

    def __init__(self, session: Session) -> None:
        self.s = session

    def grow(self, index: int, output: int, sample: np.ndarray, gq: np.ndarray, hq: np.ndarray,
             federated: bool) -> tuple[Tree, np.ndarray]:
        """One tree on the sorted training positions ``sample``; returns it and each training row's leaf."""
        return self.grow_round([TreeJob(index, output, sample, gq, hq, federated)])[0]

    def grow_round(self, jobs: Sequence[TreeJob]) -> list[tuple[Tree, np.ndarray]]:
        """The trees of ``jobs`` (distinct indices), grown level by level together; each with its rows' leaves."""
        s = self.s
        if len({j.index for j in jobs}) != len(jobs):
            raise ConfigError("the trees grown together need distinct indices")
        growing = []
        for j in jobs:
            shared = j.federated and bool(s.endpoints) and purity(s.labels[j.sample], s.n_classes) < s.purity_threshold
            root = _Node(0, j.sample, int(j.gq[j.sample].sum()), int(j.hq[j.sample].sum()), shared)
            growing.append(_Growing(j, Tree.empty(j.index, j.output, s.max_depth, j.federated),
                                    np.zeros(s.labels.size, dtype=np.int64), [root]))
        for depth in range(s.max_depth + 1):
            for g in growing:
                g.todo = []
                for n in g.level:
                    if depth < s.max_depth and n.pos.size >= 2:
                        g.todo.append(n)
                    else:
                        self._leaf(g.tree, n, g.leaf_of)
                g.level = []
            active = [g for g in growing if g.todo]
            if not active:
                break
            self._histograms(active)
            for g, kids_of in zip(active, self._split_level(active)):
                for n, kids in zip(g.todo, kids_of):
                    if kids is None:
                        self._leaf(g.tree, n, g.leaf_of)
                    else:
                        g.level.extend(kids)
                g.parents = {n.id: n for n in g.todo}
        return [(g.tree, g.leaf_of) for g in growing]

    # ------------------------------------------------------------------ steps
    def _leaf(self, tree: Tree, n: _Node, leaf_of: np.ndarray) -> None:
        tree.set_leaf(n.id, leaf_value(n.g, n.h, self.s.rule, self.s.learning_rate), n.shared)
        leaf_of[n.pos] = n.id

    def _histograms(self, growing: list[_Growing]) -> None:
        s = self.s
        for g in growing:
            derived = _plan(g.todo, g.parents, ACTIVE)
            for n in g.todo:
                if n.id not in derived:
                    n.hist[ACTIVE] = _active_hist(s, n.pos, g.job.gq, g.job.hq)
            self._subtract(g.todo, g.parents, derived, ACTIVE)
        shared = [(g, [n for n in g.todo if n.shared]) for g in growing]
        shared = [(g, nodes) for g, nodes in shared if nodes]
        if not shared:
            return
        sealed: dict[tuple[int, int], tuple[Ciphertexts, int]] = {}  # the same ciphertexts serve every passive party
        for party, endpoint in enumerate(s.endpoints, start=1):
            queries, direct, plans = [], [], []
            for g, nodes in shared:
                derived = _plan(nodes, g.parents, party)
                plans.append(derived)
                index = g.job.index
                for n in nodes:
                    parent = (n.id - 1) // 2 if n.id else -1
                    if n.id in derived:
                        queries.append(NodeQuery(n.id, parent, sibling=derived[n.id], tree=index))
                        continue
                    key = (index, n.id)
                    if key not in sealed:
                        layout = Layout.for_node(n.pos.size, max(s.passive_masks), s.max_block)
                        sealed[key] = (s.keys.encrypt(s.codec.pack(g.job.gq[n.pos], g.job.hq[n.pos]), layout),
                                       layout.block)
                    gh, block = sealed[key]
                    queries.append(NodeQuery(n.id, parent, rows=s.row_ids[n.pos], gh=gh, block=block, tree=index))
                    direct.append((key, n))
            replies = list(endpoint.histograms(queries))
            if len(replies) != len(direct):
                raise ConfigError(f"passive party {party} answered {len(replies)} histograms for {len(direct)} asked")
            for ((index, node_id), n), reply in zip(direct, replies):
                layout = Layout(n.pos.size, s.passive_masks[party - 1], sealed[(index, node_id)][1])
                n.hist[party] = s.codec.unpack_sums(s.keys.decrypt_sums(reply, layout))
            for (g, nodes), derived in zip(shared, plans):
                self._subtract(nodes, g.parents, derived, party)

    @staticmethod
    def _subtract(nodes: list[_Node], parents: dict[int, _Node], derived: dict[int, int], party: int) -> None:
        ids = {n.id: n for n in nodes}
        for node_id, sib_id in derived.items():
            pg, ph = parents[(node_id - 1) // 2].hist[party]
            sg, sh = ids[sib_id].hist[party]
            ids[node_id].hist[party] = (pg - sg, ph - sh)

    def _split_level(self, growing: list[_Growing]) -> list[list[list[_Node] | None]]:
        """Per tree, each node's children under its best split over every party's histograms (``None``: a leaf).

        A passive party applies the splits it won at this level, in every tree, in one request."""
        s = self.s
        bests: list[list[Candidate | None]] = []
        for g in growing:
            row = []
            for n in g.todo:
                best: Candidate | None = None
                for party, (hg, hh) in sorted(n.hist.items()):
                    cand = best_split(hg, hh, s.n_bins, n.g, n.h, s.rule, party) if party == ACTIVE else \
                        best_left_split(hg, hh, n.g, n.h, s.rule, party)
                    if cand is not None and (best is None or cand.gain > best.gain):
                        best = cand
                row.append(best)
            bests.append(row)
        lefts: dict[tuple[int, int], np.ndarray] = {}
        parties = {b.party for row in bests for b in row if b is not None and b.party != ACTIVE}
        for party in sorted(parties):
            won = [(g.job.index, n, b) for g, row in zip(growing, bests) for n, b in zip(g.todo, row)
                   if b is not None and b.party == party]
            answers = s.endpoints[party - 1].splits([(index, n.id, b.mask) for index, n, b in won])
            if len(answers) != len(won):
                raise ConfigError(f"passive party {party} answered {len(answers)} splits for {len(won)} asked")
            for (index, n, _), left_ids in zip(won, answers):
                at = positions_in(s.row_ids[n.pos], np.asarray(left_ids, dtype=np.int64))
                if at is None or at.size == 0 or at.size == n.pos.size or np.any(np.diff(at) <= 0):
                    raise ConfigError(f"passive party {party} answered a split of tree {index} node {n.id} that "
                                      f"does not divide the node's rows")
                lefts[(index, n.id)] = at
        return [[None if best is None else self._children(g, n, best, lefts.get((g.job.index, n.id)))
                 for n, best in zip(g.todo, row)] for g, row in zip(growing, bests)]

    def _children(self, g: _Growing, n: _Node, best: Candidate, left_at: np.ndarray | None) -> list[_Node]:
        s, tree, gq, hq = self.s, g.tree, g.job.gq, g.job.hq
        if best.party == ACTIVE:
            feature, k = divmod(best.mask, s.n_bins)
            go_left = s.active_ids[n.pos, feature] - feature * s.n_bins <= k
            left, right = n.pos[go_left], n.pos[~go_left]
            tree.set_split(n.id, ACTIVE, best.mask, n.shared)
        else:  # ``left_at``: positions in ``n.pos`` of the rows the passive party sent left
            if left_at is None:  # _split_level asked the winner for every passive split; None is a bug
                raise RuntimeError(f"no answer from passive party {best.party} for node {n.id}")
            left, right = n.pos[left_at], without(n.pos, left_at)
            tree.set_split(n.id, best.party, -1, n.shared)
        shared = n.shared and max(purity(s.labels[left], s.n_classes),
                                  purity(s.labels[right], s.n_classes)) < s.purity_threshold
        return [_Node(2 * n.id + 1, left, int(gq[left].sum()), int(hq[left].sum()), shared),
                _Node(2 * n.id + 2, right, int(gq[right].sum()), int(hq[right].sum()), shared)]
