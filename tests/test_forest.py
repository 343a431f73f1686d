"""ProbabilityForest: ranger's rules on known trees, against a slow reference, its node arrays."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.utils.estimator_checks import check_estimator

from raytune_fed.errors import ConfigError
from raytune_fed.models import (
    FOREST_ARRAY_SPECS,
    ProbabilityForest,
    check_allowed_model,
    check_forest_arrays,
    get_learner,
    predict_proba_from_arrays,
)
from raytune_fed.random import as_seed_sequence

# --------------------------------------------------------------------------- a slow reference
# Written from ranger's description (TreeProbability: node terminal at <= min.node.size
# draws or when pure; Gini score sum l^2/nl + sum r^2/nr over midpoints of adjacent
# distinct values; first strict maximum) with the forest's random stream (splitmix64).

_MASK = (1 << 64) - 1


class _Stream:
    def __init__(self, seed: int) -> None:
        self.state = seed

    def below(self, n: int) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        z ^= z >> 31
        return min(int(float(z >> 11) * (1.0 / 2 ** 53) * n), n - 1)


def _reference_tree(X, codes, n_classes, stream, features, *, mtry, min_node_size, n_draws, replace):
    n_rows, n_features = X.shape
    if replace:
        draws = [stream.below(n_rows) for _ in range(n_draws)]
    else:
        perm = list(range(n_rows))
        for i in range(n_draws):
            j = i + stream.below(n_rows - i)
            perm[i], perm[j] = perm[j], perm[i]
        draws = perm[:n_draws]
    nodes = [draws]  # draws per node, in creation order
    out = []  # (feature, threshold, left, right, value)
    for rows in nodes:
        counts = np.bincount(codes[rows], minlength=n_classes)
        best, split = -1.0, None
        if len(rows) > min_node_size and np.count_nonzero(counts) > 1:
            for i in range(mtry):
                j = i + stream.below(n_features - i)
                features[i], features[j] = features[j], features[i]
            for f in features[:mtry]:
                values = sorted(set(X[rows, f]))
                for low, high in zip(values[:-1], values[1:]):
                    left = [r for r in rows if X[r, f] <= low]
                    lc = np.bincount(codes[left], minlength=n_classes)
                    rc = counts - lc
                    score = float(np.sum(rc * rc)) / (len(rows) - len(left)) + float(np.sum(lc * lc)) / len(left)
                    if score > best:
                        middle = (low + high) / 2.0
                        best, split = score, (f, low if middle == high else middle)
        if split is None:
            out.append((-1, 0.0, -1, -1, counts / len(rows)))
        else:
            f, threshold = split
            out.append((f, threshold, len(nodes), len(nodes) + 1, np.zeros(n_classes)))
            nodes.append([r for r in rows if X[r, f] <= threshold])
            nodes.append([r for r in rows if X[r, f] > threshold])
    return out


def _reference_forest(X, y, *, num_trees, mtry, min_node_size, sample_fraction, replace, seed):
    classes, codes = np.unique(y, return_inverse=True)
    n_draws = max(1, int(np.floor(X.shape[0] * sample_fraction)))
    features = list(range(X.shape[1]))
    trees = []
    for tree_seed in as_seed_sequence(seed).generate_state(num_trees, dtype=np.uint64):
        trees.append(_reference_tree(X, codes, len(classes), _Stream(int(tree_seed)), features, mtry=mtry,
                                     min_node_size=min_node_size, n_draws=n_draws, replace=replace))
    return trees


def _as_reference(trees_):
    offsets = trees_["node_offsets"]
    return [[(int(trees_["feature"][i]), float(trees_["threshold"][i]), int(trees_["left"][i]),
              int(trees_["right"][i]), trees_["value"][i]) for i in range(offsets[t], offsets[t + 1])]
            for t in range(len(offsets) - 1)]


# --------------------------------------------------------------------------- known trees

def _forest(**params):
    return ProbabilityForest(**{"num_trees": 1, "min_node_size": 1, "sample_fraction": 1.0, "replace": False,
                                "seed": 0, **params})


def test_a_separable_column_gives_one_split_at_the_midpoint():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    trees = _forest().fit(X, [0, 0, 1, 1]).trees_
    np.testing.assert_array_equal(trees["node_offsets"], [0, 3])
    np.testing.assert_array_equal(trees["feature"], [0, -1, -1])
    np.testing.assert_array_equal(trees["threshold"], [1.5, 0.0, 0.0])
    np.testing.assert_array_equal(trees["left"], [1, -1, -1])
    np.testing.assert_array_equal(trees["right"], [2, -1, -1])
    np.testing.assert_array_equal(trees["value"], [[0, 0], [1, 0], [0, 1]])
    assert {k: (a.dtype, a.ndim) for k, a in trees.items()} == dict(FOREST_ARRAY_SPECS)


def test_a_midpoint_that_rounds_up_becomes_the_lower_value():
    low, high = 1.0, np.nextafter(1.0, 2.0)
    trees = _forest().fit(np.array([[low], [high]]), [0, 1]).trees_
    assert trees["threshold"][0] == low


@pytest.mark.parametrize("min_node_size, n_nodes", [(4, 1), (3, 3), (1, 7)])
def test_a_node_with_at_most_min_node_size_draws_is_a_leaf(min_node_size, n_nodes):
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    trees = _forest(min_node_size=min_node_size).fit(X, [0, 1, 0, 1]).trees_
    assert len(trees["feature"]) == n_nodes
    if n_nodes == 1:
        np.testing.assert_array_equal(trees["value"], [[0.5, 0.5]])


def test_a_pure_node_and_a_constant_node_are_leaves():
    assert len(_forest().fit(np.arange(6.0)[:, None], [1] * 6).trees_["feature"]) == 1
    # the only column is constant: no candidate, so the root is a leaf holding the class mix
    trees = _forest().fit(np.ones((6, 1)), [0, 0, 0, 1, 1, 1]).trees_
    np.testing.assert_array_equal(trees["value"], [[0.5, 0.5]])


@pytest.mark.parametrize("params", [
    {"num_trees": 6, "mtry": 2, "min_node_size": 1, "sample_fraction": 1.0, "replace": True, "seed": 3},
    {"num_trees": 4, "mtry": 5, "min_node_size": 3, "sample_fraction": 0.7, "replace": True, "seed": 11},
    {"num_trees": 4, "mtry": 1, "min_node_size": 2, "sample_fraction": 0.5, "replace": False, "seed": 5},
    {"num_trees": 3, "mtry": 3, "min_node_size": 1, "sample_fraction": 0.2, "replace": True, "seed": 0},
])
def test_trees_match_the_slow_reference(params):
    """Rounded features give ties and three classes; large and small nodes take both split paths."""
    X, y = make_classification(n_samples=70, n_features=6, n_informative=4, n_redundant=0, n_classes=3,
                               random_state=4)
    X = np.round(X, 1)
    forest = ProbabilityForest(**params).fit(X, y)
    ours = _as_reference(forest.trees_)
    expected = _reference_forest(X, y, **params)
    assert len(ours) == len(expected)
    for t, (a, b) in enumerate(zip(ours, expected)):
        assert [n[:4] for n in a] == [n[:4] for n in b], f"tree {t}"
        np.testing.assert_array_equal(np.array([n[4] for n in a]), np.array([n[4] for n in b]))


def test_probabilities_are_the_mean_of_the_leaf_frequencies():
    X, y = make_classification(n_samples=50, n_features=8, random_state=0)
    forest = ProbabilityForest(num_trees=7, min_node_size=4, seed=2).fit(X, y)
    trees = _as_reference(forest.trees_)
    expected = np.zeros((len(X), 2))
    for tree in trees:
        for i, x in enumerate(X):
            node = 0
            while tree[node][0] >= 0:
                f, threshold, left, right, _ = tree[node]
                node = left if x[f] <= threshold else right
            expected[i] += tree[node][4] / len(trees)
    np.testing.assert_allclose(forest.predict_proba(X), expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(predict_proba_from_arrays(forest.trees_, X), forest.predict_proba(X))
    np.testing.assert_array_equal(forest.predict(X), forest.classes_[np.argmax(expected, axis=1)])


def test_defaults_are_rangers():
    X, y = make_classification(n_samples=40, n_features=50, random_state=0)
    forest = ProbabilityForest().fit(X, y)
    assert (forest.num_trees, forest.min_node_size, forest.sample_fraction, forest.replace) == (500, 10, 1.0, True)
    assert (forest.mtry_, forest.n_draws_) == (7, 40)
    assert ProbabilityForest(sample_fraction=0.01, num_trees=1).fit(X, y).n_draws_ == 1
    assert ProbabilityForest(mtry=80, num_trees=1).fit(X, y).mtry_ == 50


# --------------------------------------------------------------------------- seeds

_CHILD = """
import hashlib, sys, numpy as np
from sklearn.datasets import make_classification
from raytune_fed.models import ProbabilityForest
X, y = make_classification(n_samples=60, n_features=40, random_state=1)
trees = ProbabilityForest(num_trees=20, min_node_size=2, sample_fraction=0.6, seed=int(sys.argv[1])).fit(X, y).trees_
print(hashlib.sha256(b"".join(a.tobytes() for a in trees.values())).hexdigest())
"""


def _digest(trees) -> str:
    import hashlib

    return hashlib.sha256(b"".join(a.tobytes() for a in trees.values())).hexdigest()


def test_the_same_seed_gives_the_same_forest_in_another_process():
    X, y = make_classification(n_samples=60, n_features=40, random_state=1)
    here = {s: _digest(ProbabilityForest(num_trees=20, min_node_size=2, sample_fraction=0.6, seed=s).fit(X, y).trees_)
            for s in (7, 8)}
    assert here[7] != here[8]
    there = subprocess.run([sys.executable, "-c", _CHILD, "7"], capture_output=True, text=True, check=True)
    assert there.stdout.strip() == here[7]


# --------------------------------------------------------------------------- node arrays from elsewhere

@pytest.fixture(scope="module")
def fitted():
    X, y = make_classification(n_samples=40, n_features=10, random_state=0)
    return ProbabilityForest(num_trees=5, min_node_size=2, seed=0).fit(X, y), X


def _corrupt(trees, name, fn):
    out = {k: v.copy() for k, v in trees.items()}
    out[name] = fn(out[name])
    return out


def _first_split(trees):
    return int(np.flatnonzero(trees["feature"] >= 0)[0])


CORRUPTIONS = [
    ("missing array", lambda t: {k: v for k, v in t.items() if k != "value"}, r"expected arrays .* got \["),
    ("not a mapping", lambda t: list(t.values()), r"got list"),
    ("float features", lambda t: _corrupt(t, "feature", lambda a: a.astype(np.float64)),
     r"'feature' must be a 1-D int32 array, got float64"),
    ("object values", lambda t: _corrupt(t, "value", lambda a: a.astype(object)), r"'value' must be a 2-D float64"),
    ("short threshold", lambda t: _corrupt(t, "threshold", lambda a: a[:-1]), r"every node array needs"),
    ("offsets past the end", lambda t: _corrupt(t, "node_offsets", lambda a: a + 1),
     r"node_offsets must run from 0 to"),
    ("empty tree", lambda t: _corrupt(t, "node_offsets", lambda a: np.r_[a[:2], a[1:]]),
     r"at least 1 per tree"),
    ("feature out of range", lambda t: _corrupt(t, "feature", lambda a: np.where(a >= 0, 10, a).astype(np.int32)),
     r"split features must be in \[0, 10\)"),
    ("child before parent", lambda t: _corrupt(t, "left", lambda a: np.where(a > 0, 0, a).astype(np.int32)),
     r"child index is not after its parent"),
    ("child outside its tree", lambda t: _corrupt(t, "right", lambda a: np.where(a > 0, 10 ** 6, a).astype(np.int32)),
     r"child index is not after its parent"),
    ("leaf with children", lambda t: _corrupt(t, "left", lambda a: np.where(a < 0, 1, a).astype(np.int32)),
     r"a leaf has children"),
    ("infinite threshold", lambda t: _corrupt(t, "threshold", lambda a: np.where(a != 0, np.inf, a)),
     r"thresholds and values must be finite"),
    ("leaf value not frequencies", lambda t: _corrupt(t, "value", lambda a: a * 2), r"class frequencies"),
]


def test_fitted_arrays_pass_the_check(fitted):
    forest, X = fitted
    checked = check_forest_arrays(forest.trees_, n_features=10, n_classes=2)
    np.testing.assert_array_equal(predict_proba_from_arrays(checked, X), forest.predict_proba(X))


@pytest.mark.parametrize("corrupt, message", [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS])
def test_corrupt_arrays_are_refused(corrupt, message, fitted):
    forest, _ = fitted
    with pytest.raises(ConfigError, match=message):
        check_forest_arrays(corrupt(forest.trees_), n_features=10, n_classes=2)


@pytest.mark.parametrize("name", ["child before parent", "child outside its tree", "feature out of range",
                                  "offsets past the end", "empty tree"])
def test_prediction_refuses_walks_outside_the_arrays(name, fitted):
    """Unchecked arrays cannot make the compiled walk read out of bounds."""
    forest, X = fitted
    corrupt = dict((c[0], c[1]) for c in CORRUPTIONS)[name]
    with pytest.raises(ConfigError, match=r"forest arrays refused"):
        predict_proba_from_arrays(corrupt(forest.trees_), X)


def test_wrong_class_count_is_refused(fitted):
    with pytest.raises(ConfigError, match=r"value needs 3 columns \(one per class\), got 2"):
        check_forest_arrays(fitted[0].trees_, n_features=10, n_classes=3)


# --------------------------------------------------------------------------- parameters, registry, sklearn

@pytest.mark.parametrize("params, message", [
    ({"num_trees": 0}, r"num_trees must be an integer in \[1, inf\], got 0"),
    ({"num_trees": 10.0}, r"num_trees must be an integer .* got 10.0"),
    ({"min_node_size": 0}, r"min_node_size must be an integer in \[1, inf\], got 0"),
    ({"mtry": 0}, r"mtry must be an integer in \[1, inf\], got 0"),
    ({"sample_fraction": 0.0}, r"sample_fraction must be a real number in \(0, 1\], got 0.0"),
    ({"sample_fraction": 1.5}, r"sample_fraction must be a real number in \(0, 1\], got 1.5"),
    ({"replace": "yes"}, r"replace must be True or False, got 'yes'"),
    ({"seed": -1}, r"seed must be a non-negative integer, got -1"),
    ({"seed": None}, r"seed must be a non-negative integer, got None"),
])
def test_bad_parameters(params, message):
    X, y = make_classification(n_samples=20, n_features=4, random_state=0)
    with pytest.raises(ConfigError, match=message):
        ProbabilityForest(**params).fit(X, y)


def test_the_registry_builds_the_forest_with_the_paper_parameters():
    model = get_learner("random_forest").build({"num_trees": 300, "min_node_size": 7, "sample_fraction": 0.5},
                                               seed=11)
    forest = model[-1]
    assert type(forest) is ProbabilityForest
    assert (forest.num_trees, forest.min_node_size, forest.sample_fraction, forest.mtry, forest.replace,
            forest.seed) == (300, 7, 0.5, None, True, 11)
    assert get_learner("random_forest").build({"num_trees": 100, "min_node_size": 1, "sample_fraction": 1.0})[-1].seed \
        == 0
    X, y = make_classification(n_samples=30, n_features=9, random_state=0)
    check_allowed_model(model.set_params(model__num_trees=5).fit(X, y), n_features=9)


def test_scikit_learn_estimator_checks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(ProbabilityForest(num_trees=20, min_node_size=1), on_fail=None)
    unexpected = [(r["check_name"], r["status"], str(r["exception"])[:200]) for r in results
                  if not (r["status"] == "passed"
                          or (r["status"] == "skipped" and r["check_name"] == "check_array_api_input"))]
    assert unexpected == []
    assert sum(r["status"] == "passed" for r in results) >= 50
