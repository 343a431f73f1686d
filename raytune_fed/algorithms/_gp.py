"""Gaussian-process surrogate, expected improvement and its optimiser (no Ray).

Everything here works in the unit cube ``[0, 1]^d`` and *minimises*.  The GP is
scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor` with an ARD
Matern-5/2 kernel times a constant, plus a nugget: a :class:`WhiteKernel` with a bounded
noise level (``noise=True``) or a small fixed ``alpha`` (``noise=False``).  Outcomes are
standardised before the fit (what ``normalize_y=True`` does, done here so the posterior
below knows the scale).

:class:`Posterior` reads the fitted GP's documented attributes (``X_train_``, ``L_``,
``alpha_``, ``kernel_``) and evaluates the latent mean and standard deviation with
analytic gradients, vectorised over many points.  ``tests/test_search_core.py`` checks it
against ``GaussianProcessRegressor.predict``.  :func:`propose_ei` maximises expected
improvement: a few thousand random and perturbed-incumbent candidates, then multi-start
L-BFGS-B from the best of them, then snapping through the search space.

:class:`CoreBase` holds what the ask/tell cores share: settings checks, the initial
design queue, the told configurations, the random stream and the explicit state.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy.linalg import solve_triangular
from scipy.optimize import minimize
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
from threadpoolctl import threadpool_limits

from raytune_fed._checks import check_float, check_int
from raytune_fed.errors import ConfigError
from raytune_fed.space import SearchSpace

STATE_VERSION = 1
_FIXED_NUGGET = 1e-6  # relative to unit outcome variance; RFMS used a 1e-6 nugget
_NOISE_BOUNDS = (1e-6, 0.5)
_LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
_AMPLITUDE_BOUNDS = (1e-3, 1e3)
_SQRT5 = math.sqrt(5.0)


# ----------------------------------------------------------------------------- the GP

def fit_gp(X: np.ndarray, y: np.ndarray, *, noise: bool, seed: int, n_restarts: int) -> Posterior:
    """Fit the surrogate to ``(X, y)`` and return its latent posterior."""
    y = np.asarray(y, dtype=float)
    y_mean, y_std = float(y.mean()), float(y.std())
    y_std = y_std if y_std > 1e-12 else 1.0
    d = X.shape[1]
    kernel = ConstantKernel(1.0, _AMPLITUDE_BOUNDS) * Matern(
        length_scale=np.full(d, 0.5), length_scale_bounds=_LENGTH_SCALE_BOUNDS, nu=2.5)
    if noise:
        kernel = kernel + WhiteKernel(1e-3, _NOISE_BOUNDS)
    gp = GaussianProcessRegressor(kernel, alpha=1e-10 if noise else _FIXED_NUGGET, normalize_y=False,
                                  n_restarts_optimizer=n_restarts, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(X, (y - y_mean) / y_std)
    return Posterior(gp, y_mean, y_std)


class Posterior:
    """Latent posterior of a fitted GP (noise excluded), in the original outcome units."""

    def __init__(self, gp: GaussianProcessRegressor, y_mean: float, y_std: float) -> None:
        signal = gp.kernel_.k1 if isinstance(gp.kernel_.k2, WhiteKernel) else gp.kernel_
        self.amplitude = float(signal.k1.constant_value)
        self.length_scale = np.broadcast_to(np.asarray(signal.k2.length_scale, dtype=float),
                                            (gp.X_train_.shape[1],)).copy()
        self.X = gp.X_train_
        self.L = gp.L_
        self.alpha = np.ravel(gp.alpha_)
        self.y_mean, self.y_std = y_mean, y_std
        self.gp = gp

    def _cross(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scaled differences ``(m, n, d)`` and kernel values ``(m, n)``."""
        diff = (U[:, None, :] - self.X[None, :, :]) / self.length_scale
        r = np.sqrt(np.maximum(np.sum(diff * diff, axis=2), 0.0))
        k = self.amplitude * (1.0 + _SQRT5 * r + 5.0 / 3.0 * r * r) * np.exp(-_SQRT5 * r)
        return diff, k

    def predict(self, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the latent function at rows of ``U``."""
        _, k = self._cross(np.atleast_2d(U))
        v = solve_triangular(self.L, k.T, lower=True, check_finite=False)
        var = np.maximum(self.amplitude - np.sum(v * v, axis=0), 1e-12)
        return self.y_mean + self.y_std * (k @ self.alpha), self.y_std * np.sqrt(var)

    def ei_and_grad(self, x: np.ndarray, best: float, xi: float) -> tuple[float, np.ndarray]:
        """Expected improvement at one point and its gradient with respect to ``x``."""
        diff, k = self._cross(x[None, :])
        diff, k = diff[0], k[0]
        r = np.sqrt(np.sum(diff * diff, axis=1))
        # d k / d x = -(5/3) a (1 + sqrt5 r) exp(-sqrt5 r) (x - X) / l^2
        dk = (-(5.0 / 3.0) * self.amplitude * (1.0 + _SQRT5 * r) * np.exp(-_SQRT5 * r))[:, None] \
            * diff / self.length_scale
        v = solve_triangular(self.L, k, lower=True, check_finite=False)
        beta = solve_triangular(self.L, v, lower=True, trans="T", check_finite=False)
        var = max(self.amplitude - float(v @ v), 1e-12)
        mu = self.y_mean + self.y_std * float(k @ self.alpha)
        sd = self.y_std * math.sqrt(var)
        dmu = self.y_std * (self.alpha @ dk)
        dsd = self.y_std * (-2.0 * (beta @ dk)) / (2.0 * math.sqrt(var))
        z = (best - mu - xi) / sd
        cdf, pdf = norm.cdf(z), norm.pdf(z)
        ei = (best - mu - xi) * cdf + sd * pdf
        return float(ei), -cdf * dmu + pdf * dsd


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """EI for minimisation: ``E[max(best - xi - f, 0)]`` under ``f ~ N(mu, sd^2)``."""
    sd = np.maximum(sd, 1e-12)
    imp = best - np.asarray(mu) - xi
    z = imp / sd
    return np.maximum(imp * norm.cdf(z) + sd * norm.pdf(z), 0.0)


# -------------------------------------------------------------------- the acquisition

def _is_new(points: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    if len(exclude) == 0:
        return np.ones(len(points), dtype=bool)
    close = np.all(np.abs(points[:, None, :] - exclude[None, :, :]) <= 1e-9, axis=2)
    return ~close.any(axis=1)


def propose_ei(X: np.ndarray, y: np.ndarray, *, rng: np.random.Generator,
               snap: Callable[[np.ndarray], np.ndarray], exclude: np.ndarray, noise: bool,
               xi: float, n_restarts: int, n_candidates: int = 2048, n_local: int = 512,
               n_starts: int = 5) -> np.ndarray:
    """One unit point maximising EI of a GP fitted to ``(X, y)``, not equal to a row of ``exclude``.

    BLAS runs single-threaded here: the matrices are tiny, and threads only add contention.
    """
    with threadpool_limits(1, user_api="blas"):
        return _propose_ei(X, y, rng=rng, snap=snap, exclude=exclude, noise=noise, xi=xi,
                           n_restarts=n_restarts, n_candidates=n_candidates, n_local=n_local, n_starts=n_starts)


def _propose_ei(X, y, *, rng, snap, exclude, noise, xi, n_restarts, n_candidates, n_local, n_starts):
    d = X.shape[1]
    post = fit_gp(X, y, noise=noise, seed=int(rng.integers(2**31 - 1)), n_restarts=n_restarts)
    best = float(np.min(post.predict(X)[0]))

    incumbents = X[np.argsort(y, kind="stable")[: min(5, len(y))]]
    scales = np.array([0.2, 0.05, 0.01])[rng.integers(3, size=n_local)]
    local = incumbents[rng.integers(len(incumbents), size=n_local)] \
        + rng.standard_normal((n_local, d)) * scales[:, None]
    cand = np.clip(np.vstack([rng.random((n_candidates, d)), local]), 0.0, 1.0)
    ei = expected_improvement(*post.predict(cand), best, xi)

    scale = 1.0 / post.y_std
    polished = []
    for i in np.argsort(-ei, kind="stable")[:n_starts]:
        res = minimize(lambda x: tuple(-scale * t for t in post.ei_and_grad(x, best, xi)),
                       cand[i], jac=True, method="L-BFGS-B", bounds=[(0.0, 1.0)] * d,
                       options={"maxiter": 100})
        polished.append(np.clip(res.x, 0.0, 1.0))
    pool = np.vstack([np.array(polished), cand])
    pool_ei = np.concatenate([expected_improvement(*post.predict(np.array(polished)), best, xi), ei])
    order = np.argsort(-pool_ei, kind="stable")

    for chunk in (order[:256], order[256:]):
        if len(chunk) == 0:
            continue
        snapped = snap(pool[chunk])
        snapped_ei = expected_improvement(*post.predict(snapped), best, xi)
        fresh = _is_new(snapped, exclude)
        if fresh.any():
            idx = np.flatnonzero(fresh)
            return snapped[idx[np.argmax(snapped_ei[idx])]]
    return random_distinct(rng, snap, exclude, d)


def random_distinct(rng: np.random.Generator, snap: Callable[[np.ndarray], np.ndarray],
                    exclude: np.ndarray, d: int, n_tries: int = 256) -> np.ndarray:
    """A uniform random unit point not in ``exclude`` (or any point if the space is exhausted)."""
    snapped = snap(rng.random((n_tries, d)))
    fresh = np.flatnonzero(_is_new(snapped, exclude))
    return snapped[fresh[0]] if len(fresh) else snapped[0]


# ------------------------------------------------------------------ shared core state

def plain(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with numpy scalars turned into Python ones (JSON-friendly)."""
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in config.items()}


