"""Expected-improvement proposals for the GP-based cores (no Ray).

:func:`propose_ei` fits the surrogate of :mod:`raytune_fed.algorithms.gp`, scores a few
thousand candidates (uniform, and perturbed copies of the best observed points) by EI in
one vectorised pass, polishes the best ``n_starts`` with L-BFGS-B on EI and its analytic
gradient, then snaps the ranked pool through the search space (integers and choices
become exact) and returns the best point that is not already observed or pending.
:func:`propose_config` wraps it for a core: configurations still being evaluated enter
as constant liars (the current best value), so a batch does not collapse onto one point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

from raytune_fed.algorithms.gp import GPSettings, expected_improvement, fit_gp
from raytune_fed.space import SearchSpace

_LOCAL_SCALES = np.array([0.2, 0.05, 0.01])
_N_INCUMBENTS = 5
_SNAP_CHUNK = 256
_CONTROLLER: ThreadpoolController | None = None


def propose_config(space: SearchSpace, X: np.ndarray, y: np.ndarray, pending: Sequence[Mapping[str, Any]], *,
                   rng: np.random.Generator, settings: GPSettings) -> dict[str, Any]:
    """The EI proposal for values ``y`` observed at unit points ``X``, with ``pending`` as liars."""
    if pending:
        X = np.vstack([X, space.to_unit(pending)])
        y = np.concatenate([y, np.full(len(pending), float(np.min(y)))])
    u = propose_ei(X, y, rng=rng, snap=space.snap, exclude=X, settings=settings)
    return space.from_unit(u)[0]


def random_config(space: SearchSpace, avoid: Sequence[Mapping[str, Any]], rng: np.random.Generator) -> dict[str, Any]:
    """A uniform random configuration not in ``avoid`` (any one if the space is exhausted)."""
    exclude = space.to_unit(avoid) if avoid else np.empty((0, space.dim))
    return space.from_unit(random_distinct(rng, space.snap, exclude, space.dim))[0]


def propose_ei(X: np.ndarray, y: np.ndarray, *, rng: np.random.Generator,
               snap: Callable[[np.ndarray], np.ndarray], exclude: np.ndarray, settings: GPSettings) -> np.ndarray:
    """One unit point maximising EI of a GP fitted to ``(X, y)``, not equal to a row of ``exclude``.

    BLAS runs single-threaded here: the matrices are small, and threads only add contention.
    """
    with _blas_threads().limit(limits=1, user_api="blas"):
        return _propose_ei(X, y, rng, snap, exclude, settings)


def _blas_threads() -> ThreadpoolController:
    """One controller per process: building it scans the loaded libraries (milliseconds)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def _propose_ei(X, y, rng, snap, exclude, settings: GPSettings) -> np.ndarray:
    d = X.shape[1]
    post = fit_gp(X, y, noise=settings.noise, n_restarts=settings.n_restarts, rng=rng)
    best, xi = float(np.min(post.predict(X)[0])), settings.xi

    incumbents = X[np.argsort(y, kind="stable")[: min(_N_INCUMBENTS, len(y))]]
    scales = _LOCAL_SCALES[rng.integers(len(_LOCAL_SCALES), size=settings.n_local)]
    local = incumbents[rng.integers(len(incumbents), size=settings.n_local)] \
        + rng.standard_normal((settings.n_local, d)) * scales[:, None]
    cand = np.clip(np.vstack([rng.random((settings.n_candidates, d)), local]), 0.0, 1.0)
    ei = expected_improvement(*post.predict(cand), best, xi)

    scale = 1.0 / post.y_std
    starts = np.argsort(-ei, kind="stable")[: settings.n_starts]
    polished: list[np.ndarray] = []
    for i in starts:
        res = minimize(lambda x: tuple(-scale * t for t in post.ei_and_grad(x, best, xi)),
                       cand[i], jac=True, method="L-BFGS-B", bounds=[(0.0, 1.0)] * d, options={"maxiter": 100})
        polished.append(np.clip(res.x, 0.0, 1.0))
    if polished:
        tops = np.array(polished)
        cand = np.vstack([tops, cand])
        ei = np.concatenate([expected_improvement(*post.predict(tops), best, xi), ei])
    order = np.argsort(-ei, kind="stable")

    for chunk in (order[:_SNAP_CHUNK], order[_SNAP_CHUNK:]):
        if len(chunk) == 0:
            continue
        snapped = snap(cand[chunk])
        fresh = np.flatnonzero(_is_new(snapped, exclude))
        if len(fresh):
            snapped_ei = expected_improvement(*post.predict(snapped[fresh]), best, xi)
            return snapped[fresh[np.argmax(snapped_ei)]]
    return random_distinct(rng, snap, exclude, d)


def random_distinct(rng: np.random.Generator, snap: Callable[[np.ndarray], np.ndarray],
                    exclude: np.ndarray, d: int, n_tries: int = 256) -> np.ndarray:
    """A uniform random unit point not in ``exclude`` (or any point if the space is exhausted)."""
    snapped = snap(rng.random((n_tries, d)))
    fresh = np.flatnonzero(_is_new(snapped, exclude))
    return snapped[fresh[0]] if len(fresh) else snapped[0]


def _is_new(points: np.ndarray, exclude: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Rows of ``points`` farther than ``tol`` (in every coordinate) from each row of ``exclude``."""
    new = np.ones(len(points), dtype=bool)
    if len(exclude) == 0:
        return new
    # squared distances by one product; only near pairs get the exact coordinate-wise test
    d2 = np.sum(points * points, axis=1)[:, None] + np.sum(exclude * exclude, axis=1)[None, :] \
        - 2.0 * points @ exclude.T
    for i, j in zip(*np.nonzero(d2 <= 1e-8)):
        if new[i] and np.all(np.abs(points[i] - exclude[j]) <= tol):
            new[i] = False
    return new
