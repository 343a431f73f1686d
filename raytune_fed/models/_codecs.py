"""The record codecs of the three RFMS learners: encoder (analyst side) and the site's predictor.

What each learner sends (``keep`` are the columns the pipeline's constant-feature filter
kept, as sorted indices into the site's ``p`` columns; ``k = len(keep)``):

* ``elastic_net``: ``keep``, standardisation ``mean``/``scale`` (k,), ``coef`` (k,),
  ``intercept`` (1,);
* ``svm``: ``keep``, ``mean``, ``scale``, ``support_vectors`` (m, k), ``dual_coef`` (m,),
  ``intercept`` (1,); the kernel is always RBF with ``gamma`` = the record's ``sigma``;
* ``random_forest``: ``keep``, per tree its node count ``node_count`` (T,), and over all
  nodes ``children_left``/``children_right``/``feature`` (N,) (tree-local indices;
  leaves have children -1), ``threshold`` (N,) and class weights ``value`` (N, 2);
  T must equal the record's ``num_trees``.

A new learner is admitted to sites by one :class:`~raytune_fed.models.RecordCodec`
subclass here and ``record=`` on its registry entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from sklearn.feature_selection import VarianceThreshold
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from raytune_fed.errors import ConfigError
from raytune_fed.models._elasticnet import ElasticNetLogistic
from raytune_fed.models._forest import ProbabilityForest
from raytune_fed.models._records import DTYPES, ArraySpec, RecordCodec, RecordError

# Shared pieces: the constant-feature filter and standardisation every learner starts with


def _steps(pipeline: Any, kinds: tuple[type, ...]) -> list[Any]:
    steps = [est for _, est in getattr(pipeline, "steps", ())]
    if [type(s) for s in steps] != list(kinds):
        raise ConfigError(f"expected a fitted pipeline of {[k.__name__ for k in kinds]}, "
                          f"got {[type(s).__name__ for s in steps] or type(pipeline).__name__}")
    return steps


def _f8(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=DTYPES["f8"])


def _keep(selector: Any) -> np.ndarray:
    return np.ascontiguousarray(selector.get_support(indices=True), dtype=DTYPES["i8"])


def _check_keep(keep: np.ndarray, p: int) -> None:
    if keep.size == 0 or keep[0] < 0 or keep[-1] >= p or (keep.size > 1 and np.any(np.diff(keep) <= 0)):
        raise RecordError(f"record 'keep' must be strictly increasing column indices in [0, {p})")


def _check_scale(scale: np.ndarray) -> None:
    if np.any(scale <= 0.0):
        raise RecordError("record 'scale' must be > 0")


def _standardised(arrays: Mapping[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    # fancy indexing copies: the site's rows are never written
    return (X[:, arrays["keep"]] - arrays["mean"]) / arrays["scale"]


def _scaler_arrays(steps: list[Any]) -> dict[str, np.ndarray]:
    return {"keep": _keep(steps[0]), "mean": _f8(steps[1].mean_), "scale": _f8(steps[1].scale_)}


_SCALED = (ArraySpec("keep", "i8", ("k",)), ArraySpec("mean", "f8", ("k",)), ArraySpec("scale", "f8", ("k",)))


class LinearCodec(RecordCodec):
    """Elastic net: standardise the kept columns, then the sign of ``X coef + intercept``."""

    specs = (*_SCALED, ArraySpec("coef", "f8", ("k",)), ArraySpec("intercept", "f8", (1,)))
    caps = {"k": 1_000_000, "cost": 10 ** 9}

    def encode(self, pipeline: Any, config: Mapping[str, Any]) -> dict[str, np.ndarray]:
        steps = _steps(pipeline, (VarianceThreshold, StandardScaler, ElasticNetLogistic))
        model = steps[2]
        return {**_scaler_arrays(steps), "coef": _f8(model.coef_[0]), "intercept": _f8(model.intercept_[:1])}

    def check(self, arrays, config, dims, *, deadline=lambda: None):
        _check_keep(arrays["keep"], dims["p"])
        _check_scale(arrays["scale"])

    def cost(self, arrays, dims, n_rows):
        return float(n_rows) * dims["k"]

    def predict(self, arrays, config, X, deadline):
        scores = _standardised(arrays, X) @ arrays["coef"] + arrays["intercept"][0]
        deadline()
        return (scores > 0).astype(np.int8)


class RBFKernelCodec(RecordCodec):
    """RBF SVM: standardise, then the sign of ``sum_j dual_j exp(-sigma |x - sv_j|^2) + b``."""

    specs = (*_SCALED, ArraySpec("support_vectors", "f8", ("m", "k")), ArraySpec("dual_coef", "f8", ("m",)),
             ArraySpec("intercept", "f8", (1,)))
    caps = {"k": 1_000_000, "m": 200_000, "cost": 2 * 10 ** 9}
    _CHUNK = 1 << 22  # kernel entries per chunk (32 MiB of float64)

    def encode(self, pipeline: Any, config: Mapping[str, Any]) -> dict[str, np.ndarray]:
        steps = _steps(pipeline, (VarianceThreshold, StandardScaler, SVC))
        svc = steps[2]
        if svc.kernel != "rbf" or len(svc.classes_) != 2 or not math.isclose(float(svc.gamma), float(config["sigma"])):
            raise ConfigError("the SVM record holds a binary RBF SVC whose gamma is the configuration's sigma")
        return {**_scaler_arrays(steps), "support_vectors": _f8(svc.support_vectors_),
                "dual_coef": _f8(svc.dual_coef_[0]), "intercept": _f8(svc.intercept_[:1])}

    def check(self, arrays, config, dims, *, deadline=lambda: None):
        _check_keep(arrays["keep"], dims["p"])
        _check_scale(arrays["scale"])

    def cost(self, arrays, dims, n_rows):
        return float(n_rows) * dims["m"] * dims["k"]

    def predict(self, arrays, config, X, deadline):
        Z = _standardised(arrays, X)
        sv, dual = arrays["support_vectors"], arrays["dual_coef"]
        gamma = float(config["sigma"])
        sv_sq = np.einsum("ij,ij->i", sv, sv)
        scores = np.full(Z.shape[0], arrays["intercept"][0])
        step = max(1, self._CHUNK // max(1, sv.shape[0]))
        for lo in range(0, Z.shape[0], step):
            z = Z[lo:lo + step]
            sq = np.einsum("ij,ij->i", z, z)[:, None] + sv_sq[None, :] - 2.0 * (z @ sv.T)
            scores[lo:lo + step] += np.exp(-gamma * np.maximum(sq, 0.0)) @ dual
            deadline()
        return (scores > 0).astype(np.int8)


class ForestCodec(RecordCodec):
    """Probability forest: mean of the trees' leaf class shares, then the larger share.

    Trees are traversed for all trees and rows at once, one level per step, for exactly
    the forest's depth (so the work does not depend on the site's values).  The arrays are
    :class:`~raytune_fed.models.ProbabilityForest`'s node arrays; feature values are compared
    in float64 as that forest does, and a tie between the two classes goes to the first, as
    its argmax does.
    """

    specs = (ArraySpec("keep", "i8", ("k",)), ArraySpec("node_count", "i8", ("T",)),
             ArraySpec("children_left", "i4", ("N",)), ArraySpec("children_right", "i4", ("N",)),
             ArraySpec("feature", "i4", ("N",)), ArraySpec("threshold", "f8", ("N",)),
             ArraySpec("value", "f8", ("N", 2)))
    caps = {"k": 1_000_000, "T": 5000, "N": 4_000_000, "depth": 512, "cost": 5 * 10 ** 9}
    _CHUNK = 1 << 20  # tree x row cells per chunk

    def encode(self, pipeline: Any, config: Mapping[str, Any]) -> dict[str, np.ndarray]:
        steps = _steps(pipeline, (VarianceThreshold, ProbabilityForest))
        forest = steps[1]
        if len(forest.classes_) != 2:
            raise ConfigError(f"the forest record holds a binary forest, got {len(forest.classes_)} classes")
        t = forest.trees_
        return {"keep": _keep(steps[0]),
                "node_count": np.ascontiguousarray(np.diff(t["node_offsets"]), dtype=DTYPES["i8"]),
                "children_left": np.ascontiguousarray(t["left"], dtype=DTYPES["i4"]),
                "children_right": np.ascontiguousarray(t["right"], dtype=DTYPES["i4"]),
                "feature": np.ascontiguousarray(t["feature"], dtype=DTYPES["i4"]),
                "threshold": _f8(t["threshold"]), "value": _f8(t["value"])}

    def check(self, arrays, config, dims, *, deadline=lambda: None):
        _check_keep(arrays["keep"], dims["p"])
        counts = arrays["node_count"]
        if dims["T"] != int(config["num_trees"]):
            raise RecordError(f"record has {dims['T']} trees, its configuration num_trees={config['num_trees']}")
        if np.any(counts < 1) or np.any(counts > dims["N"]) or int(counts.sum()) != dims["N"]:
            raise RecordError("record 'node_count' must be >= 1 per tree and sum to the node arrays' length")
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        owner = np.repeat(np.arange(counts.size), counts)
        local = np.arange(dims["N"]) - starts[owner]
        left, right, feat = arrays["children_left"], arrays["children_right"], arrays["feature"]
        leaf = left == -1
        if np.any((right == -1) != leaf):
            raise RecordError("record tree nodes must have two children or none (-1, -1)")
        deadline()
        inner = ~leaf
        size = counts[owner]
        for child in (left, right):
            c = child[inner]
            if np.any(c <= local[inner]) or np.any(c >= size[inner]):
                raise RecordError("record tree children must point forward inside their own tree")
        deadline()
        base = starts[owner[inner]]
        parents = np.bincount(np.concatenate([base + left[inner], base + right[inner]]), minlength=dims["N"])
        if np.any(parents[local > 0] != 1) or np.any(parents[local == 0] != 0):
            raise RecordError("record trees must give every node but the root exactly one parent")
        if np.any(feat[inner] < 0) or np.any(feat[inner] >= dims["k"]):
            raise RecordError(f"record tree features must index the {dims['k']} kept columns")
        if np.any(arrays["value"] < 0.0):
            raise RecordError("record tree 'value' must be >= 0")
        deadline()
        if _depth(left, right, starts, owner, inner, cap=self.caps["depth"], deadline=deadline) > self.caps["depth"]:
            raise RecordError(f"record trees may be at most {self.caps['depth']} levels deep")

    def cost(self, arrays, dims, n_rows):
        left, right = arrays["children_left"], arrays["children_right"]
        counts = arrays["node_count"]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        owner = np.repeat(np.arange(counts.size), counts)
        return float(n_rows) * dims["T"] * (1 + _depth(left, right, starts, owner, left != -1))

    def predict(self, arrays, config, X, deadline):
        counts = arrays["node_count"]
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        owner = np.repeat(np.arange(counts.size), counts)
        inner = arrays["children_left"] != -1
        gl = np.where(inner, arrays["children_left"] + starts[owner], -1)
        gr = np.where(inner, arrays["children_right"] + starts[owner], -1)
        feat = np.where(inner, arrays["feature"], 0)
        depth = _depth(arrays["children_left"], arrays["children_right"], starts, owner, inner)
        value = arrays["value"]
        norm = value.sum(axis=1, keepdims=True)
        share = value / np.where(norm == 0.0, 1.0, norm)
        Xk = X[:, arrays["keep"]].astype(np.float64)
        n = Xk.shape[0]
        rows = np.arange(n)
        total = np.zeros((n, 2))
        per_chunk = max(1, self._CHUNK // max(1, n))
        for lo in range(0, counts.size, per_chunk):
            node = np.repeat(starts[lo:lo + per_chunk, None], n, axis=1)
            for _ in range(depth):
                go_left = Xk[rows, feat[node]] <= arrays["threshold"][node]
                node = np.where(inner[node], np.where(go_left, gl[node], gr[node]), node)
                deadline()
            total = np.add.reduce(np.concatenate([total[None], share[node]]), axis=0)
        return (total[:, 1] > total[:, 0]).astype(np.int8)


def _depth(left: np.ndarray, right: np.ndarray, starts: np.ndarray, owner: np.ndarray, inner: np.ndarray, *,
           cap: int | None = None, deadline: Callable[[], None] = lambda: None) -> int:
    """Levels below the roots (valid, forward-pointing trees only): one numpy step per level.

    With ``cap`` the walk stops after ``cap + 1`` levels (a chain of a million nodes costs
    ``cap + 1`` steps, not a million), returning ``cap + 1``.
    """
    frontier = starts.copy()
    depth = 0
    while frontier.size and (cap is None or depth <= cap):
        deadline()
        frontier = frontier[inner[frontier]]
        if not frontier.size:
            break
        base = starts[owner[frontier]]
        frontier = np.concatenate([left[frontier] + base, right[frontier] + base])
        depth += 1
    return depth
