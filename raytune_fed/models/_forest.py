"""ranger's probability forest, grown in one numba-compiled call.

The RFMS authors tuned R's ``ranger`` with ``predict.type = "prob"``, i.e. a
*probability forest*.  :class:`ProbabilityForest` grows the same model:

* ``num_trees`` trees, each on ``floor(n * sample_fraction)`` rows drawn with replacement
  (``replace=True``, ranger's default) or without;
* at every node ``mtry`` features (default ``floor(sqrt(p))``, at least 1) drawn without
  replacement; for each, every midpoint between adjacent distinct values of the node's
  rows is a candidate, scored by ranger's Gini criterion
  ``sum_k n_left_k^2 / n_left + sum_k n_right_k^2 / n_right`` (counts of in-bag draws, so a
  row drawn twice counts twice); the first strictly best candidate wins (features in draw
  order, values ascending); when the midpoint rounds to the upper value the lower value is
  the threshold; rows with ``x <= threshold`` go left;
* a node is terminal when it holds ``<= min_node_size`` draws, when all its draws have one
  class, or when none of its ``mtry`` features takes two values in it (ranger does not
  draw further features);
* a leaf stores the class frequencies of its draws; the forest's probabilities are their
  mean over trees and the predicted class is the most probable one.

Differences from ranger, all deliberate:

* random stream: each tree has its own splitmix64 stream seeded from
  ``numpy.random.SeedSequence(seed)``; ranger uses one ``std::mt19937_64`` per tree, so
  individual trees differ while their distribution is the same;
* a training set with ``floor(n * sample_fraction) == 0`` draws one row (ranger would grow
  an empty tree);
* ties between equally probable classes go to the first class in ``classes_``; mlr breaks
  them at random;
* no ``min.bucket``, case or class weights, regularisation, unordered factors, importance
  or out-of-bag error (the paper used none of them).

Why not scikit-learn: ``RandomForestClassifier`` pays about 1.2 ms of Python per tree and
fit (a forest of stumps costs as much as one of full trees), counts distinct rows in a node
where ranger counts draws, and keeps drawing features past ``max_features`` until one can
split.  ``experiments/bench_forest.py`` measures both on the paper's search space.

The fitted model is plain numeric arrays (:data:`FOREST_ARRAY_SPECS`, attribute ``trees_``), and
prediction is a pure function of them (:func:`predict_proba_from_arrays`), so a model
record can carry the arrays and a site can rebuild the forest after
:func:`check_forest_arrays`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from raytune_fed.errors import ConfigError
from raytune_fed.models._forest_kernels import _LEAF, grow_forest, predict_proba_kernel, rank_columns
from raytune_fed.random import as_seed_sequence

# name -> (dtype, number of dimensions) of the node arrays of a fitted forest.  N is the
# total node count over all trees, T the number of trees, K the number of classes.
FOREST_ARRAY_SPECS: Mapping[str, tuple[np.dtype, int]] = {
    "node_offsets": (np.dtype(np.int64), 1),  # (T + 1,): tree t owns nodes [offsets[t], offsets[t+1])
    "feature": (np.dtype(np.int32), 1),       # (N,): split feature, -1 at a leaf
    "threshold": (np.dtype(np.float64), 1),   # (N,): x <= threshold goes left; 0 at a leaf
    "left": (np.dtype(np.int32), 1),          # (N,): tree-local index of the left child, -1 at a leaf
    "right": (np.dtype(np.int32), 1),         # (N,): tree-local index of the right child, -1 at a leaf
    "value": (np.dtype(np.float64), 2),       # (N, K): class frequencies at a leaf, 0 elsewhere
}



# --------------------------------------------------------------------------- node arrays

def _refuse_arrays(message: str) -> ConfigError:
    return ConfigError(f"forest arrays refused: {message}")


def _check_layout(arrays: Any) -> tuple[np.ndarray, ...]:
    """Names, dtypes, dimensions and matching lengths of the node arrays (constant time)."""
    if not isinstance(arrays, Mapping) or set(arrays) != set(FOREST_ARRAY_SPECS):
        names = sorted(arrays) if isinstance(arrays, Mapping) else type(arrays).__qualname__
        raise _refuse_arrays(f"expected arrays {sorted(FOREST_ARRAY_SPECS)}, got {names}")
    out = []
    for name, (dtype, ndim) in FOREST_ARRAY_SPECS.items():
        a = arrays[name]
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim:
            raise _refuse_arrays(f"{name!r} must be a {ndim}-D {dtype} array, got "
                                 f"{getattr(a, 'dtype', type(a).__qualname__)} {getattr(a, 'shape', '')}")
        out.append(np.ascontiguousarray(a))  # a plain ndarray, also for a memory-mapped one
    offsets, feature, threshold, left, right, value = out
    n_nodes = feature.shape[0]
    if any(a.shape[0] != n_nodes for a in (threshold, left, right, value)):
        raise _refuse_arrays(f"every node array needs {n_nodes} rows, got "
                             f"{[arrays[k].shape for k in ('threshold', 'left', 'right', 'value')]}")
    if offsets.shape[0] < 2 or offsets[0] != 0 or offsets[-1] != n_nodes:
        raise _refuse_arrays(f"node_offsets must run from 0 to {n_nodes} with at least one tree")
    return offsets, feature, threshold, left, right, value


def check_forest_arrays(arrays: Mapping[str, Any], *, n_features: int, n_classes: int) -> dict[str, np.ndarray]:
    """Validate node arrays received from elsewhere; return them as contiguous arrays.

    Checks the names, dtypes and shapes of :data:`FOREST_ARRAY_SPECS`; that every tree is
    non-empty; that split features are in ``[0, n_features)`` with finite thresholds; that
    children come after their parent inside the same tree (so every walk ends at a leaf);
    and that every leaf holds class frequencies (non-negative, summing to 1).
    """
    offsets, feature, threshold, left, right, value = _check_layout(arrays)
    n_nodes = feature.shape[0]
    sizes = np.diff(offsets)
    if np.any(sizes < 1):
        raise _refuse_arrays(f"node_offsets must rise by at least 1 per tree, got tree sizes {sizes.min()}")
    if value.shape[1] != n_classes:
        raise _refuse_arrays(f"value needs {n_classes} columns (one per class), got {value.shape[1]}")
    local = np.arange(n_nodes) - np.repeat(offsets[:-1], sizes)
    size = np.repeat(sizes, sizes)
    leaf = feature == _LEAF
    split = ~leaf
    if np.any((feature < _LEAF) | (feature >= n_features)):
        raise _refuse_arrays(f"split features must be in [0, {n_features}) or -1 at a leaf")
    if np.any(leaf & ((left != _LEAF) | (right != _LEAF))):
        raise _refuse_arrays("a leaf has children")
    if np.any(split & ((left <= local) | (left >= size) | (right <= local) | (right >= size))):
        raise _refuse_arrays("a child index is not after its parent inside its tree")
    if not np.all(np.isfinite(threshold)) or not np.all(np.isfinite(value)):
        raise _refuse_arrays("thresholds and values must be finite")
    if np.any(value[leaf] < 0) or not np.allclose(value[leaf].sum(axis=1), 1.0, rtol=0, atol=1e-9):
        raise _refuse_arrays("leaf values must be class frequencies (non-negative, summing to 1)")
    return dict(zip(FOREST_ARRAY_SPECS, (offsets, feature, threshold, left, right, value)))


def predict_proba_from_arrays(arrays: Mapping[str, np.ndarray], X: Any) -> np.ndarray:
    """Class probabilities of the forest ``arrays``: the mean over trees of the leaf values.

    A pure function of the arrays.  It checks their layout and, while walking, that every
    step stays inside its tree and the columns of ``X``, so corrupt arrays raise
    :class:`ConfigError` instead of reading out of bounds; the full validation of
    received arrays is :func:`check_forest_arrays`.
    """
    layout = _check_layout(arrays)
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ConfigError(f"X must be a 2-D array, got shape {X.shape}")
    proba, bad_tree = predict_proba_kernel(X, *layout)
    if bad_tree >= 0:
        raise _refuse_arrays(f"tree {bad_tree} is empty, or has a split outside its tree or outside the "
                             f"{X.shape[1]} columns")
    return proba


# --------------------------------------------------------------------------- estimator

def _check_int(name: str, value: Any, low: int, high: float = math.inf) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
        raise ConfigError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


class ProbabilityForest(ClassifierMixin, BaseEstimator):
    """ranger's probability forest (see the module docstring for the exact semantics).

    Parameters
    ----------
    num_trees : int >= 1
        Number of trees (ranger's ``num.trees``).
    mtry : int >= 1 or None
        Features drawn at each node; ``None`` is ``floor(sqrt(p))`` (at least 1), ranger's
        default for classification.  Capped at ``p``.
    min_node_size : int >= 1
        A node with at most this many draws is not split (ranger's ``min.node.size``;
        10 is ranger's default for probability forests).
    sample_fraction : float in (0, 1]
        Each tree draws ``floor(n * sample_fraction)`` rows (at least 1).
    replace : bool
        Draw with replacement (ranger's default) or without.
    seed : int >= 0
        Root seed; tree t grows from child stream t, so the same seed gives the same
        forest in any process.

    Attributes
    ----------
    classes_, n_features_in_, mtry_, n_draws_ : as named.
    trees_ : dict of str to ndarray
        The node arrays (:data:`FOREST_ARRAY_SPECS`); feature indices refer to the columns this
        forest was fitted on.
    """

    classes_: np.ndarray
    trees_: dict[str, np.ndarray]

    def __init__(self, num_trees: int = 500, *, mtry: int | None = None, min_node_size: int = 10,
                 sample_fraction: float = 1.0, replace: bool = True, seed: int = 0) -> None:
        self.num_trees = num_trees
        self.mtry = mtry
        self.min_node_size = min_node_size
        self.sample_fraction = sample_fraction
        self.replace = replace
        self.seed = seed

    def fit(self, X, y) -> ProbabilityForest:
        num_trees = _check_int("num_trees", self.num_trees, 1)
        min_node_size = _check_int("min_node_size", self.min_node_size, 1)
        fraction = self.sample_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0.0 < fraction <= 1.0:
            raise ConfigError(f"sample_fraction must be a real number in (0, 1], got {fraction!r}")
        if not isinstance(self.replace, (bool, np.bool_)):
            raise ConfigError(f"replace must be True or False, got {self.replace!r}")
        if isinstance(self.seed, (bool, np.bool_)) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise ConfigError(f"seed must be a non-negative integer, got {self.seed!r}")
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        n_rows, n_features = X.shape
        self.mtry_ = (max(1, math.isqrt(n_features)) if self.mtry is None
                      else min(_check_int("mtry", self.mtry, 1), n_features))
        self.n_draws_ = max(1, int(math.floor(n_rows * float(fraction))))
        ranks, uniques, n_unique = rank_columns(X)
        tree_seeds = as_seed_sequence(int(self.seed)).generate_state(num_trees, dtype=np.uint64)
        grown = grow_forest(ranks, uniques, n_unique, codes.astype(np.int64), len(self.classes_), self.mtry_,
                            min_node_size, self.n_draws_, bool(self.replace), tree_seeds)
        self.trees_ = dict(zip(FOREST_ARRAY_SPECS, grown))
        return self

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return predict_proba_from_arrays(self.trees_, X)

    def predict(self, X) -> np.ndarray:
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


def warm_up() -> None:
    """Compile (or load from numba's cache) the forest kernels once in this process."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    ProbabilityForest(num_trees=2, seed=0).fit(X, (X[:, 0] > 0).astype(int)).predict(X)
