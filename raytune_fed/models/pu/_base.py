"""What every PU classifier of the package shares: input checks and the score conventions.

``fit(X, s)`` takes ``s`` = 1 for a labelled positive and 0 for an unlabelled row (both
must occur).  ``decision_function`` is the learner's score ``f(x)`` (positive means
"positive class"); ``predict`` is ``f(x) > 0``; ``predict_proba`` is the sigmoid of
``f`` unless a learner calibrates its own (WSVM: Platt scaling).  ``classes_`` is
``[0, 1]``: a prediction is the *true* class (1 = positive), not the label indicator.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from raytune_fed._checks import check_float
from raytune_fed.errors import ConfigError
from raytune_fed.metrics.pu import check_prior

__all__ = ["PUClassifier", "check_positive", "check_prior", "check_pu_labels"]


def check_positive(name: str, value: Any) -> float:
    """A finite number > 0 (``check_float`` allows 0)."""
    if check_float(name, value, 0.0) == 0.0:
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_pu_labels(s: Any) -> np.ndarray:
    """``s`` as int8 0/1 with both values present, else :class:`ConfigError` naming what was found.

    The messages follow scikit-learn's wording where its checks look for it ("Unknown
    label type", "Only binary classification is supported", "one class").
    """
    try:
        kind = type_of_target(s, input_name="s", raise_unknown=True)
    except ValueError as exc:
        raise ConfigError(f"{exc}; s must hold 1 (labelled positive) and 0 (unlabelled)") from None
    arr = np.asarray(s)
    found = np.unique(arr)
    if kind == "continuous":
        raise ConfigError(f"Unknown label type: s must hold 1 (labelled positive) and 0 (unlabelled), got continuous "
                          f"values such as {found[:3].tolist()}")
    if kind not in ("binary", "multiclass") or arr.ndim != 1:
        raise ConfigError(f"s must be a 1-D array of 1 (labelled positive) and 0 (unlabelled), got {kind} of shape "
                          f"{arr.shape}")
    if kind == "multiclass" and found.size > 2:
        raise ConfigError(f"Only binary classification is supported. s must hold 1 (labelled positive) and 0 "
                          f"(unlabelled), got values {found[:5].tolist()}")
    if arr.dtype.kind not in "biuf" or not np.isin(found, (0, 1)).all():
        raise ConfigError(f"s must hold 1 (labelled positive) and 0 (unlabelled), got values {found[:5].tolist()}")
    if found.size < 2:
        raise ConfigError(f"s needs labelled (1) and unlabelled (0) rows; got one class only ({found.tolist()})")
    return arr.astype(np.int8)


class PUClassifier(ClassifierMixin, BaseEstimator, abc.ABC):
    """Base of the PU classifiers: validation, ``classes_``, ``predict`` and ``predict_proba``."""

    def _validate_fit(self, X: Any, s: Any) -> tuple[np.ndarray, np.ndarray]:
        X, s = validate_data(self, X, s, dtype=np.float64)
        s = check_pu_labels(s)
        self.classes_ = np.array([0, 1])
        return X, s

    def _validate_predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, dtype=np.float64, reset=False)

    @abc.abstractmethod
    def decision_function(self, X: Any) -> np.ndarray:
        """Real-valued scores; larger means more likely positive."""

    def predict_proba(self, X: Any) -> np.ndarray:
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        return (self.decision_function(X) > 0).astype(np.int64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.poor_score = True   # scikit-learn's checks feed fully labelled data, not PU data
        return tags
