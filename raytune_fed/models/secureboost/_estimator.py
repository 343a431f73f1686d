"""SecureBoost (Algorithms 1 and 4 of the CMOSB paper) as a scikit-learn classifier.

``fit(X, y)`` simulates the parties in-process: the columns ``passive_features`` go to
passive parties (:class:`PassiveWorker`), the rest stay with the active party, which
holds the labels and the only secret key.  ``fit(X_active, y, passive=[...],
rows=ids)`` trains with passive parties that live elsewhere (e.g. Ray actors behind a
client), ``X_active`` then being the active party's block for the training ids ``rows``.

Boosting: ``n_local_trees`` rounds built by the active party alone (the paper's first
defence), then ``n_federated_trees`` rounds with the passive parties; a round is one tree
(binary log-loss) or one tree per class (softmax, FATE 1.x).  Each tree sees a uniform
row subsample of share ``subsample``.  After ``fit``: ``op_counts_`` (all parties'
homomorphic operations), ``training_cost_`` (eq. 5 seconds from ``op_times_``),
``fit_seconds_`` (wall clock), ``trees_`` and, for in-process parties,
``passive_views_`` (what each passive party saw).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from raytune_fed.crypto import GHCodec, OpCounts, calibrate, secret_context
from raytune_fed.errors import ConfigError
from raytune_fed.models.secureboost import _loss
from raytune_fed.models.secureboost._binning import apply_bins, mask_ids, quantile_edges
from raytune_fed.models.secureboost._grower import Session, TreeGrower, TreeJob
from raytune_fed.models.secureboost._params import check_params, passive_blocks
from raytune_fed.models.secureboost._passive import PassiveWorker
from raytune_fed.models.secureboost._split import SplitRule
from raytune_fed.random import as_generator, derive, seed_int


class SecureBoostClassifier(ClassifierMixin, BaseEstimator):
    """Vertical federated gradient boosting with encrypted histograms (SecureBoost).

    Parameters
    ----------
    n_federated_trees : int >= 1 - boosting rounds with the passive parties (``n_f``).
    n_local_trees : int >= 0 - rounds built by the active party alone first (``n_l``).
    max_depth : int >= 1 - depth ``d`` of every tree.
    learning_rate : float in (0, 1] - shrinkage ``eta``.
    subsample : float in (0, 1] - share ``r`` of training rows each tree sees.
    purity_threshold : float in (0, 1] - ``theta_p``; nodes whose majority-class share
        reaches it are split by the active party alone (1.0: only pure nodes).
    reg_lambda : float >= 0 - L2 regularisation of leaf weights.
    n_bins : int in [2, 256] - quantile bins per feature.
    min_child_weight : float > 0 - least hessian sum of a child.
    min_split_gain : float >= 0 - least gain of a split.
    passive_features : column indices of the passive party (or a list of such lists for
        several parties); None gives the last half of the columns to one party.
    he : ``"bfv"`` (TenSEAL BFV, coefficient packing) or ``"plain"`` (same protocol, no
        encryption, same operation counts).
    op_times : seconds per operation for the cost (:class:`~raytune_fed.crypto.OpTimes`
        or a dict); None measures them on this machine once per process.
    max_block : largest number of instances per ciphertext (a power of two).
    random_state : int seed (subsampling, the passive parties' noise).
    """

    passive_features_: list[np.ndarray] | None  # None: the passive parties are remote

    def __init__(self, n_federated_trees: int = 5, n_local_trees: int = 0, max_depth: int = 3,
                 learning_rate: float = 0.3, subsample: float = 1.0, purity_threshold: float = 1.0,
                 reg_lambda: float = 0.1, n_bins: int = 32, min_child_weight: float = 1e-3,
                 min_split_gain: float = 1e-3, passive_features: Any = None, he: str = "bfv",
                 op_times: Any = None, max_block: int = 1024, random_state: int = 0) -> None:
        self.n_federated_trees = n_federated_trees
        self.n_local_trees = n_local_trees
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.purity_threshold = purity_threshold
        self.reg_lambda = reg_lambda
        self.n_bins = n_bins
        self.min_child_weight = min_child_weight
        self.min_split_gain = min_split_gain
        self.passive_features = passive_features
        self.he = he
        self.op_times = op_times
        self.max_block = max_block
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, *, passive: Sequence[Any] | None = None, rows: Any = None) -> SecureBoostClassifier:
        """Train; see the class docstring for the two ways of naming the passive parties."""
        p = check_params(self.get_params())
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.size < 2:
            raise ConfigError(f"SecureBoost needs >= 2 classes in y, got {self.classes_.tolist()}")
        n = X.shape[0]
        if passive is None:
            if rows is not None:
                raise ConfigError("rows= names training ids of remote passive parties; pass it with passive=")
            blocks = passive_blocks(self.passive_features, X.shape[1])
            in_passive = np.concatenate(blocks)
            self.active_features_ = np.setdiff1d(np.arange(X.shape[1]), in_passive)
            self.passive_features_ = blocks
            endpoints = [PassiveWorker(X[:, cols], seed=seed_int(derive(self.random_state, "passive", i)),
                                       max_bins=p["n_bins"])
                         for i, cols in enumerate(blocks)]
            row_ids = np.arange(n, dtype=np.int64)
            X_active = X[:, self.active_features_]
        else:
            endpoints = list(passive)
            if not endpoints:
                raise ConfigError("passive= must name at least one passive party")
            row_ids = np.asarray(rows) if rows is not None else np.arange(n)
            if row_ids.ndim != 1 or row_ids.size != n or not np.issubdtype(row_ids.dtype, np.integer) \
                    or np.any(np.diff(row_ids) <= 0):
                raise ConfigError(f"rows must be {n} sorted distinct ids, one per row of X, got "
                                  f"{row_ids.size} ids of dtype {row_ids.dtype}")
            row_ids = row_ids.astype(np.int64)
            self.active_features_, self.passive_features_ = np.arange(X.shape[1]), None
            X_active = X
        self.passive_ = endpoints
        start = time.perf_counter()
        keys = secret_context(p["he"])
        public = keys.public_context()
        passive_masks = [int(e.open_session(public, p["n_bins"], row_ids)) for e in endpoints]
        self.active_edges_ = quantile_edges(X_active, p["n_bins"])
        codec = GHCodec.for_rows(n)
        session = Session(keys=keys, codec=codec,
                          rule=SplitRule(p["reg_lambda"], p["min_child_weight"], p["min_split_gain"], codec.scale),
                          learning_rate=p["learning_rate"], max_depth=p["max_depth"],
                          purity_threshold=p["purity_threshold"], n_bins=p["n_bins"],
                          active_ids=mask_ids(apply_bins(X_active, self.active_edges_), p["n_bins"]),
                          labels=codes.astype(np.int64), n_classes=self.classes_.size, row_ids=row_ids,
                          endpoints=endpoints, passive_masks=passive_masks, max_block=p["max_block"])
        self._boost(session, p, endpoints)
        self.fit_seconds_ = time.perf_counter() - start
        counts = OpCounts().add(keys.counts)
        for e in endpoints:
            counts.add(e.op_counts())
        self.op_counts_ = counts.as_dict()
        self.op_times_ = p["op_times"] if p["op_times"] is not None else calibrate()
        self.training_cost_ = self.op_times_.cost(counts)
        self.passive_views_ = [e.view for e in endpoints if isinstance(e, PassiveWorker)]
        return self

    def _boost(self, s: Session, p: dict[str, Any], endpoints: list[Any]) -> None:
        n, k = s.labels.size, self.classes_.size
        n_out = _loss.n_outputs(k)
        self.init_score_ = _loss.initial_scores(s.labels, k)
        raw = np.tile(self.init_score_, (n, 1))
        grower, trees = TreeGrower(s), []
        n_sample = max(1, int(round(p["subsample"] * n)))
        for rnd in range(p["n_local_trees"] + p["n_federated_trees"]):
            g, h = _loss.gradients(raw, s.labels, k)
            jobs = []
            for out in range(n_out):  # the round's trees (one per class) grow together, level by level
                index = rnd * n_out + out
                if n_sample < n:
                    sample = np.sort(as_generator(derive(p["random_state"], "subsample", index))
                                     .choice(n, n_sample, replace=False))
                else:
                    sample = np.arange(n)
                gq, hq = s.codec.quantise(g[:, out], h[:, out])
                jobs.append(TreeJob(index, out, sample, gq, hq, federated=rnd >= p["n_local_trees"]))
            grown = grower.grow_round(jobs)
            if n_sample < n:  # rows outside a tree's sample: route every row through the round's trees at once
                bits = self._passive_bits([tree for tree, _ in grown], s.row_ids, remote=True)
                bins = s.active_ids - np.arange(s.active_ids.shape[1]) * s.n_bins
                grown = [(tree, tree.apply(bins, s.n_bins, bits)) for tree, _ in grown]
            for tree, leaf_of in grown:
                raw[:, tree.output] += tree.value[leaf_of]
                trees.append(tree)
        self.trees_ = trees
        self.n_outputs_ = n_out

    # ------------------------------------------------------------------ predict
    def _passive_bits(self, trees: list[Any], rows: np.ndarray | None, remote: bool,
                      X: np.ndarray | None = None) -> dict[tuple[int, int], np.ndarray]:
        out: dict[tuple[int, int], np.ndarray] = {}
        keys_by_party: dict[int, list[tuple[int, int]]] = {}
        for t in trees:
            for party, keys in t.passive_keys().items():
                keys_by_party.setdefault(party, []).extend(keys)
        for party, keys in keys_by_party.items():
            endpoint = self.passive_[party - 1]
            if remote:
                if rows is None:  # apply() refuses a remote model without rows=; None here is a bug
                    raise RuntimeError("routing through remote passive parties needs the rows' ids")
                bits = endpoint.route(keys, rows)
            else:
                if X is None or self.passive_features_ is None:  # in-process parties: apply() passes X
                    raise RuntimeError("routing through in-process passive parties needs X and their columns")
                bits = endpoint.route_features(keys, X[:, self.passive_features_[party - 1]])
            for c, key in enumerate(keys):
                out[key] = np.asarray(bits)[:, c]
        return out

    def apply(self, X: Any, *, rows: Any = None) -> np.ndarray:
        """Leaf node of every row in every tree, ``(n_rows, n_trees)``; ``rows`` for remote passive parties."""
        check_is_fitted(self, "trees_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        remote = self.passive_features_ is None
        if remote and rows is None:
            raise ConfigError("this model's passive parties are remote: pass rows= (their ids of X's rows)")
        X_active = X if remote else X[:, self.active_features_]
        bins = apply_bins(X_active, self.active_edges_)
        passive_left = self._passive_bits(self.trees_, None if rows is None else np.asarray(rows), remote, X)
        return np.column_stack([t.apply(bins, self.n_bins, passive_left) for t in self.trees_])

    def decision_function(self, X: Any, *, rows: Any = None) -> np.ndarray:
        """Raw scores ``(n,)`` (binary) or ``(n, n_classes)``; ``rows`` for remote passive parties."""
        leaves = self.apply(X, rows=rows)
        raw = np.tile(self.init_score_, (leaves.shape[0], 1))
        for c, tree in enumerate(self.trees_):
            raw[:, tree.output] += tree.value[leaves[:, c]]
        return raw[:, 0] if self.n_outputs_ == 1 else raw

    def predict_proba(self, X: Any, *, rows: Any = None) -> np.ndarray:
        raw = self.decision_function(X, rows=rows)
        return _loss.probabilities(raw[:, None] if raw.ndim == 1 else raw, self.classes_.size)

    def predict(self, X: Any, *, rows: Any = None) -> np.ndarray:
        return self.classes_[np.argmax(self.predict_proba(X, rows=rows), axis=1)]

    # ------------------------------------------------------------------ reporting
    def federated_tree_indices(self) -> list[int]:
        """Indices of the trees built with the passive parties (all outputs of federated rounds)."""
        check_is_fitted(self, "trees_")
        return [t.index for t in self.trees_ if t.federated]
