"""uPU (du Plessis, Niu & Sugiyama, ICML 2015) with the squared loss, solved in closed form.

What ships.  The 2015 paper's convex uPU needs a loss with ``l(z) - l(-z) = -z``; it
proposes the double hinge (a QP) and the squared loss ``l(z) = (z - 1)^2 / 4`` (closed
form).  This is the squared loss.  With it the uPU risk of ``g(x) = w^T phi(x)`` is
``-pi mean_P g + mean_U (g + 1)^2 / 4``, and with a ridge penalty its minimiser is

    w = (Phi_U^T Phi_U / n_U + lambda I)^{-1} (2 pi mean_P phi - mean_U phi)

(the penalty scaled as in the public ``PU_SL`` implementation).  Why it serves selection
as well as the double hinge: both losses give the *same* unbiased risk up to the term
on the unlabelled scores, the same linear-in-``pi`` role of the labelled rows, and the
same Table-3 hyperparameters (``lambda``, the basis); model selection compares
configurations of one learner with each other, so what matters is that every
configuration is fitted exactly, which the closed form guarantees and an iterative QP
solver (stopped at a tolerance) does not.  It is not the same estimator: where the
double hinge ignores unlabelled rows scored below -1, the squared loss keeps pulling
them towards -1.  ``docs/pu.md`` records this choice.

Bases: ``"lm"`` - the features plus a constant; ``"gauss"`` - Gaussian kernels on up to
``n_basis`` unlabelled rows drawn with ``random_state``, bandwidth ``sigma`` with
``sigma^2`` the median squared distance from the unlabelled rows to the centres (the
median heuristic), plus a constant.  ``prior`` is pi, the share of positives among the
unlabelled rows (uPU needs it to *train*; the workflows pass an estimate, see
:class:`~raytune_fed.models.pu.TIcE`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.models.pu._base import PUClassifier, check_positive, check_prior

BASES = ("lm", "gauss")


def _sq_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.maximum(d, 0.0)


class UPU(PUClassifier):
    """Squared-loss uPU with a linear or Gaussian basis (see the module docstring).

    Parameters: ``prior`` (pi in (0, 1)), ``lam`` (the ridge ``lambda``, > 0), ``basis``
    (``"lm"`` or ``"gauss"``), ``n_basis`` (centres for ``"gauss"``), ``random_state``.
    Learned: ``coef_``, ``centres_`` and ``sigma_`` (``"gauss"`` only).
    """

    def __init__(self, prior: float = 0.5, lam: float = 1e-3, basis: str = "lm", n_basis: int = 200,
                 random_state: int = 0) -> None:
        self.prior = prior
        self.lam = lam
        self.basis = basis
        self.n_basis = n_basis
        self.random_state = random_state

    def _check_params(self) -> float:
        pi = check_prior(self.prior)
        check_positive("lam", self.lam)
        if self.basis not in BASES:
            raise ConfigError(f"basis must be one of {list(BASES)}, got {self.basis!r}")
        check_int("n_basis", self.n_basis, 1)
        return pi

    def _features(self, X: np.ndarray) -> np.ndarray:
        if self.basis == "lm":
            return np.column_stack([X, np.ones(X.shape[0])])
        K = np.exp(-_sq_distances(X, self.centres_) / (2.0 * self.sigma_ ** 2))
        return np.column_stack([K, np.ones(X.shape[0])])

    def fit(self, X: Any, s: Any) -> UPU:
        pi = self._check_params()
        X, s = self._validate_fit(X, s)
        Xp, Xu = X[s == 1], X[s == 0]
        if self.basis == "gauss":
            rng = np.random.default_rng(self.random_state)
            pick = rng.choice(Xu.shape[0], size=min(self.n_basis, Xu.shape[0]), replace=False)
            self.centres_ = Xu[np.sort(pick)]
            med = float(np.median(_sq_distances(Xu, self.centres_)))
            self.sigma_ = float(np.sqrt(med)) if med > 0 else 1.0
        Pp, Pu = self._features(Xp), self._features(Xu)
        A = Pu.T @ Pu / Pu.shape[0] + float(self.lam) * np.eye(Pu.shape[1])
        b = 2.0 * pi * Pp.mean(axis=0) - Pu.mean(axis=0)
        self.coef_ = np.linalg.solve(A, b)
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self._features(X) @ self.coef_
