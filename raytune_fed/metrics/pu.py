"""Evaluators for positive-unlabelled (PU) model selection (ODE paper, section 3).

Every function takes the PU indicators ``s`` (1 = labelled positive, 0 = unlabelled) of
a validation set and a model's scores on it.  Larger is better for the two class-prior
free evaluators; the risks are losses.

* :func:`auc_pu` - AUC of the labelled rows against the unlabelled ones (eq. 8 with P and
  U), through :func:`raytune_fed.metrics.scorers.auc` (ranks, ``O(n log n)``).  By
  Theorem 1, ``AUC_PN = AUC_PU / (1 - pi) - pi / (2 (1 - pi))`` with ``pi`` the share of
  positives among the unlabelled rows: an increasing map, so ranking models by AUC_PU
  needs no ``pi``.
* :func:`ipm_pu` - ``mean_P h - mean_U h`` (eq. 6 with P and U), ``IPM_PN = IPM_PU / (1 - pi)``.
  ``h`` must lie in ``[0, 1]``; :func:`bounded_scores` gives the ``h`` model selection
  uses: the sigmoid of the decision values *standardised over the validation rows*.
  Bounded because eq. (4) takes the supremum over bounded functions; standardised because
  a plain sigmoid still rewards scale: a configuration with a weaker ridge penalty spreads
  its scores, saturates the sigmoid and gains IPM without separating the classes any better
  (on spambase at c = 0.01 the plain-sigmoid IPM of the 100 uPU configurations correlated
  -0.17 to 0.57 with their test AUC and picked the least regularised; standardised, 0.50 to
  0.94).  Both maps are monotone, so AUC_PU is the same on either scale.
* :func:`upu_risk`, :func:`nnpu_risk` - the unbiased (eq. 2) and non-negative (eq. 3) PU
  risks of a decision function; they need ``pi``.  The default zero-one loss gives
  ``2 pi err_P + err_U - pi`` and ``pi err_P + max(0, err_U - pi (1 - err_P))``.
* :class:`DensityRatio` and :func:`pu_score` - the control variate of section 3.5.

Control variate.  ``R_PU`` is a mean over the labelled rows of per-row contributions
``a(x)`` (:func:`pu_contributions`: ``h(x) - mean_U h`` for the IPM, the share of
unlabelled rows scored below ``x`` for the AUC, ties one half).  A non-traditional
classifier ``g`` (labelled vs unlabelled, trained on the *training* split) gives the
density ratio ``w(x) = p_U(x) / p_P(x) = (1 - g(x)) / g(x) * n_P / n_U``, whose mean
over positives is exactly 1 (eq. 13).  The paper writes ``(1 - g) / g``, which is that
ratio only for a ``g`` trained on balanced classes; the ``n_P / n_U`` factor (the counts
``g`` was trained on) makes it hold for the imbalanced PU training split.  Then
``R* = mean(a) + eta (mean(w) - 1)`` with ``eta = -Cov(a, w) / Var(w)``, both estimated
over the labelled rows of the validation set, which is the regression estimate of the
paper's ``-Cov(R_PU, w) / Var(w)`` (a mean over ``n_P`` rows has ``1 / n_P`` of the
per-row covariance and variance).  With fewer than two labelled validation rows, or
``w`` constant on them, ``eta = 0`` and ``R* = R_PU``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit

from raytune_fed.errors import ConfigError, DatasetError
from raytune_fed.metrics.scorers import auc

EVALUATORS = ("ipm", "auc")
RISK_LOSSES = ("zero_one", "sigmoid")
_G_CLIP = 1e-6


def _labelled_mask(s: Any) -> np.ndarray:
    s = np.asarray(s)
    if s.ndim != 1 or not np.isin(s, (0, 1)).all():
        raise DatasetError(f"s must hold 1 (labelled) and 0 (unlabelled), got values {np.unique(s)[:5].tolist()}")
    n_p = int(s.sum())
    if n_p == 0 or n_p == s.shape[0]:
        raise DatasetError(f"a PU evaluator needs labelled and unlabelled rows; got {n_p} labelled of {s.shape[0]}")
    return s.astype(bool)


def _pu_pair(s: Any, scores: Any, what: str = "scores") -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(s)
    v = np.asarray(scores, dtype=float)
    if s.ndim != 1 or v.shape != s.shape:
        raise DatasetError(f"s and {what} must be 1-D arrays of the same length, got shapes {s.shape} and {v.shape}")
    labelled = _labelled_mask(s)
    if not np.isfinite(v).all():
        raise DatasetError(f"{what} must be finite")
    return labelled, v


def _bounded(v: np.ndarray) -> np.ndarray:
    if v.min() < 0.0 or v.max() > 1.0:
        raise DatasetError(f"IPM_PU needs scores in [0, 1] (predict_proba[:, 1], the sigmoid of the decision "
                           f"function); got range [{v.min():.4g}, {v.max():.4g}]")
    return v


def bounded_scores(decision: Any) -> np.ndarray:
    """``sigmoid((f - mean f) / sd f)`` over the given rows: scale-free scores in (0, 1) for IPM_PU.

    Constant decision values map to 0.5 everywhere.
    """
    f = np.asarray(decision, dtype=float)
    if f.ndim != 1 or f.size == 0 or not np.isfinite(f).all():
        raise DatasetError(f"decision values must be a non-empty finite 1-D array, got shape {f.shape}")
    sd = float(f.std())
    return expit((f - f.mean()) / sd) if sd > 0 else np.full(f.shape, 0.5)


def auc_pu(s: Any, scores: Any) -> float:
    """AUC of labelled (``s == 1``) against unlabelled rows; no class prior needed."""
    labelled, v = _pu_pair(s, scores)
    return auc(labelled.astype(np.int8), v)


def ipm_pu(s: Any, scores: Any) -> float:
    """``mean(scores | labelled) - mean(scores | unlabelled)`` for scores in ``[0, 1]``."""
    labelled, v = _pu_pair(s, scores)
    _bounded(v)
    return float(v[labelled].mean() - v[~labelled].mean())


def pu_contributions(s: Any, scores: Any, evaluator: str = "ipm") -> np.ndarray:
    """Per-labelled-row terms ``a(x)`` whose mean is the evaluator (in the order of ``s``)."""
    _check_evaluator(evaluator)
    labelled, v = _pu_pair(s, scores)
    p, u = v[labelled], v[~labelled]
    if evaluator == "ipm":
        _bounded(v)
        return p - u.mean()
    u = np.sort(u)
    below = np.searchsorted(u, p, side="left")
    ties = np.searchsorted(u, p, side="right") - below
    return (below + 0.5 * ties) / u.size


def _check_evaluator(evaluator: str) -> None:
    if evaluator not in EVALUATORS:
        raise ConfigError(f"unknown evaluator {evaluator!r}; known evaluators: {list(EVALUATORS)}")


def check_prior(prior: Any) -> float:
    """A class prior in ``(0, 1)``: the share of positives among the unlabelled rows."""
    if isinstance(prior, (bool, np.bool_)) or not isinstance(prior, (int, float, np.number)) \
            or not 0.0 < float(prior) < 1.0:
        raise ConfigError(f"prior must be a number in (0, 1), got {prior!r}")
    return float(prior)


def _risk_terms(s: Any, decision: Any, prior: Any, loss: str) -> tuple[float, float, float, float]:
    """``pi``, ``R_p^+``, ``R_p^-``, ``R_u^-`` for a decision function (positive iff > 0)."""
    if loss not in RISK_LOSSES:
        raise ConfigError(f"unknown loss {loss!r}; known losses: {list(RISK_LOSSES)}")
    pi = check_prior(prior)
    labelled, f = _pu_pair(s, decision, "decision values")
    fp, fu = f[labelled], f[~labelled]
    if loss == "zero_one":
        return pi, float(np.mean(fp <= 0)), float(np.mean(fp > 0)), float(np.mean(fu > 0))
    return pi, float(np.mean(expit(-fp))), float(np.mean(expit(fp))), float(np.mean(expit(fu)))


def upu_risk(s: Any, decision: Any, prior: float, *, loss: str = "zero_one") -> float:
    """Unbiased PU risk (eq. 2) ``pi R_p^+ - pi R_p^- + R_u^-``; ``prior`` = pi among the unlabelled."""
    pi, rp_pos, rp_neg, ru_neg = _risk_terms(s, decision, prior, loss)
    return pi * rp_pos - pi * rp_neg + ru_neg


def nnpu_risk(s: Any, decision: Any, prior: float, *, loss: str = "zero_one") -> float:
    """Non-negative PU risk (eq. 3) ``pi R_p^+ + max(0, R_u^- - pi R_p^-)``."""
    pi, rp_pos, rp_neg, ru_neg = _risk_terms(s, decision, prior, loss)
    return pi * rp_pos + max(0.0, ru_neg - pi * rp_neg)


class DensityRatio:
    """The density ratio ``w = p_U / p_P`` of section 3.5, from a cross-fitted non-traditional classifier.

    ``g`` (labelled vs unlabelled: a logistic regression on standardised features) is fitted
    on ``n_folds`` stratified folds of the *training* rows (``min(n_folds, n_labelled)``
    folds; at least two labelled rows are needed).  Fold model ``k`` gives
    ``w_k(x) = (1 - g_k(x)) / g_k(x) * n_P,k / n_U,k`` with the labelled and unlabelled
    counts it was trained on, the density ratio for a classifier trained on imbalanced
    classes.  A misspecified ``g`` makes the mean of ``w_k`` over positives differ from the
    1 of eq. 13 (0.43-0.52 on satimage at c = 0.01 for a single calibrated fit), so ``w`` is
    divided by ``normaliser_``: the mean, over the *training* labelled rows, of ``w_k`` from
    the fold model that did not see the row.  The normaliser is thus estimated without the
    validation rows the ratio is applied to, and ``ratio(X)`` (the fold models' mean ``w``
    over the normaliser) has mean 1 over positives it has not seen, up to the normaliser's
    sampling error (``normaliser_se_``, its standard error).  The logistic regression is
    strongly regularised (``C = 0.01`` on standardised features): with ``C = 1`` the mean of
    the normalised ratio over the test positives of the paper's datasets ranged from 0.07 to 59
    (a few labelled rows in regions the unlabelled rows hardly reach give huge odds), with
    ``C = 0.01`` from 0.80 to 1.24 (``docs/pu.md``).
    """

    def __init__(self, *, seed: int, n_folds: int = 5, C: float = 0.01) -> None:
        self.seed = seed
        self.n_folds = n_folds
        self.C = C

    def fit(self, X: Any, s: Any) -> DensityRatio:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        labelled = _labelled_mask(s)
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[0] != labelled.size:
            raise DatasetError(f"X must be 2-D with one row per entry of s, got shape {X.shape} for {labelled.size}")
        if isinstance(self.n_folds, bool) or not isinstance(self.n_folds, int) or self.n_folds < 2:
            raise ConfigError(f"n_folds must be an integer >= 2, got {self.n_folds!r}")
        n_p = int(labelled.sum())
        if n_p < 2:
            raise DatasetError(f"the density ratio needs >= 2 labelled training rows (one to fit on, one to "
                               f"normalise with), got {n_p}")
        folds = StratifiedKFold(min(self.n_folds, n_p), shuffle=True, random_state=self.seed)
        self.models_: list[tuple[Any, float]] = []
        held_out = np.empty(labelled.size)
        for fit_rows, held in folds.split(X, labelled):
            model = make_pipeline(StandardScaler(), LogisticRegression(C=self.C, max_iter=1000))
            model.fit(X[fit_rows], labelled[fit_rows].astype(np.int8))
            n_fit_p = int(labelled[fit_rows].sum())
            odds = n_fit_p / float(fit_rows.size - n_fit_p)
            self.models_.append((model, odds))
            held_out[held] = _odds_ratio(model, X[held], odds)
        self.normaliser_ = float(held_out[labelled].mean())
        self.normaliser_se_ = float(held_out[labelled].std(ddof=1) / np.sqrt(n_p))
        return self

    def raw_ratio(self, X: Any) -> np.ndarray:
        """The fold models' mean ``(1 - g) / g * n_P / n_U``, not normalised."""
        X = np.asarray(X, dtype=float)
        return np.mean([_odds_ratio(model, X, odds) for model, odds in self.models_], axis=0)

    def ratio(self, X: Any) -> np.ndarray:
        """``w(x)`` with mean 1 over unseen positives: :meth:`raw_ratio` over ``normaliser_``."""
        return self.raw_ratio(X) / self.normaliser_


