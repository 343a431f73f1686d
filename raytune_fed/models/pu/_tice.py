"""TIcE (Bekker & Davis, AAAI 2018): the label frequency from a tree of PU subsets.

Under SCAR the share of labelled rows in a subset that holds only positives is ``c``, and
in any subset it is at most ``c``; so a high lower confidence bound on ``L / T`` (``L``
labelled among ``T`` rows) in some subset bounds ``c`` from below.  TIcE searches for
such subsets with a best-first decision tree:

* features are min-max scaled to [0, 1] and cut into 4 bins at 0.25 / 0.5 / 0.75;
* the rows are split into ``n_folds`` random folds; for each fold the tree is *grown* on
  that fold and every subset's bound is *estimated* on the other folds;
* bound for a subset with ``T`` rows, ``L`` labelled: ``L/T - sqrt(c0 (1 - c0) (1 - delta)
  / (delta T))``, 0 when ``T < min_rows``; per fold the confidence is ``delta = max(0.025,
  1 / (1 + 0.004 m))`` with ``m`` the fold's estimation rows (the reference code's choice:
  one ``delta`` per fold; a per-subset ``delta`` would barely penalise the smallest subsets,
  whose ``L / T`` is noisiest, and the maximum over hundreds of them would overestimate ``c``);
  ``c0`` is the current estimate (0.5 in the first of ``n_iterations`` passes, then the
  previous pass's mean over folds);
* the node with the highest bound on its growing rows is split next, on the unused
  feature whose best child has the highest ``L / (T + k)`` ("max-bepp", ``k = 5``); a
  feature that leaves every growing row in one bin, or a split that puts no labelled row
  in any child, is not a split; up to ``max_splits`` splits; a child is expanded further
  only if it has more than ``min_rows`` rows, is not all labelled, and has more than
  ``c0 (1 - c0) (1 - delta) / (delta (1 - c_best)^2)`` labelled rows; every child's
  estimated bound can raise the running best ``c_best`` (which starts at the labelled
  share of the estimation rows, a valid lower bound).

What it can and cannot do.  The estimate is a lower bound: on data with a region holding
only positives (``T*`` estimation rows) it lands between about ``c - 1.5 eps`` and ``c``,
``eps = sqrt(c (1 - c) (1 - delta) / (delta T*))`` (``tests/test_pu_models.py`` checks this
at c = 0.3 and 0.5).  When ``eps`` is as large as ``c`` itself - c = 0.01 with a few
thousand rows: no subset's ``L / T`` of about 0.01 survives a slack of about 0.01 - the
estimate stays near its start, the labelled share of all rows, which makes the prior of
the unlabelled rows close to 1 (clipped at 0.999).  That is the estimator's limit at such
label frequencies, not a fault of this code (the paper's Observation 1 is about this case).

The fold estimates are averaged.  Reports ``label_frequency_``, ``class_prior_`` (share of
positives among all rows) and ``unlabelled_prior_`` (share among the unlabelled rows, the
``pi`` uPU and nnPU take), priors clipped to ``[1e-3, 1 - 1e-3]``.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import validate_data

from raytune_fed._checks import check_float, check_int
from raytune_fed.models.pu._base import check_pu_labels
from raytune_fed.models.pu._elkanoto import set_priors

_N_BINS = 4


def _delta(n: int) -> float:
    return max(0.025, 1.0 / (1.0 + 0.004 * n))


def _lower_bound(n_lab: float | np.ndarray, n_rows: float | np.ndarray, c0: float, min_rows: int,
                 d: float) -> np.ndarray:
    n_rows = np.asarray(n_rows, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        lb = n_lab / n_rows - np.sqrt(c0 * (1.0 - c0) * (1.0 - d) / (d * n_rows))
    return np.where(n_rows < min_rows, 0.0, lb)


class TIcE(BaseEstimator):
    """Tree-induction label-frequency estimator (see the module docstring)."""

    def __init__(self, n_folds: int = 5, n_iterations: int = 2, max_splits: int = 500, k: float = 5.0,
                 min_rows: int = 10, random_state: int = 0) -> None:
        self.n_folds = n_folds
        self.n_iterations = n_iterations
        self.max_splits = max_splits
        self.k = k
        self.min_rows = min_rows
        self.random_state = random_state

    def _check_params(self) -> None:
        for name, low in (("n_folds", 2), ("n_iterations", 1), ("max_splits", 0), ("min_rows", 1)):
            check_int(name, getattr(self, name), low)
        check_float("k", self.k, 0.0)

    def fit(self, X: Any, s: Any) -> TIcE:
        self._check_params()
        X, s = validate_data(self, X, s, dtype=np.float64)
        s = check_pu_labels(s)
        lo, span = X.min(axis=0), np.ptp(X, axis=0)
        scaled = (X - lo) / np.where(span > 0, span, 1.0)
        bins = np.digitize(scaled, [0.25, 0.5, 0.75]).astype(np.int8)
        rng = np.random.default_rng(self.random_state)
        folds = rng.permutation(s.size) % min(self.n_folds, s.size)
        c = 0.5
        for _ in range(int(self.n_iterations)):
            estimates = [self._fold_estimate(bins, s, folds == f, c) for f in range(int(folds.max()) + 1)]
            c = float(np.mean(estimates))
        set_priors(self, min(max(c, 1e-6), 1.0), s)
        return self

    def _fold_estimate(self, bins: np.ndarray, s: np.ndarray, grow: np.ndarray, c0: float) -> float:
        est = ~grow
        if not est.any():
            est = grow
        d = _delta(int(est.sum()))
        c_best = float(s[est].mean())
        queue: list[tuple[float, int, np.ndarray, np.ndarray, frozenset]] = []
        root_lb = float(_lower_bound(s[grow].sum(), grow.sum(), c0, self.min_rows, d))
        heapq.heappush(queue, (-root_lb, 0, np.flatnonzero(grow), np.flatnonzero(est), frozenset()))
        counter, n_splits, n_features = 1, 0, bins.shape[1]
        levels = np.arange(_N_BINS)
        while queue and n_splits < self.max_splits:
            _, _, grow_rows, est_rows, used = heapq.heappop(queue)
            free = np.array([f for f in range(n_features) if f not in used], dtype=np.int64)
            if free.size == 0 or grow_rows.size == 0:
                continue
            onehot = bins[np.ix_(grow_rows, free)][:, :, None] == levels            # (m, f, 4)
            n_rows = onehot.sum(axis=0)
            n_lab = (onehot & (s[grow_rows] == 1)[:, None, None]).sum(axis=0)
            bepp = (n_lab / (n_rows + self.k)).max(axis=1)
            bepp[(n_rows > 0).sum(axis=1) < 2] = -1.0        # a feature constant on the node splits nothing
            best = int(np.argmax(bepp))
            if bepp[best] <= 0.0:
                continue                                       # no split puts a labelled row anywhere
            feature = int(free[best])
            n_splits += 1
            for level in range(_N_BINS):
                g_child = grow_rows[bins[grow_rows, feature] == level]
                e_child = est_rows[bins[est_rows, feature] == level]
                if e_child.size:
                    c_best = max(c_best, float(_lower_bound(s[e_child].sum(), e_child.size, c0, self.min_rows, d)))
                need = c0 * (1.0 - c0) * (1.0 - d) / (d * (1.0 - c_best) ** 2) if c_best < 1.0 else math.inf
                n_lab_child = int(s[g_child].sum())
                if g_child.size > self.min_rows and need < n_lab_child < g_child.size:
                    lb = float(_lower_bound(n_lab_child, g_child.size, c0, self.min_rows, d))
                    heapq.heappush(queue, (-lb, counter, g_child, e_child, used | {feature}))
                    counter += 1
        return c_best