class CoreBase:
    """Initial design, observations, random stream and state shared by the cores."""

    @classmethod
    def validate_options(cls, *, n_initial_points: int, seed: int | None, noise: bool, xi: float,
                         n_restarts: int, **options: Any) -> dict[str, Any]:
        """Check the settings (not the space) and return them normalised; raises ConfigError."""
        if options:
            raise ConfigError(f"{cls.__name__} got unknown options {sorted(options)}")
        if seed is not None:
            check_int("seed", seed, 0)
        if not isinstance(noise, bool):
            raise ConfigError(f"noise must be True or False, got {noise!r}")
        return {"n_initial_points": check_int("n_initial_points", n_initial_points, 1),
                "seed": None if seed is None else int(seed), "noise": noise,
                "xi": check_float("xi", xi, 0.0), "n_restarts": check_int("n_restarts", n_restarts, 0)}

    def __init__(self, space: SearchSpace, *, n_initial_points: int,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None, seed: int | None,
                 noise: bool, xi: float, n_restarts: int) -> None:
        if not isinstance(space, SearchSpace):
            raise ConfigError(f"space must be a SearchSpace, got {type(space).__name__}")
        opts = CoreBase.validate_options(n_initial_points=n_initial_points, seed=seed, noise=noise,
                                         xi=xi, n_restarts=n_restarts)
        self.space = space
        self.n_initial_points, self.xi = opts["n_initial_points"], opts["xi"]
        self.n_restarts, self.noise = opts["n_restarts"], opts["noise"]
        forced = [plain(p) for p in (points_to_evaluate or ())]
        for p in forced:
            space.validate(p)
        self._rng = np.random.default_rng(seed)
        n_lhs = max(0, self.n_initial_points - len(forced))
        self._queue: list[dict[str, Any]] = forced + (space.latin_hypercube(n_lhs, self._rng) if n_lhs else [])
        self._n_forced = len(forced)
        self._configs: list[dict[str, Any]] = []

    @property
    def n_told(self) -> int:
        """How many results the core has been told."""
        return len(self._configs)

    def _pop_initial(self) -> dict[str, Any] | None:
        """Next design point: ``points_to_evaluate`` always, then LHS until enough results."""
        if self._n_forced:
            self._n_forced -= 1
            return self._queue.pop(0)
        if self._queue and self.n_told < self.n_initial_points:
            return self._queue.pop(0)
        self._queue.clear()
        return None

    def _check_pending(self, pending: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = [plain(p) for p in pending]
        for p in out:
            self.space.validate(p)
        return out

    def _check_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of parameter values, got {config!r}")
        c = plain(config)
        self.space.validate(c)
        return {name: c[name] for name in self.space.names}

    def _propose(self, configs: list[dict[str, Any]], y: np.ndarray,
                 pending: list[dict[str, Any]]) -> dict[str, Any]:
        """EI proposal for ``y`` observed at ``configs``, constant liar for ``pending``."""
        X = self.space.to_unit(configs + pending)
        yy = np.concatenate([y, np.full(len(pending), float(np.min(y)))])
        u = propose_ei(X, yy, rng=self._rng, snap=self.space.round_trip, exclude=X, noise=self.noise,
                       xi=self.xi, n_restarts=self.n_restarts)
        return self.space.from_unit(u)[0]

    def _random(self, avoid: list[dict[str, Any]]) -> dict[str, Any]:
        exclude = self.space.to_unit(avoid) if avoid else np.empty((0, self.space.dim))
        u = random_distinct(self._rng, self.space.round_trip, exclude, self.space.dim)
        return self.space.from_unit(u)[0]

    # ------------------------------------------------------------------ state
    def _settings(self) -> dict[str, Any]:
        return {"n_initial_points": self.n_initial_points, "xi": self.xi,
                "n_restarts": self.n_restarts, "noise": self.noise}

    def _base_state(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "kind": type(self).__name__, "space_names": self.space.names,
                "settings": self._settings(), "configs": [dict(c) for c in self._configs],
                "queue": [dict(c) for c in self._queue], "n_forced": self._n_forced,
                "rng": self._rng.bit_generator.state}

    def _set_base_state(self, state: Mapping[str, Any]) -> None:
        kind = state.get("kind") if isinstance(state, Mapping) else type(state).__name__
        if kind != type(self).__name__:
            raise ConfigError(f"state is not a {type(self).__name__} state: kind={kind!r}")
        if state.get("version") != STATE_VERSION:
            raise ConfigError(f"unsupported state version {state.get('version')!r}, expected {STATE_VERSION}")
        if list(state["space_names"]) != self.space.names:
            raise ConfigError(f"state was saved for parameters {state['space_names']}, "
                              f"this core searches {self.space.names}")
        settings = state["settings"]
        self.n_initial_points = int(settings["n_initial_points"])
        self.xi, self.n_restarts = float(settings["xi"]), int(settings["n_restarts"])
        self.noise = bool(settings["noise"])
        self._configs = [dict(c) for c in state["configs"]]
        self._queue = [dict(c) for c in state["queue"]]
        self._n_forced = int(state["n_forced"])
        rng = np.random.default_rng()
        rng.bit_generator.state = state["rng"]
        self._rng = rng