def _odds_ratio(model: Any, X: np.ndarray, odds: float) -> np.ndarray:
    g = np.clip(model.predict_proba(X)[:, 1], _G_CLIP, 1.0 - _G_CLIP)
    return (1.0 - g) / g * odds


def control_variate(contributions: Any, ratio: Any, *, min_rows: int = 2,
                    shrink: bool = False) -> tuple[float, float]:
    """``(R*, eta)`` from per-labelled-row contributions and density ratios (same order).

    ``eta = -Cov(a, w) / Var(w)`` over the rows; with ``shrink`` it is multiplied by
    ``max(0, 1 - se^2 / eta^2)`` (``se`` the slope's standard error; a positive-part
    James-Stein factor: 0 when the slope is within one standard error of 0, and needing three
    rows).  Fewer than ``min_rows`` rows, or ``w`` constant on them, give ``eta = 0``.
    """
    a = np.asarray(contributions, dtype=float)
    w = np.asarray(ratio, dtype=float)
    if a.ndim != 1 or w.shape != a.shape or a.size == 0:
        raise DatasetError(f"contributions and ratio must be non-empty 1-D arrays of one length, "
                           f"got shapes {a.shape} and {w.shape}")
    if not (np.isfinite(a).all() and np.isfinite(w).all()):
        raise DatasetError("contributions and density ratios must be finite")
    n = a.size
    eta = 0.0
    if n >= max(2, min_rows, 3 if shrink else 2):
        var = float(np.var(w, ddof=1))
        if var > 0.0:
            slope = float(np.cov(a, w, ddof=1)[0, 1]) / var
            eta = -slope
            if shrink:
                resid = a - a.mean() - slope * (w - w.mean())
                se2 = float(resid @ resid) / (n - 2) / ((n - 1) * var)
                eta *= max(0.0, 1.0 - se2 / (slope * slope)) if slope != 0.0 else 0.0
    return float(a.mean() + eta * (w.mean() - 1.0)), eta


def pu_score(s: Any, scores: Any, *, evaluator: str = "ipm", ratio: Any = None, shrink: bool = False,
             min_rows: int = 2) -> float:
    """``R_PU`` of ``evaluator``, or the control-variate ``R*`` when ``ratio`` is given.

    ``ratio`` holds the density ratio :meth:`DensityRatio.ratio` at the *labelled* rows of
    ``s``, in their order (``ratio = dr.ratio(X_val[s_val == 1])``); ``shrink`` and
    ``min_rows`` as for :func:`control_variate`.
    """
    a = pu_contributions(s, scores, evaluator)
    if ratio is None:
        return float(a.mean())
    w = np.asarray(ratio, dtype=float)
    if w.shape != a.shape:
        raise DatasetError(f"ratio needs one value per labelled row ({a.size}), got shape {w.shape}")
    return control_variate(a, w, min_rows=min_rows, shrink=shrink)[0]
