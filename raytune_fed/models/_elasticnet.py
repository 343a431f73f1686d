"""Elastic-net logistic regression with glmnet's objective, solved by skglm's ProxNewton.

For labels ``y_i`` in ``{-1, +1}`` the estimator minimises over ``(b0, b)``::

    1/n * sum_i log(1 + exp(-y_i (b0 + x_i . b)))
        + lambda_ * (alpha * ||b||_1 + (1 - alpha) / 2 * ||b||_2^2)

which is glmnet's binomial objective (``alpha`` = glmnet's mixing parameter, ``lambda_``
= glmnet's ``lambda``/``s``) with an unpenalised intercept.  glmnet standardises the
features first (``standardize=TRUE``); in the learner registry that is the
``StandardScaler`` step before this estimator, so this class solves the problem on
whatever columns it receives.

Why ProxNewton: ``experiments/bench_learners.py`` timed scikit-learn's saga, skglm's
AndersonCD and ProxNewton, glum and python-glmnet on 120 x 1,000 data with 10-fold CV
over the search space.  ProxNewton was the fastest (mean 0.03 s per 10-fold CV, worst
0.08 s, vs 0.15 / 0.75 s for glmnet at its default threshold) and came within 2.5e-6
(relative) of the best objective any solver reached; saga stopped far from the optimum.
Its one cost is numba compilation (about 8 s, once per process); :func:`warm_up` pays it
up front, e.g. when a long-lived actor starts.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from scipy.special import expit
from skglm.datafits import Logistic
from skglm.penalties import L1_plus_L2
from skglm.solvers import ProxNewton
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from raytune_fed.errors import ConfigError

# Newton steps allowed per working set; with ``max_iter`` outer iterations this bounds the
# work of one fit.  The measured fits need at most ~13 outer iterations at tol=1e-8.
_MAX_NEWTON_STEPS = 200


class ElasticNetLogistic(ClassifierMixin, BaseEstimator):
    """Binary elastic-net logistic regression (glmnet semantics).

    Parameters
    ----------
    alpha : float in [0, 1]
        L1 share of the penalty (glmnet's ``alpha``): 1 is the lasso, 0 is ridge.
    lambda_ : float > 0
        Penalty strength (glmnet's ``lambda``; named with a trailing underscore only
        because ``lambda`` is a Python keyword).
    tol : float > 0
        Stop when the largest violation of the optimality conditions (distance of the
        gradient to the subdifferential, intercept included) is at most ``tol``.
    max_iter : int >= 1
        Cap on ProxNewton's outer (working-set) iterations; each runs at most
        200 Newton steps, so one fit is time bounded.  Reaching the cap emits a
        ``ConvergenceWarning`` and sets ``converged_ = False``.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    n_iter_ : int
        Outer iterations run.
    converged_ : bool
    n_features_in_ : int
    """

    def __init__(self, alpha: float = 1.0, lambda_: float = 1.0, tol: float = 1e-6, max_iter: int = 50):
        self.alpha = alpha
        self.lambda_ = lambda_
        self.tol = tol
        self.max_iter = max_iter

    def __sklearn_is_fitted__(self) -> bool:
        # ``lambda_`` is a parameter, so the default "any attribute ending in _" test would
        # call an unfitted estimator fitted.
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _check_params(self) -> None:
        def real(name, value, ok, rule):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
                    or not ok(float(value)):
                raise ConfigError(f"ElasticNetLogistic: {name} must be {rule}, got {value!r}")

        real("alpha", self.alpha, lambda v: 0.0 <= v <= 1.0, "a real number in [0, 1]")
        real("lambda_", self.lambda_, lambda v: v > 0.0, "a finite real number > 0")
        real("tol", self.tol, lambda v: v > 0.0, "a finite real number > 0")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral) or self.max_iter < 1:
            raise ConfigError(f"ElasticNetLogistic: max_iter must be an integer >= 1, got {self.max_iter!r}")

    def fit(self, X, y, coef_init=None):
        """Fit on ``(X, y)``; ``y`` must hold exactly two classes.

        ``coef_init``, if given, is a ``(coef, intercept)`` pair (e.g. another fit's
        ``coef_`` and ``intercept_``) to start the solver from instead of zero.
        """
        self._check_params()
        # Fortran order: the solver reads columns, and one memory layout means numba
        # compiles its kernels once per process.
        X, y = validate_data(self, X, y, dtype=np.float64, order="F")
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size == 1:
            raise ValueError(f"ElasticNetLogistic needs 2 classes in y, got 1 class: {classes.tolist()}")
        if classes.size > 2:
            raise ValueError(
                f"Only binary classification is supported: ElasticNetLogistic needs exactly 2 classes "
                f"in y, got {classes.size}: {classes[:10].tolist()}")
        self.classes_ = classes
        target = np.where(y == classes[1], 1.0, -1.0)
        n_features = X.shape[1]

        w_init = xw_init = None
        if coef_init is not None:
            coef, intercept = coef_init
            coef = np.asarray(coef, dtype=np.float64).ravel()
            if coef.size != n_features:
                raise ValueError(f"coef_init has {coef.size} coefficients, X has {n_features} features")
            w_init = np.append(coef, float(np.ravel(intercept)[0]))
            xw_init = X @ w_init[:-1] + w_init[-1]

        solver = ProxNewton(fit_intercept=True, tol=float(self.tol), max_iter=int(self.max_iter),
                            max_pn_iter=_MAX_NEWTON_STEPS)
        penalty = L1_plus_L2(alpha=float(self.lambda_), l1_ratio=float(self.alpha))
        with warnings.catch_warnings():
            # replaced by our own warning below, which names the parameters
            warnings.simplefilter("ignore", ConvergenceWarning)
            w, p_objs, stop_crit = solver.solve(X, target, Logistic(), penalty, w_init, xw_init)

        self.coef_ = w[np.newaxis, :n_features].copy()
        self.intercept_ = np.array([w[n_features]])
        self.n_iter_ = len(p_objs)
        self.converged_ = bool(stop_crit <= self.tol)
        if not self.converged_:
            warnings.warn(
                f"ElasticNetLogistic(alpha={self.alpha!r}, lambda_={self.lambda_!r}) stopped after "
                f"max_iter={self.max_iter} iterations with optimality violation {stop_crit:.3g} > "
                f"tol={self.tol!r}", ConvergenceWarning, stacklevel=2)
        return self

    def decision_function(self, X) -> np.ndarray:
        """Linear score ``b0 + X b``; positive means ``classes_[1]``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_[0] + self.intercept_[0]

    def predict_proba(self, X) -> np.ndarray:
        """Columns are ``P(classes_[0])`` and ``P(classes_[1])``."""
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X) -> np.ndarray:
        scores = self.decision_function(X)
        return self.classes_[(scores > 0).astype(int)]

    def objective(self, X, y) -> float:
        """The penalised objective at the fitted coefficients, on ``(X, y)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        sign = np.where(np.asarray(y) == self.classes_[1], 1.0, -1.0)
        coef = self.coef_[0]
        loss = np.mean(np.logaddexp(0.0, -sign * (X @ coef + self.intercept_[0])))
        penalty = self.alpha * np.abs(coef).sum() + (1.0 - self.alpha) / 2.0 * (coef @ coef)
        return float(loss + self.lambda_ * penalty)


def warm_up() -> None:
    """Compile the solver's numba kernels now (a few seconds, once per process)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = np.arange(20) % 2
    ElasticNetLogistic(alpha=0.5, lambda_=0.1).fit(X, y)
