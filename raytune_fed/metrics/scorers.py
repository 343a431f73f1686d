"""Scorers: one copy of each loss the package reports, computed from labels and predictions.

Every function takes arrays (never a model), checks their shapes once and returns a plain
``float``.  Cross-validation, the restricted sites and the reports all call these.

* :func:`misclassification` - share of wrong labels (mlr's ``mmce``);
* :func:`auc` - area under the ROC curve from scores, via ranks (ties count one half),
  ``O(n log n)``;
* :func:`log_loss` - mean binary cross-entropy of positive-class probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import rankdata

from raytune_fed.errors import DatasetError


def _pair(y_true: Any, other: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y_true)
    v = np.asarray(other)
    if y.ndim != 1 or v.shape != y.shape:
        raise DatasetError(f"y_true and {what} must be 1-D arrays of the same length, got shapes {y.shape} "
                           f"and {v.shape}")
    if y.shape[0] == 0:
        raise DatasetError(f"cannot score 0 rows ({what})")
    return y, v


def misclassification(y_true: Any, y_pred: Any) -> float:
    """Share of rows with ``y_pred != y_true``."""
    y, p = _pair(y_true, y_pred, "y_pred")
    return float(np.mean(p != y))


def auc(y_true: Any, scores: Any, *, positive: Any = 1) -> float:
    """ROC AUC of ``scores`` for class ``positive`` against every other label (Mann-Whitney U)."""
    y, s = _pair(y_true, scores, "scores")
    s = s.astype(float)
    if not np.all(np.isfinite(s)):
        raise DatasetError("scores must be finite to compute an AUC")
    pos = y == positive
    n_pos = int(pos.sum())
    n_neg = y.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        raise DatasetError(f"AUC needs both classes; got {n_pos} rows of class {positive!r} and {n_neg} others")
    ranks = rankdata(s)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def log_loss(y_true: Any, proba: Any, *, positive: Any = 1, eps: float = 1e-15) -> float:
    """Mean of ``-log p(y)`` with ``proba`` the probability of class ``positive`` (clipped by ``eps``)."""
    y, p = _pair(y_true, proba, "proba")
    p = np.clip(p.astype(float), eps, 1.0 - eps)
    if not np.all(np.isfinite(p)):
        raise DatasetError("probabilities must be finite to compute a log-loss")
    pos = y == positive
    return float(-np.mean(np.where(pos, np.log(p), np.log1p(-p))))
