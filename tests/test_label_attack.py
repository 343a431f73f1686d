"""Instance clustering attack and mutual information, from the passive party's view only."""

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from raytune_fed.attacks import (
    balanced_sample,
    cluster_and_label,
    component_clusters,
    cooccurrence,
    leaf_mutual_information,
    partition_mutual_information,
    privacy_leakage,
    spectral_clusters,
)
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost import PassiveView

TIMES = dict(encryption=0.005, decryption=0.002, addition=0.0003, product=0.0006)


def test_cooccurrence_marks_pairs_in_the_same_cell():
    sample = np.array([1, 3, 5, 7])
    S = cooccurrence([np.array([1, 5, 9]), np.array([3])], sample)
    want = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]])
    assert np.array_equal(S, want)


def test_balanced_sample_takes_equal_shares_of_each_class():
    labels = np.array([0] * 70 + [1] * 30 + [2] * 100)
    rows = np.arange(200) * 2
    s = balanced_sample(labels, rows, 90, seed=0)
    assert np.all(np.diff(s) > 0) and set(s) <= set(rows)
    assert np.bincount(labels[s // 2]).tolist() == [30, 30, 30]
    assert np.bincount(labels[balanced_sample(labels, rows, 150, seed=0) // 2]).tolist() == [50, 30, 50]


def test_clusters_are_named_by_the_labels_of_known_members():
    truth = np.array([1] * 30 + [0] * 30)
    blocks = (truth[:, None] == truth[None, :]).astype(float)
    predicted = cluster_and_label(blocks + np.eye(60), truth, 2, known_per_cluster=1, seed=0)
    assert np.array_equal(predicted, truth)


def _disconnected_affinity(n_components: int, n: int, seed: int) -> np.ndarray:
    """Co-occurrence shares of ``n`` rows over a few partitions that leave ``n_components`` groups apart."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, n_components, n)
    sim = np.zeros((n, n))
    for _ in range(3):
        cell = group * 4 + rng.integers(0, 4, n)  # cells never cross a group
        sim += cell[:, None] == cell[None, :]
    return sim / 3 + np.eye(n), group


def test_spectral_clusters_repeat_on_a_graph_in_many_pieces():
    """Few trees leave the affinity graph in many components: the Laplacian's eigenvalue 0 repeats and ARPACK
    (scikit-learn's solver) returned another basis of its eigenspace on each call with the same matrix and start
    vector, so one view gave several eps_p.  The dense solver gives one answer."""
    affinity, _ = _disconnected_affinity(30, 200, seed=1)
    first = spectral_clusters(affinity, 2)
    assert all(np.array_equal(first, spectral_clusters(affinity.copy(), 2)) for _ in range(10))
    truth = np.arange(200) % 2
    labelled = [cluster_and_label(affinity, truth, 2, 1, seed=3) for _ in range(5)]
    assert all(np.array_equal(labelled[0], p) for p in labelled)


def test_spectral_clusters_split_a_graph_of_as_many_components_as_clusters_into_them():
    affinity, group = _disconnected_affinity(3, 150, seed=2)
    labels = spectral_clusters(affinity, 3)
    assert len({(g, c) for g, c in zip(group, labels)}) == 3  # each component is one cluster
    lonely = np.ones((50, 50))  # one row apart from the rest: ARPACK put it with the others
    lonely[0, 1:] = lonely[1:, 0] = 0.0
    labels = spectral_clusters(lonely, 2)
    assert labels[0] != labels[1] and len(set(labels[1:])) == 1


def test_more_components_than_clusters_are_packed_whole_and_balanced_largest_first():
    """The eigenvalue 0 repeats more often than there are clusters, so LAPACK's choice of eigenvectors (the CPU's
    BLAS kernel) decided the clusters; whole components are packed by exact rules instead."""
    # components: {0,1,2,3,4} (5 rows), {5,6,7} (3), {8,9} (2), {10} and {11} (singletons)
    component = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 4])
    assert component_clusters(component, 2).tolist() == [0] * 5 + [1] * 3 + [1] * 2 + [0] + [1]
    # equal sizes: the component holding the lowest row goes first
    assert component_clusters(np.array([1, 1, 0, 0, 2]), 2).tolist() == [0, 0, 1, 1, 0]
    affinity, _ = _disconnected_affinity(30, 200, seed=1)
    _, component = connected_components(affinity > 0, directed=False)
    labels = spectral_clusters(affinity, 2)
    assert len({(g, c) for g, c in zip(component, labels)}) == component.max() + 1  # no component is split
    assert np.bincount(labels).max() - np.bincount(labels).min() <= np.bincount(component).max()


def test_partitions_the_party_can_infer_include_complements():
    view = PassiveView()
    tree = view.tree(0)
    tree.nodes[0] = np.arange(10)
    tree.nodes[1] = np.arange(4)           # sent to it
    tree.nodes[4] = np.array([2, 3])       # a grandchild (its own split, say)
    cells = [c.tolist() for c in tree.cells()]
    assert sorted(cells) == [[0, 1], [2, 3], [4, 5, 6, 7, 8, 9]]


def test_nothing_seen_means_guessing():
    labels = np.array([0, 1, 2] * 20)
    leak = privacy_leakage(PassiveView(), labels, n_sample=30)
    assert leak.value == pytest.approx(1 / 3) and leak.per_round == ()
    with pytest.raises(ConfigError, match="labels and rows must be 1-D of equal length"):
        privacy_leakage(PassiveView(), labels, rows=np.arange(5))
    with pytest.raises(ConfigError, match="known_per_cluster must be an integer >= 1"):
        privacy_leakage(PassiveView(), labels, known_per_cluster=0)


def test_mutual_information_of_pure_and_mixed_partitions():
    labels = np.array([0] * 50 + [1] * 50)
    pure = [np.arange(50), np.arange(50, 100)]
    assert partition_mutual_information(pure, labels) == pytest.approx(np.log(2))
    assert partition_mutual_information([np.arange(100)], labels) == pytest.approx(0.0)
    leaves = np.column_stack([np.repeat([1, 2], 50), np.tile([1, 2], 50)])
    assert np.allclose(leaf_mutual_information(leaves, labels), [np.log(2), 0.0])


def test_attack_leaks_labels_of_an_undefended_model_and_each_defence_lowers_it():
    from raytune_fed.workflows.cmosb import evaluate, load_task

    task = load_task("synthetic1")
    base = dict(max_depth=7, learning_rate=0.1, subsample=0.8, purity_threshold=1.0)
    def leak(**kw):
        return evaluate(task, {**base, **kw}, op_times=TIMES, seed=0, n_sample=500).privacy_leakage

    undefended = leak(n_federated_trees=20, n_local_trees=0)
    assert undefended >= 0.7  # the paper: up to 84 %
    assert leak(n_federated_trees=10, n_local_trees=10) <= undefended - 0.05
    assert leak(n_federated_trees=20, n_local_trees=0, purity_threshold=0.7) <= undefended - 0.05
