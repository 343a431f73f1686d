"""The Gaussian-process surrogate of the GP-based cores, and their settings (no Ray).

Everything works in the unit cube ``[0, 1]^d`` and *minimises*.  The model is the one the
cores always used: an ARD Matern-5/2 kernel times a constant amplitude, plus a bounded
white-noise level (``noise=True``) or a fixed ``1e-6`` nugget (``noise=False``), fitted to
standardised outcomes by maximising the log marginal likelihood with L-BFGS-B from the
default start (amplitude 1, length scales 0.5, noise 1e-3) within the same bounds.

Why our own GP and not scikit-learn's ``GaussianProcessRegressor`` (which this replaced):
profiling ``ParEGOSearch.suggest`` showed the hyperparameter fit at 76-91 % of an ask, and
most of a likelihood evaluation inside the regressor went to kernel-object bookkeeping
(hyperparameter properties, cloning, a ``(n, n, d)`` gradient tensor) rather than
arithmetic.  Here one evaluation is a handful of array operations on the ``n (n - 1) / 2``
pairs below the diagonal: their squared differences are computed once per fit, so
distances and every length-scale gradient are two matrix-vector products, and the
Cholesky factor and inverse come straight from LAPACK (``potrf``/``potri``).  The objective, its start
and bounds are the same, so the
optimum is the same up to rounding; ``experiments/bench_searchers.py`` measures both the
speed and the hypervolume against the former implementation.

:class:`Posterior` evaluates the latent mean and standard deviation (noise excluded) and
expected improvement with its analytic gradient, vectorised over many points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.linalg import lapack, solve_triangular
from scipy.optimize import minimize
from scipy.special import erfc

from raytune_fed._checks import check_float, check_int
from raytune_fed.errors import ConfigError

FIXED_NUGGET = 1e-6  # relative to unit outcome variance, used when noise=False
_JITTER = 1e-10      # added to the diagonal with a fitted noise level (scikit-learn's alpha)
NOISE_BOUNDS = (1e-6, 0.5)
LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
AMPLITUDE_BOUNDS = (1e-3, 1e3)
_START = {"amplitude": 1.0, "length_scale": 0.5, "noise": 1e-3}
# stop the likelihood fit once an iteration gains less than 1e-6 relatively (about 1e-4 in
# log-likelihood): a quarter fewer evaluations than scipy's default, the optimum within
# 0.02 log-likelihood of it in 72 of 72 measured ParEGO fits
FIT_FTOL = 1e-6
_SQRT5 = math.sqrt(5.0)
_LOG_2PI = math.log(2.0 * math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class GPSettings:
    """How a GP-based core fits its surrogate and maximises expected improvement.

    Attributes
    ----------
    noise : fit a bounded white-noise level (``True``) or use a fixed tiny nugget.
    xi : exploration margin of expected improvement, in objective units (>= 0).
    n_restarts : extra random starts of the hyperparameter fit (beyond the default start),
        drawn uniformly in the log-bounds as scikit-learn does.
    n_candidates : uniform random candidates scored by EI per proposal.
    n_local : candidates drawn around the best observed points.
    n_starts : best candidates polished by L-BFGS-B on EI.

    Defaults as measured by ``experiments/bench_searchers.py`` (12 paired seeds): two
    restarts matter (without them ParEGO's hypervolume on ZDT3 drops by 0.14, 11 of 12
    seeds, when the default start settles on a noisy, long-length-scale fit).  Polishing 5
    EI candidates instead of 1 brought ParEGO nothing on ZDT1-3 or DTLZ2 but kept GP-BO
    out of Hartmann-6's local optima on 2 of 12 seeds, so :data:`GP_BO_SETTINGS` (what
    :class:`~raytune_fed.algorithms.GPMinimizer` uses unless told) polishes 5.
    """

    noise: bool = True
    xi: float = 0.0
    n_restarts: int = 2
    n_candidates: int = 2048
    n_local: int = 512
    n_starts: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.noise, bool):
            raise ConfigError(f"noise must be True or False, got {self.noise!r}")
        check_float("xi", self.xi, 0.0)
        check_int("n_restarts", self.n_restarts, 0)
        check_int("n_candidates", self.n_candidates, 1)
        check_int("n_local", self.n_local, 0)
        check_int("n_starts", self.n_starts, 0)
        object.__setattr__(self, "xi", float(self.xi))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GPSettings:
        if not isinstance(data, Mapping) or set(data) - set(cls.__dataclass_fields__):
            raise ConfigError(f"GP settings must be a dict with keys among {sorted(cls.__dataclass_fields__)}, "
                              f"got {data!r:.200}")
        return cls(**data)


GP_BO_SETTINGS = GPSettings(n_starts=5)  # single-objective GP-BO's default (see GPSettings)


# ----------------------------------------------------------------------------- the fit

def fit_gp(X: np.ndarray, y: np.ndarray, *, noise: bool, n_restarts: int = 0,
           rng: np.random.Generator | None = None, ftol: float = FIT_FTOL) -> Posterior:
    """Fit the surrogate to ``(X, y)`` and return its latent posterior.

    ``rng`` draws the ``n_restarts`` extra starts (uniform in the log-bounds); it is
    needed only when ``n_restarts > 0``.  ``ftol`` is L-BFGS-B's relative stopping
    tolerance on the likelihood (scipy's default, which scikit-learn uses, is 2.2e-9).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    y_mean, y_std = float(y.mean()), float(y.std())
    y_std = y_std if y_std > 1e-12 else 1.0
    z = (y - y_mean) / y_std
    n, d = X.shape
    lml = _LogMarginalLikelihood(X, z, noise)
    bounds = np.log(np.array([AMPLITUDE_BOUNDS] + [LENGTH_SCALE_BOUNDS] * d + ([NOISE_BOUNDS] if noise else [])))
    starts = [np.log([_START["amplitude"]] + [_START["length_scale"]] * d + ([_START["noise"]] if noise else []))]
    if n_restarts:
        if rng is None:
            raise ConfigError("fit_gp needs rng for n_restarts > 0")
        starts += list(rng.uniform(bounds[:, 0], bounds[:, 1], size=(n_restarts, len(bounds))))
    best_theta, best_value = starts[0], np.inf
    for theta0 in starts:
        res = minimize(lml.negative, theta0, jac=True, method="L-BFGS-B", bounds=bounds, options={"ftol": ftol})
        if res.fun < best_value:
            best_theta, best_value = res.x, float(res.fun)
    return Posterior(X, z, best_theta, noise, y_mean, y_std, log_marginal_likelihood=-best_value)


class _LogMarginalLikelihood:
    """Negative log marginal likelihood of standardised outcomes and its gradient in log-parameters.

    Works on the ``n (n - 1) / 2`` pairs below the diagonal only: LAPACK's Cholesky
    (``potrf``) and inverse (``potri``) read and write the lower triangle, and against a
    symmetric ``dK`` the full trace ``sum(W * dK)`` is twice the sum over those pairs plus
    the diagonal, where the kernel is the amplitude and every length-scale derivative is 0.
    """

    def __init__(self, X: np.ndarray, z: np.ndarray, noise: bool) -> None:
        n, d = X.shape
        self.n, self.d, self.z, self.noise = n, d, z, noise
        rows, cols = np.tril_indices(n, -1)
        self.rows, self.cols = rows, cols
        self.sq = (X[rows] - X[cols]) ** 2           # (pairs, d) squared differences
        self.lower = rows + cols * n                   # flat positions in a Fortran-ordered n x n
        self.diagonal = np.arange(n) * (n + 1)

    def negative(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        n, d = self.n, self.d
        amp = math.exp(theta[0])
        inv_l2 = np.exp(-2.0 * theta[1:1 + d])
        r2 = self.sq @ inv_l2
        r = np.sqrt(r2)
        e = np.exp(-_SQRT5 * r)
        matern = (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * e
        nugget = math.exp(theta[-1]) + _JITTER if self.noise else FIXED_NUGGET
        flat = np.zeros(n * n)
        flat[self.lower] = amp * matern
        flat[self.diagonal] = amp + nugget
        chol, info = lapack.dpotrf(flat.reshape((n, n), order="F"), lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return math.inf, np.zeros_like(theta)
        alpha, _ = lapack.dpotrs(chol, self.z, lower=1)
        value = 0.5 * float(self.z @ alpha) + float(np.log(np.diag(chol)).sum()) + 0.5 * n * _LOG_2PI
        inv, _ = lapack.dpotri(chol, lower=1, overwrite_c=1)
        inv = inv.reshape(-1, order="F")
        w_pairs = alpha[self.rows] * alpha[self.cols] - inv[self.lower]  # W = alpha alpha' - K^-1
        w_diag = alpha * alpha - inv[self.diagonal]
        grad = np.empty_like(theta)  # d lml / d log-parameter = sum(W * dK) / 2
        grad[0] = amp * (float(w_pairs @ matern) + 0.5 * float(w_diag.sum()))
        grad[1:1 + d] = inv_l2 * (((amp * (5.0 / 3.0)) * (1.0 + _SQRT5 * r) * e * w_pairs) @ self.sq)
        if self.noise:
            grad[-1] = 0.5 * math.exp(theta[-1]) * float(w_diag.sum())
        return value, -grad


# ----------------------------------------------------------------------- the posterior

class Posterior:
    """Latent posterior of a fitted GP (noise excluded), in the original outcome units."""

    def __init__(self, X: np.ndarray, z: np.ndarray, theta: np.ndarray, noise: bool, y_mean: float,
                 y_std: float, log_marginal_likelihood: float = math.nan) -> None:
        d = X.shape[1]
        self.log_marginal_likelihood = log_marginal_likelihood  # of the standardised outcomes
        self.theta = np.asarray(theta, dtype=float)
        self.amplitude = math.exp(theta[0])
        self.length_scale = np.exp(theta[1:1 + d])
        self.noise_level = math.exp(theta[-1]) if noise else 0.0
        self.X, self.y_mean, self.y_std = X, y_mean, y_std
        self._Xs = X / self.length_scale
        self._Xs_sq = np.sum(self._Xs ** 2, axis=1)
        nugget = self.noise_level + _JITTER if noise else FIXED_NUGGET
        exact_r2 = np.sum((self._Xs[:, None, :] - self._Xs[None, :, :]) ** 2, axis=2)
        K = self._kernel(exact_r2) + nugget * np.eye(len(X))
        chol, info = lapack.dpotrf(K, lower=1, clean=1)
        if info != 0:
            raise ConfigError(f"the GP covariance is not positive definite (LAPACK info {info})")
        self.L = chol
        self._L_inv = lapack.dtrtri(chol, lower=1)[0]
        self.alpha, _ = lapack.dpotrs(chol, z, lower=1)

    def _r2(self, Us: np.ndarray, Us_sq: np.ndarray) -> np.ndarray:
        r2 = Us @ self._Xs.T
        r2 *= -2.0
        r2 += Us_sq[:, None]
        r2 += self._Xs_sq[None, :]
        return np.maximum(r2, 0.0, out=r2)

    def _kernel(self, r2: np.ndarray) -> np.ndarray:
        """Matern-5/2 values for squared scaled distances (``r2`` is overwritten)."""
        r = np.sqrt(r2)
        r2 *= 5.0 / 3.0
        r2 += 1.0
        r *= _SQRT5
        r2 += r
        np.exp(-r, out=r)
        r2 *= r
        r2 *= self.amplitude
        return r2

    def cross(self, U: np.ndarray) -> np.ndarray:
        """Kernel values ``(m, n)`` between rows of ``U`` and the training points."""
        Us = np.atleast_2d(U) / self.length_scale
        return self._kernel(self._r2(Us, np.sum(Us * Us, axis=1)))

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the latent function at rows of ``U``."""
        k = self.cross(U)
        v = k @ self._L_inv.T  # rows: L^-1 k (a product is cheaper than a triangular solve here)
        var = np.maximum(self.amplitude - np.einsum("ij,ij->i", v, v), 1e-12)
        return self.y_mean + self.y_std * (k @ self.alpha), self.y_std * np.sqrt(var)

    def ei_and_grad(self, x: np.ndarray, best: float, xi: float) -> tuple[float, np.ndarray]:
        """Expected improvement at one point and its gradient with respect to ``x``."""
        diff = (x[None, :] - self.X) / self.length_scale
        r2 = np.sum(diff * diff, axis=1)
        r = np.sqrt(r2)
        e = np.exp(-_SQRT5 * r)
        k = self.amplitude * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * e
        # d k / d x = -(5/3) a (1 + sqrt5 r) exp(-sqrt5 r) (x - X) / l^2
        dk = (-(5.0 / 3.0) * self.amplitude * (1.0 + _SQRT5 * r) * e)[:, None] * diff / self.length_scale
        v = solve_triangular(self.L, k, lower=True, check_finite=False)
        beta = solve_triangular(self.L, v, lower=True, trans="T", check_finite=False)
        var = max(self.amplitude - float(v @ v), 1e-12)
        mu = self.y_mean + self.y_std * float(k @ self.alpha)
        sd = self.y_std * math.sqrt(var)
        dmu = self.y_std * (self.alpha @ dk)
        dsd = self.y_std * (-(beta @ dk)) / math.sqrt(var)
        z = (best - mu - xi) / sd
        cdf, pdf = 0.5 * math.erfc(-z * _INV_SQRT2), _INV_SQRT2PI * math.exp(-0.5 * z * z)
        ei = (best - mu - xi) * cdf + sd * pdf
        return float(ei), -cdf * dmu + pdf * dsd


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """EI for minimisation: ``E[max(best - xi - f, 0)]`` under ``f ~ N(mu, sd^2)``."""
    sd = np.maximum(sd, 1e-12)
    imp = best - np.asarray(mu) - xi
    z = imp / sd
    cdf = 0.5 * erfc(-z * _INV_SQRT2)
    pdf = _INV_SQRT2PI * np.exp(-0.5 * z * z)
    return np.maximum(imp * cdf + sd * pdf, 0.0)


def check_gp_settings(gp: Any) -> GPSettings:
    """``gp`` if it is a :class:`GPSettings`, else a one-line :class:`ConfigError`."""
    if not isinstance(gp, GPSettings):
        raise ConfigError(f"gp must be a GPSettings, got {gp!r:.200}")
    return gp
