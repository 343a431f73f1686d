"""Elkan & Noto (KDD 2008): the label-frequency estimate ``e1`` and the weighted SVM (WSVM).

Both start from a non-traditional classifier (NTC) ``g(x) ~ P(s = 1 | x)``, an RBF SVC
with Platt scaling trained on labelled vs unlabelled rows, and estimate the label
frequency ``c = P(s = 1 | y = 1)`` as the mean of ``g`` over *held-out* labelled rows
(``hold_out_ratio`` of the rows, stratified by ``s``, at least one labelled row held out;
at least three labelled rows are needed).

* :class:`ElkanNotoPrior` reports ``label_frequency_`` (``c``), ``class_prior_`` (the share
  of positives among all rows, ``n_P / (c n)``) and ``unlabelled_prior_`` (the share among
  the unlabelled rows, ``(n_P / c - n_P) / n_U``, what uPU and nnPU take), clipped to
  ``[1e-3, 1 - 1e-3]``.
* :class:`WSVM` uses every unlabelled row twice, as a positive with weight
  ``w(x) = (1 - c) / c * g(x) / (1 - g(x))`` (clipped to [0, 1]) and as a negative with
  weight ``1 - w(x)``; labelled rows are positives of weight 1.  A new RBF SVC is trained
  with these ``sample_weight`` s on all rows; its probabilities come from Platt scaling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.calibration import CalibratedClassifierCV
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC
from sklearn.utils.validation import validate_data

from raytune_fed.errors import ConfigError, NoModelError
from raytune_fed.models.pu._base import PUClassifier, check_pu_labels

_PRIOR_CLIP = 1e-3
_G_CLIP = 1e-6
# A weight this close to 1 is rounding, not a negative: when the NTC is constant (Platt scaling
# on four labelled rows), every g equals c up to the BLAS kernel's last digits, so w = 1 exactly
# under one kernel and 1 - 9e-13 under another, which left 710 "negatives" of weight 1e-12.
_W_ROUNDING = 1e-9


def _check_hold_out(ratio: Any) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.number)) or not 0.0 < float(ratio) < 1.0:
        raise ConfigError(f"hold_out_ratio must be in (0, 1), got {ratio!r}")
    return float(ratio)


def _svc(C: float, gamma: Any, seed: int, n_folds: int = 3) -> CalibratedClassifierCV:
    """An RBF SVC with Platt scaling: sigmoid calibrated on ``n_folds`` folds, then one SVC on all rows."""
    return CalibratedClassifierCV(SVC(kernel="rbf", C=C, gamma=gamma, random_state=seed), method="sigmoid",
                                  cv=StratifiedKFold(n_folds, shuffle=True, random_state=seed), ensemble=False)


def _n_folds(labels: np.ndarray) -> int:
    """Calibration folds: 3, or fewer when a class has fewer rows (at least 2)."""
    return max(2, min(3, int(np.bincount(labels.astype(np.int64)).min())))


def elkan_noto_ntc(X: np.ndarray, s: np.ndarray, *, hold_out_ratio: float, C: float, gamma: Any,
                   seed: int) -> tuple[CalibratedClassifierCV, float]:
    """The NTC fitted on the kept rows and ``c`` = mean NTC probability on held-out labelled rows."""
    ratio = _check_hold_out(hold_out_ratio)
    labelled = np.flatnonzero(s == 1)
    unlabelled = np.flatnonzero(s == 0)
    if labelled.size < 3 or unlabelled.size < 3:
        raise ConfigError(f"Elkan-Noto needs >= 3 labelled and >= 3 unlabelled rows (one labelled row held out "
                          f"to estimate c, two of each to calibrate the classifier), got {labelled.size} and "
                          f"{unlabelled.size}")
    rng = np.random.default_rng(seed)
    n_p_out = min(max(1, int(round(ratio * labelled.size))), labelled.size - 1)
    n_u_out = min(int(round(ratio * unlabelled.size)), unlabelled.size - 2)
    p_out = rng.choice(labelled, n_p_out, replace=False)
    u_out = rng.choice(unlabelled, n_u_out, replace=False)
    keep = np.setdiff1d(np.arange(s.size), np.concatenate([p_out, u_out]))
    ntc = _svc(C, gamma, seed, _n_folds(s[keep])).fit(X[keep], s[keep])
    c = float(np.mean(ntc.predict_proba(X[p_out])[:, 1]))
    return ntc, min(max(c, _G_CLIP), 1.0)


class ElkanNotoPrior(BaseEstimator):
    """Label frequency and class prior by Elkan & Noto's ``e1`` estimator (see the module docstring)."""

    def __init__(self, hold_out_ratio: float = 0.1, C: float = 1.0, gamma: Any = "scale",
                 random_state: int = 0) -> None:
        self.hold_out_ratio = hold_out_ratio
        self.C = C
        self.gamma = gamma
        self.random_state = random_state

    def fit(self, X: Any, s: Any) -> ElkanNotoPrior:
        X, s = validate_data(self, X, s, dtype=np.float64)
        s = check_pu_labels(s)
        _, c = elkan_noto_ntc(X, s, hold_out_ratio=self.hold_out_ratio, C=self.C, gamma=self.gamma,
                              seed=self.random_state)
        set_priors(self, c, s)
        return self


