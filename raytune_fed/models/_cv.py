"""Stratified K-fold cross-validation: the open-box objective (10-fold CV mmce in RFMS).

Fold count: if the rarer class has fewer rows than ``n_folds``, the count drops to that
number of rows (every fold must see both classes in training); with fewer than 2 rows
in a class there is no cross-validation and :class:`ConfigError` is raised.  The count
actually used is reported in :attr:`CVResult.n_folds`.

Convergence warnings raised while fitting a fold are silenced (a tuning run would print
thousands) and counted in :attr:`CVResult.n_not_converged`; other warnings pass through.

Warm starts: for the elastic net, fold k+1 can start from fold k's coefficients
(``warm_start=True``).  ``experiments/bench_learners.py`` measured it and found it slower
than a cold start with skglm's ProxNewton (a dense start enlarges the working sets), so
it is off by default.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import VarianceThreshold
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from raytune_fed.errors import ConfigError, DatasetError
from raytune_fed.models._elasticnet import ElasticNetLogistic
from raytune_fed.metrics.scorers import misclassification
from raytune_fed.models._registry import Learner


@dataclass(frozen=True)
class CVResult:
    """Outcome of one cross-validation: mean error and what happened per fold."""

    error: float
    fold_errors: tuple[float, ...]
    n_folds: int
    n_not_converged: int


def stratified_folds(y, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train, test)`` index pairs of a shuffled stratified K-fold (see module notes)."""
    if isinstance(n_folds, bool) or not isinstance(n_folds, numbers.Integral) or n_folds < 2:
        raise ConfigError(f"n_folds must be an integer >= 2, got {n_folds!r}")
    y = np.asarray(y)
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise ConfigError(f"cross-validation needs at least 2 classes in y, got {classes.tolist()}")
    if counts.min() < 2:
        raise ConfigError(
            f"cross-validation needs at least 2 rows of every class, class {classes[counts.argmin()].tolist()!r} "
            f"has {counts.min()}")
    n_used = int(min(n_folds, counts.min()))
    splitter = StratifiedKFold(n_splits=n_used, shuffle=True, random_state=_check_seed(seed))
    return list(splitter.split(np.zeros((y.shape[0], 1)), y))


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed) % 2 ** 32


def _estimator_for(learner_or_estimator: Any, config: Mapping[str, Any] | None, model_seed: int):
    if isinstance(learner_or_estimator, Learner):
        if config is None:
            raise ConfigError(f"learner {learner_or_estimator.name!r} needs a configuration")
        return learner_or_estimator.build(config, seed=model_seed)
    if isinstance(learner_or_estimator, BaseEstimator):
        estimator = clone(learner_or_estimator)
        if config:
            estimator.set_params(**config)
        return estimator
    raise ConfigError(f"expected a Learner or a scikit-learn estimator, got {type(learner_or_estimator).__qualname__}")


def _columns_kept(template, X_train: np.ndarray) -> np.ndarray:
    """Columns the final step sees: the pipeline's constant-feature filter, if any."""
    if isinstance(template, Pipeline):
        first = template.steps[0][1]
        if type(first) is VarianceThreshold and first.threshold == 0.0:
            return np.ptp(X_train, axis=0) > 0
    return np.ones(X_train.shape[1], dtype=bool)


def cross_validate(learner_or_estimator: Learner | BaseEstimator, config: Mapping[str, Any] | None, X, y, *,
                   n_folds: int = 10, seed: int, warm_start: bool = False) -> CVResult:
    """Stratified K-fold CV of a learner configuration (or an estimator with ``set_params``).

    ``seed`` is the root seed: one child stream shuffles the folds, another seeds the
    learner (the same model seed in every fold).
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise DatasetError(f"need 2-D X and 1-D y with the same number of rows, got X {X.shape}, y {y.shape}")
    fold_seq, model_seq = np.random.SeedSequence(_check_seed(seed)).spawn(2)
    folds = stratified_folds(y, n_folds, int(fold_seq.generate_state(1)[0]))
    template = _estimator_for(learner_or_estimator, config, int(model_seq.generate_state(1)[0]))
    final = template.steps[-1][1] if isinstance(template, Pipeline) else template
    if warm_start:
        if type(final) is not ElasticNetLogistic:
            raise ConfigError(f"warm_start is only supported for ElasticNetLogistic, not {type(final).__qualname__}")
        inner = [e for _, e in template.steps[:-1]] if isinstance(template, Pipeline) else []
        if not all(type(e) is StandardScaler or (type(e) is VarianceThreshold and e.threshold == 0.0)
                   for e in inner):
            raise ConfigError(f"warm_start needs the columns to stay aligned across folds; steps {inner} may move them")
    init_key = f"{template.steps[-1][0]}__coef_init" if isinstance(template, Pipeline) else "coef_init"

    errors: list[float] = []
    n_not_converged = 0
    previous = None  # (coef over all columns of X, intercept) of the last fold
    for train, test in folds:
        model = clone(template)
        fit_params = {}
        if previous is not None:
            kept = _columns_kept(template, X[train])
            fit_params[init_key] = (previous[0][kept], previous[1])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(X[train], y[train], **fit_params)
        not_converged = False
        for w in caught:
            if issubclass(w.category, ConvergenceWarning):
                not_converged = True
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        n_not_converged += not_converged
        if warm_start:
            fitted = model.steps[-1][1] if isinstance(model, Pipeline) else model
            coef = np.zeros(X.shape[1])
            coef[_columns_kept(template, X[train])] = fitted.coef_[0]
            previous = (coef, fitted.intercept_)
        errors.append(misclassification(y[test], model.predict(X[test])))
    return CVResult(error=float(np.mean(errors)), fold_errors=tuple(errors), n_folds=len(folds),
                    n_not_converged=n_not_converged)


def cross_validated_error(learner_or_estimator: Learner | BaseEstimator, config: Mapping[str, Any] | None, X, y,
                          *, n_folds: int = 10, seed: int, warm_start: bool = False) -> float:
    """Mean misclassification over stratified folds (see :func:`cross_validate`)."""
    return cross_validate(learner_or_estimator, config, X, y, n_folds=n_folds, seed=seed,
                          warm_start=warm_start).error
