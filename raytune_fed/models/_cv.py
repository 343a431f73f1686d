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

Fold cache: every configuration of a unit is cross-validated on the same folds, and a
pipeline's steps before the final estimator (constant-feature filter, scaling) do not
depend on the configuration.  :class:`CVPlan` computes the folds of one
``(X, y, n_folds, seed)`` once and, per distinct preprocessing, each fold's transformed
train and test matrices; ``cross_validate(..., cache=plan)`` then fits only the final
estimator per fold.  The matrices are the ones the pipeline would compute (same steps,
same fold rows, ``fit`` then ``transform``), so every fold error is identical.
"""

from __future__ import annotations

import numbers
import threading
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import VarianceThreshold
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from raytune_fed.cores import available_cores
from raytune_fed.errors import ConfigError, DatasetError
from raytune_fed.metrics.scorers import misclassification
from raytune_fed.models._elasticnet import ElasticNetLogistic
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


class CVPlan:
    """The folds of one ``(X, y, n_folds, seed)`` and, per preprocessing, each fold's matrices.

    Build it once per data set and CV seed (an RFMS unit has one) and pass it to
    :func:`cross_validate` as ``cache``.  Folds and the learner's model seed are drawn
    exactly as :func:`cross_validate` draws them without a cache.  Preprocessed matrices
    are computed on first use for each distinct list of preprocessing steps (their
    classes and parameters) and kept: about ``n_folds * n_rows * n_features`` floats per
    distinct preprocessing.
    """

    def __init__(self, X, y, *, n_folds: int = 10, seed: int) -> None:
        X, y = _check_xy(X, y)
        self.X, self.y = X, y
        self.n_folds_requested = n_folds
        self.seed = _check_seed(seed)
        fold_seq, model_seq = np.random.SeedSequence(self.seed).spawn(2)
        self.folds = tuple(stratified_folds(y, n_folds, int(fold_seq.generate_state(1)[0])))
        self.model_seed = int(model_seq.generate_state(1)[0])
        self._prepared: dict[tuple, tuple[tuple[np.ndarray, np.ndarray], ...]] = {}

    @property
    def n_folds(self) -> int:
        """The fold count actually used (see the module notes)."""
        return len(self.folds)

    def prepared(self, steps: list) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Per fold, ``(X_train, X_test)`` after fitting ``steps`` (unfitted transformers) on the fold's train rows."""
        key = tuple((type(step), repr(sorted(step.get_params(deep=False).items()))) for step in steps)
        if key not in self._prepared:
            out = []
            for train, test in self.folds:
                X_train, X_test = self.X[train], self.X[test]
                for step in steps:
                    fitted = clone(step).fit(X_train, self.y[train])
                    X_train, X_test = fitted.transform(X_train), fitted.transform(X_test)
                out.append((X_train, X_test))
            self._prepared[key] = tuple(out)
        return self._prepared[key]

    def check_matches(self, X: np.ndarray, y: np.ndarray, n_folds: int, seed: int) -> None:
        if (n_folds, _check_seed(seed)) != (self.n_folds_requested, self.seed):
            raise ConfigError(f"the CV cache was built for n_folds={self.n_folds_requested}, seed={self.seed}; "
                              f"got n_folds={n_folds}, seed={seed}")
        same_x = X is self.X or (X.shape == self.X.shape and np.array_equal(X, self.X))
        if not same_x or not (y is self.y or np.array_equal(y, self.y)):
            raise ConfigError(f"the CV cache was built for other data (X {self.X.shape}), got X {X.shape}")