def set_priors(estimator: BaseEstimator, c: float, s: np.ndarray) -> None:
    """Set ``label_frequency_``, ``class_prior_`` and ``unlabelled_prior_`` from ``c`` and ``s``."""
    n_p, n = int(s.sum()), s.size
    estimator.label_frequency_ = float(c)
    estimator.class_prior_ = float(np.clip(n_p / (c * n), _PRIOR_CLIP, 1.0 - _PRIOR_CLIP))
    estimator.unlabelled_prior_ = float(np.clip((n_p / c - n_p) / (n - n_p), _PRIOR_CLIP, 1.0 - _PRIOR_CLIP))


class WSVM(PUClassifier):
    """Elkan & Noto's weighted SVM: NTC, ``c``, then an RBF SVC retrained with weights.

    Learned: ``label_frequency_``, ``ntc_`` and ``svc_`` (fitted SVCs), ``n_weighted_rows_``.
    """

    def __init__(self, C: float = 1.0, gamma: Any = "scale", hold_out_ratio: float = 0.1,
                 random_state: int = 0) -> None:
        self.C = C
        self.gamma = gamma
        self.hold_out_ratio = hold_out_ratio
        self.random_state = random_state

    def fit(self, X: Any, s: Any) -> WSVM:
        X, s = self._validate_fit(X, s)
        ntc, c = elkan_noto_ntc(X, s, hold_out_ratio=self.hold_out_ratio, C=self.C, gamma=self.gamma,
                                seed=self.random_state)
        Xu = X[s == 0]
        g = np.clip(ntc.predict_proba(Xu)[:, 1], _G_CLIP, 1.0 - _G_CLIP)
        w = np.clip((1.0 - c) / c * g / (1.0 - g), 0.0, 1.0)
        w[w > 1.0 - _W_ROUNDING] = 1.0  # see _W_ROUNDING
        X_aug = np.vstack([X[s == 1], Xu, Xu])
        y_aug = np.concatenate([np.ones(int(s.sum())), np.ones(Xu.shape[0]), np.zeros(Xu.shape[0])])
        weight = np.concatenate([np.ones(int(s.sum())), w, 1.0 - w])
        keep = weight > 0
        if not np.any(keep & (y_aug == 0)):
            raise NoModelError(f"WSVM: with c estimated at {c:.3g} every unlabelled row is weighted fully positive, "
                              "so no negative is left to train on")
        self.label_frequency_, self.ntc_ = c, ntc
        self.svc_ = _svc(self.C, self.gamma, self.random_state, _n_folds(y_aug[keep])).fit(
            X_aug[keep], y_aug[keep], sample_weight=weight[keep])
        self.n_weighted_rows_ = int(keep.sum())
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self.svc_.calibrated_classifiers_[0].estimator.decision_function(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self.svc_.predict_proba(X)
