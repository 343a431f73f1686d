"""SecureBoostClassifier: encrypted = plaintext trees, the protocol's structure, defences, errors."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.base import clone

from raytune_fed.crypto import OpTimes
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost import PassiveWorker, SecureBoostClassifier

TIMES = OpTimes(encryption=0.005, decryption=0.002, addition=0.0003, product=0.0006)


def _data(n=600, d=8, n_classes=2, seed=0):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=d, n_informative=d, n_redundant=0, n_classes=n_classes,
                               n_clusters_per_class=1, random_state=seed)
    return X, y


def _model(**kw):
    return SecureBoostClassifier(**{"n_federated_trees": 3, "max_depth": 3, "op_times": TIMES, "he": "plain", **kw})


def _same_trees(a, b):
    assert len(a.trees_) == len(b.trees_)
    for s, t in zip(a.trees_, b.trees_):
        assert np.array_equal(s.owner, t.owner) and np.array_equal(s.mask, t.mask)
        assert np.array_equal(s.value, t.value) and np.array_equal(s.shared, t.shared)


def test_encrypted_and_plaintext_training_grow_the_same_trees():
    X, y = _data()
    plain = _model(he="plain", subsample=0.8, n_local_trees=1).fit(X, y)
    bfv = _model(he="bfv", subsample=0.8, n_local_trees=1).fit(X, y)
    _same_trees(plain, bfv)
    assert plain.op_counts_ == bfv.op_counts_ and plain.op_counts_["products"] > 0
    assert plain.training_cost_ == pytest.approx(bfv.training_cost_)
    np.testing.assert_array_equal(plain.predict_proba(X), bfv.predict_proba(X))
    # the passive party owns some splits, so its features matter
    assert any((t.owner > 0).any() for t in bfv.trees_)


def test_fixed_point_training_matches_a_float_histogram_gbdt_up_to_rounding():
    X, y = _data(seed=3)
    model = _model(n_federated_trees=4, max_depth=2).fit(X, y)
    from raytune_fed.models.secureboost import _loss

    # the same boosting in float64, splits taken from the fitted trees: leaf values agree
    raw = np.tile(model.init_score_, (len(y), 1))
    leaves = model.apply(X)
    for c, tree in enumerate(model.trees_):
        g, h = _loss.gradients(raw, y, 2)
        for leaf in np.unique(leaves[:, c]):
            rows = leaves[:, c] == leaf
            want = -0.3 * g[rows, 0].sum() / (h[rows, 0].sum() + 0.1)
            assert tree.value[leaf] == pytest.approx(want, abs=1e-3)
        raw[:, 0] += tree.value[leaves[:, c]]


def test_binary_model_is_accurate_and_a_sklearn_classifier():
    from raytune_fed.metrics import auc

    X, y = _data(n=900)
    model = clone(_model(n_federated_trees=10, learning_rate=0.3)).fit(X[:600], y[:600])
    proba = model.predict_proba(X[600:])
    assert proba.shape == (300, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert auc(y[600:], proba[:, 1]) > 0.85
    assert set(model.predict(X[600:])) <= set(model.classes_)


def test_multiclass_grows_one_tree_per_class_per_round():
    X, y = _data(n=900, n_classes=3)
    model = _model(n_federated_trees=4, n_local_trees=1).fit(X, y)
    assert len(model.trees_) == 5 * 3 and model.n_outputs_ == 3
    assert [t.output for t in model.trees_[:6]] == [0, 1, 2, 0, 1, 2]
    assert model.federated_tree_indices() == list(range(3, 15))
    assert np.mean(model.predict(X) == y) > 0.8


class _Spy:
    """Records the queries a real passive worker receives (for structural checks)."""

    def __init__(self, worker):
        self.worker, self.levels, self.split_requests = worker, [], []

    def __getattr__(self, name):
        return getattr(self.worker, name)

    def histograms(self, queries):
        self.levels.append([(q.tree, q.node, q.direct) for q in queries])
        return self.worker.histograms(queries)

    def splits(self, picks):
        self.split_requests.append([(tree, node) for tree, node, _ in picks])
        return self.worker.splits(picks)


def test_histogram_subtraction_computes_the_smaller_sibling_only():
    X, y = _data()
    spy = _Spy(PassiveWorker(X[:, 4:]))
    model = _model(n_federated_trees=1, max_depth=3, purity_threshold=1.0)
    model.fit(X[:, :4], y, passive=[spy], rows=np.arange(len(y)))
    root, level1, level2 = spy.levels
    assert root == [(0, 0, True)]
    assert sorted(direct for _, _, direct in level1) == [False, True]
    sizes = {n: rows.size for n, rows in spy.worker.view.trees[0].nodes.items()}
    direct = [n for _, n, d in level1 if d][0]
    assert sizes[direct] <= sizes[3 - direct]  # nodes 1 and 2: the direct one is the smaller
    assert sum(d for _, _, d in level2) == len(level2) // 2


def test_a_passive_party_applies_the_splits_it_won_at_a_level_in_one_request():
    X, y = _data(n=800)
    spy = _Spy(PassiveWorker(X[:, 4:]))
    model = _model(n_federated_trees=3, max_depth=4, purity_threshold=1.0)
    model.fit(X[:, :4], y, passive=[spy], rows=np.arange(len(y)))
    assert spy.split_requests, "the passive party must win some splits"
    levels = [{(tree, int(np.log2(node + 1))) for tree, node in request} for request in spy.split_requests]
    assert all(len(level) == 1 for level in levels)  # one tree and level per request (binary: a tree per round)
    assert len({next(iter(level)) for level in levels}) == len(levels)  # and one request per tree and level
    assert max(len(request) for request in spy.split_requests) > 1
    owned = {(t.index, n) for t in model.trees_ for n in np.flatnonzero(t.owner > 0)}
    assert owned == {key for request in spy.split_requests for key in request}


def test_the_trees_of_a_multiclass_round_share_each_levels_requests():
    X, y = _data(n=900, n_classes=3, seed=2)
    spy = _Spy(PassiveWorker(X[:, 4:]))
    model = _model(n_federated_trees=2, max_depth=3, purity_threshold=1.0, subsample=0.7)
    model.fit(X[:, :4], y, passive=[spy], rows=np.arange(len(y)))
    # 2 rounds x 3 levels, each request holding the level of all 3 trees of its round
    assert len(spy.levels) == 6
    for r, level in enumerate(spy.levels):
        assert {tree for tree, _, _ in level} == {3 * (r // 3), 3 * (r // 3) + 1, 3 * (r // 3) + 2}
    # the same trees as one tree at a time (a grower per tree), and the same passive view
    from raytune_fed.models.secureboost import _grower

    original = _grower.TreeGrower.grow_round
    one_by_one = _Spy(PassiveWorker(X[:, 4:]))
    _grower.TreeGrower.grow_round = lambda self, jobs: [r for j in jobs for r in original(self, [j])]
    try:
        alone = _model(n_federated_trees=2, max_depth=3, purity_threshold=1.0, subsample=0.7)
        alone.fit(X[:, :4], y, passive=[one_by_one], rows=np.arange(len(y)))
    finally:
        _grower.TreeGrower.grow_round = original
    assert len(one_by_one.levels) == 18
    for s, t in zip(model.trees_, alone.trees_):
        for name in ("owner", "mask", "value", "shared"):
            assert np.array_equal(getattr(s, name), getattr(t, name)), name
    ours, theirs = spy.worker.view.partitions(), one_by_one.worker.view.partitions()
    assert [t for t, _ in ours] == [t for t, _ in theirs]
    assert all(len(a) == len(b) and all(np.array_equal(x, z) for x, z in zip(a, b))
               for (_, a), (_, b) in zip(ours, theirs))


def _opened_worker(n=100, n_bins=8, train=None):
    from raytune_fed.crypto import Layout, choose_block, secret_context

    X, _ = _data(n=n)
    worker = PassiveWorker(X[:, 4:])
    keys = secret_context("plain")
    n_masks = worker.open_session(keys.public_context(), n_bins, np.arange(n) if train is None else train)

    def node(tree, node_id, parent, rows=None, sibling=-1):
        from raytune_fed.models.secureboost import NodeQuery

        if rows is None:
            return NodeQuery(node_id, parent, sibling=sibling, tree=tree)
        rows = np.asarray(rows, dtype=np.int64)
        layout = Layout(rows.size, n_masks, choose_block(rows.size, n_masks))
        return NodeQuery(node_id, parent, rows=rows, gh=keys.encrypt(np.ones(rows.size, dtype=np.uint64), layout),
                         block=layout.block, tree=tree)

    return worker, node


def _left_slot(worker, tree, rows):
    """A candidate place whose split divides ``rows`` (the owner reads its own order)."""
    member = worker.members(tree, np.asarray(rows))
    return int(np.flatnonzero(member.any(axis=0) & ~member.all(axis=0))[0])


def test_a_passive_worker_answers_only_what_the_protocol_derives():
    worker, node = _opened_worker(train=np.arange(80))
    refused = [
        ([node(0, 1, 0, np.arange(10))], "tree 0: a new tree starts with its root alone"),
        ([node(0, 0, -1, np.arange(10)), node(0, 1, 0, np.arange(5))], "a new tree starts with its root alone"),
        ([node(0, 0, -1, np.arange(70, 90))], "the root holds rows outside this session's training rows"),
    ]
    for queries, message in refused:
        with pytest.raises(ConfigError, match=message):
            worker.histograms(queries)
    assert not worker.view.trees and worker.histograms([node(0, 0, -1, np.arange(60))])  # a root of training rows
    with pytest.raises(ConfigError, match="tree 0: node 0 was answered before"):
        worker.histograms([node(0, 0, -1, np.arange(60))])  # no second answer of a node
    with pytest.raises(ConfigError, match="tree 0: node 3 is not a child of a node of the tree's last level"):
        worker.histograms([node(0, 3, 1, np.arange(5))])  # fresh node ids deeper in the tree
    with pytest.raises(ConfigError, match="tree 0: node 1 holds rows outside node 0"):
        worker.histograms([node(0, 1, 0, np.arange(55, 65))])
    with pytest.raises(ConfigError, match="node 2 is derived from a sibling not sent with it"):
        worker.histograms([node(0, 2, 0, sibling=1)])
    # splits: a node of the last level, once, by a candidate that divides it; the request is checked whole
    slot = _left_slot(worker, 0, np.arange(60))
    for picks, message in [([(0, 1, slot)], "node 1 is not a node of the tree's last level"),
                           ([(7, 0, slot)], "tree 7: node 0 is not a node of the tree's last level"),
                           ([(0, 0, worker.n_candidates)], "split 28 names no candidate; this party has 28"),
                           ([(0, 0, slot), (0, 0, slot)], "a node is named twice in one request")]:
        with pytest.raises(ConfigError, match=message):
            worker.splits(picks)
    left = worker.splits([(0, 0, slot)])[0]
    with pytest.raises(ConfigError, match="tree 0: node 0 is split already"):
        worker.splits([(0, 0, slot)])
    smaller, larger = (1, 2) if left.size <= 30 else (2, 1)
    answered = worker.histograms([node(0, smaller, 0, worker.view.trees[0].nodes[smaller]),
                                  node(0, larger, 0, sibling=smaller)])
    assert len(answered) == 1 and worker._trees[0].level == {1, 2}
    with pytest.raises(ConfigError, match="tree 0: node 0 is not a node of the tree's last level"):
        worker.splits([(0, 0, slot)])  # the level has moved on


def test_a_split_names_a_place_in_the_trees_secret_order_and_ties_go_to_the_lowest_bin():
    worker, node = _opened_worker(n=200, n_bins=8)
    rows = np.arange(200)
    worker.histograms([node(t, 0, -1, rows) for t in range(3)])
    orders = [worker._trees[t].slot_of for t in range(3)]
    assert not np.array_equal(orders[0], orders[1]) and sorted(orders[0]) == list(range(worker.n_candidates))
    bins = worker._bins
    for t, candidate in enumerate((0, 9, 13)):  # (feature 0, bin <= 0), (1, <= 2), (1, <= 6)
        feature, k = divmod(candidate, 7)
        left = worker.splits([(t, 0, int(orders[t][candidate]))])[0]
        assert np.array_equal(left, rows[bins[:, feature] <= k]) and worker._splits[(t, 0)] == (feature, k)
    # a candidate whose split of the node equals a lower (feature, bin)'s is stored as the lower one
    worker2, node2 = _opened_worker(n=200, n_bins=8)
    sub = np.flatnonzero(worker2._bins[:, 0] != 3)  # bin 3 of feature 0 is empty in this node
    worker2.histograms([node2(0, 0, -1, sub)])
    worker2.splits([(0, 0, int(worker2._trees[0].slot_of[3]))])  # feature 0, bin <= 3: the same as bin <= 2
    assert worker2._splits[(0, 0)] == (0, 2)


class _Liar(_Spy):
    """A passive party whose split answers are not a division of the node it was asked about."""

    def __init__(self, worker, answer):
        super().__init__(worker)
        self.answer = answer

    def splits(self, picks):
        honest = self.worker.splits(picks)
        return [self.answer(rows) for rows in honest]


@pytest.mark.parametrize("answer", [
    lambda rows: np.append(rows, 10_000),          # a row outside the node
    lambda rows: np.concatenate([rows, rows]),     # rows twice
    lambda rows: rows[:0],                         # nothing left
    lambda rows: np.arange(600),                   # every training row
], ids=["outside", "twice", "empty", "everything"])
def test_a_split_answer_that_does_not_divide_the_node_is_refused(answer):
    X, y = _data()
    liar = _Liar(PassiveWorker(X[:, 4:]), answer)
    with pytest.raises(ConfigError,
                       match=r"passive party 1 answered a split of tree 0 node \d+ "
                             r"that does not divide the node's rows"):
        _model(n_federated_trees=1, max_depth=2, purity_threshold=1.0).fit(X[:, :4], y, passive=[liar],
                                                                           rows=np.arange(len(y)))


def test_purity_threshold_keeps_pure_nodes_from_the_passive_party():
    X, y = _data(n=800)
    theta = 0.75
    model = _model(n_federated_trees=3, max_depth=4, purity_threshold=theta).fit(X, y)
    view = model.passive_views_[0]
    assert view.trees, "some nodes must still be shared"
    for tree in model.trees_:
        known = view.trees.get(tree.index)
        for node, rows in (known.nodes.items() if known else ()):
            parent = (node - 1) // 2
            owned_by_passive = node > 0 and tree.owner[parent] > 0
            if not owned_by_passive:  # a node it was sent (or derived): below the threshold
                share = np.bincount(y[rows]).max() / rows.size
                assert share < theta
    # a threshold at or below the root's purity keeps every tree local
    local = _model(purity_threshold=0.3).fit(X, y)
    assert local.passive_views_[0].trees == {} and local.op_counts_["products"] == 0


def test_local_trees_are_never_shown_to_the_passive_party():
    X, y = _data()
    model = _model(n_federated_trees=2, n_local_trees=3).fit(X, y)
    assert sorted(model.passive_views_[0].trees) == [3, 4]
    assert [t.federated for t in model.trees_] == [False] * 3 + [True] * 2
    assert all((t.owner[t.owner >= 0] <= 0).all() for t in model.trees_[:3])


@pytest.mark.parametrize("params, message", [
    ({"max_depth": 0}, r"max_depth must be an integer in \[1, 12\], got 0"),
    ({"subsample": 1.5}, r"subsample must be in \(0, 1\], got 1.5"),
    ({"purity_threshold": 0.0}, r"purity_threshold must be in \(0, 1\], got 0.0"),
    ({"purity_threshold": 1.2}, r"purity_threshold must be in \(0, 1\], got 1.2"),
    ({"n_federated_trees": 0}, r"n_federated_trees must be an integer >= 1, got 0"),
    ({"n_local_trees": -1}, r"n_local_trees must be an integer >= 0, got -1"),
    ({"he": "paillier"}, r"unknown HE scheme 'paillier'; known: \['bfv', 'plain'\]"),
    ({"learning_rate": 0}, r"learning_rate must be in \(0, 1\], got 0"),
    ({"n_bins": 1}, r"n_bins must be an integer in \[2, 256\], got 1"),
    ({"min_child_weight": 0.0}, "min_child_weight must be > 0"),
    ({"max_block": 100}, "max_block must be a power of two, got 100"),
    ({"passive_features": [0, 1, 2, 3, 4, 5, 6, 7]}, "must leave the active party >= 1 column"),
    ({"passive_features": [[1, 2], [2, 3]]}, "must be distinct columns"),
    ({"op_times": "fast"}, "op_times must be None"),
    ({"random_state": None}, "random_state must be a non-negative int"),
])
def test_bad_parameters_fail_with_one_line(params, message):
    X, y = _data(n=60)
    with pytest.raises(ConfigError, match=message):
        _model(**params).fit(X, y)


def test_mismatched_rows_of_remote_parties_are_refused():
    X, y = _data(n=60)
    worker = PassiveWorker(X[:50, 4:])
    with pytest.raises(ConfigError, match=r"row ids must lie in \[0, 50\), got \[0, 59\]"):
        _model().fit(X[:, :4], y, passive=[worker], rows=np.arange(60))
    with pytest.raises(ConfigError, match="rows must be 60 sorted distinct ids, one per row of X, got 59"):
        _model().fit(X[:, :4], y, passive=[worker], rows=np.arange(59))


@pytest.mark.process
def test_the_same_seed_gives_the_same_model_in_another_process():
    code = ("import numpy as np\n"
            "from sklearn.datasets import make_classification\n"
            "from raytune_fed.models.secureboost import SecureBoostClassifier\n"
            "X, y = make_classification(n_samples=600, n_features=8, n_informative=8, n_redundant=0,"
            " n_clusters_per_class=1, random_state=0)\n"
            "m = SecureBoostClassifier(n_federated_trees=3, max_depth=3, subsample=0.7, he='plain',"
            " op_times=dict(encryption=1, decryption=1, addition=1, product=1), random_state=5).fit(X, y)\n"
            "print(repr(float(m.decision_function(X).sum())), m.op_counts_['products'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    X, y = _data()
    here = SecureBoostClassifier(n_federated_trees=3, max_depth=3, subsample=0.7, he="plain",
                                 op_times=dict(encryption=1, decryption=1, addition=1, product=1),
                                 random_state=5).fit(X, y)
    assert out == [repr(float(here.decision_function(X).sum())), str(here.op_counts_["products"])]