def _check_xy(X, y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise DatasetError(f"need 2-D X and 1-D y with the same number of rows, got X {X.shape}, y {y.shape}")
    return X, y


class _FoldWarnings:
    """Counts the folds that raised a ConvergenceWarning (from any thread) and re-emits other warnings.

    ``warnings.catch_warnings`` swaps process-wide state, so it is entered once, by the
    calling thread, around all folds; each fold runs under :meth:`run`, which tags the
    thread with the fold's index so a warning is charged to its fold.  An estimator that
    itself enters ``catch_warnings`` while other folds run can swallow their warnings
    (the filters are process-wide before Python 3.14), so :func:`cross_validate` also
    counts a fold whose model reports ``converged_ = False``.
    """

    def __init__(self) -> None:
        self.not_converged: set[int] = set()
        self._others: list[tuple] = []
        self._fold = threading.local()
        self._lock = threading.Lock()

    def __enter__(self) -> _FoldWarnings:
        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("always", ConvergenceWarning)
        warnings.showwarning = self._show
        return self

    def _show(self, message, category, filename, lineno, file=None, line=None) -> None:
        with self._lock:
            if issubclass(category, ConvergenceWarning):
                self.not_converged.add(getattr(self._fold, "index", -1))
            else:
                self._others.append((message, category, filename, lineno))

    def run(self, index: int, fn, *args):
        self._fold.index = index
        return fn(*args)

    def __exit__(self, *exc) -> None:
        self._catch.__exit__(*exc)
        for message, category, filename, lineno in self._others:
            warnings.warn_explicit(message, category, filename, lineno)


def cross_validate(learner_or_estimator: Learner | BaseEstimator, config: Mapping[str, Any] | None, X, y, *,
                   n_folds: int = 10, seed: int, warm_start: bool = False, cache: CVPlan | None = None) -> CVResult:
    """Stratified K-fold CV of a learner configuration (or an estimator with ``set_params``).

    ``seed`` is the root seed: one child stream shuffles the folds, another seeds the
    learner (the same model seed in every fold).  ``cache`` (a :class:`CVPlan` built for
    the same ``X, y, n_folds, seed``) reuses its folds and preprocessed matrices and fits
    only the final estimator; the result is identical.  The folds run in parallel threads
    when this process holds more than one core (:func:`raytune_fed.cores.available_cores`,
    the grid engine's grant; never with ``warm_start``), again with the same result.
    """
    X, y = _check_xy(X, y)
    if cache is None:
        plan = CVPlan(X, y, n_folds=n_folds, seed=seed)
    else:
        if type(cache) is not CVPlan:
            raise ConfigError(f"cache must be a CVPlan, got {type(cache).__qualname__}")
        if warm_start:
            raise ConfigError("warm_start and cache cannot be combined")
        cache.check_matches(X, y, n_folds, seed)
        plan = cache
    template = _estimator_for(learner_or_estimator, config, plan.model_seed)
    final = template.steps[-1][1] if isinstance(template, Pipeline) else template
    if warm_start:
        if type(final) is not ElasticNetLogistic:
            raise ConfigError(f"warm_start is only supported for ElasticNetLogistic, not {type(final).__qualname__}")
        inner = [e for _, e in template.steps[:-1]] if isinstance(template, Pipeline) else []
        if not all(type(e) is StandardScaler or (type(e) is VarianceThreshold and e.threshold == 0.0)
                   for e in inner):
            raise ConfigError(f"warm_start needs the columns to stay aligned across folds; steps {inner} may move them")
    init_key = f"{template.steps[-1][0]}__coef_init" if isinstance(template, Pipeline) else "coef_init"
    if cache is not None:
        prepared = cache.prepared([e for _, e in template.steps[:-1]] if isinstance(template, Pipeline) else [])
        template = final

    folds = list(enumerate(plan.folds))

    def fit_fold(i: int, train: np.ndarray, test: np.ndarray, fit_params: dict) -> tuple[float, Any]:
        model = clone(template)
        X_train, X_test = prepared[i] if cache is not None else (X[train], X[test])
        model.fit(X_train, y[train], **fit_params)
        return misclassification(y[test], model.predict(X_test)), model

    n_threads = 1 if warm_start else min(available_cores(), len(folds))
    with _FoldWarnings() as caught:
        if n_threads > 1:  # folds are independent: same models, same errors, in fold order
            with ThreadPoolExecutor(n_threads, thread_name_prefix="cv-fold") as pool:
                results = list(pool.map(lambda f: caught.run(f[0], fit_fold, f[0], *f[1], {}), folds))
        else:
            results, previous = [], None  # previous: (coef over all columns of X, intercept) of the last fold
            for i, (train, test) in folds:
                fit_params: dict[str, tuple[np.ndarray, np.ndarray]] = {}
                if previous is not None:
                    kept = _columns_kept(template, X[train])  # warm starts never use a cache
                    fit_params[init_key] = (previous[0][kept], previous[1])
                results.append(caught.run(i, fit_fold, i, train, test, fit_params))
                if warm_start:
                    model = results[-1][1]
                    fitted = model.steps[-1][1] if isinstance(model, Pipeline) else model
                    coef = np.zeros(X.shape[1])
                    coef[_columns_kept(template, X[train])] = fitted.coef_[0]
                    previous = (coef, fitted.intercept_)
    errors = [error for error, _ in results]
    for i, (_, model) in enumerate(results):  # warnings from threads can be lost (see _FoldWarnings): ask the model
        fitted = model.steps[-1][1] if isinstance(model, Pipeline) else model
        if getattr(fitted, "converged_", True) is False:
            caught.not_converged.add(i)
    n_not_converged = len(caught.not_converged)
    return CVResult(error=float(np.mean(errors)), fold_errors=tuple(errors), n_folds=plan.n_folds,
                    n_not_converged=n_not_converged)


def cross_validated_error(learner_or_estimator: Learner | BaseEstimator, config: Mapping[str, Any] | None, X, y,
                          *, n_folds: int = 10, seed: int, warm_start: bool = False,
                          cache: CVPlan | None = None) -> float:
    """Mean misclassification over stratified folds (see :func:`cross_validate`)."""
    return cross_validate(learner_or_estimator, config, X, y, n_folds=n_folds, seed=seed,
                          warm_start=warm_start, cache=cache).error
