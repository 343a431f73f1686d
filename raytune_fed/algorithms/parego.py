"""ParEGO (Knowles 2006) as mlrMBO implements it, as an ask/tell core (no Ray).

Each model-based proposal:

1. min-max normalises every objective to ``[0, 1]`` over all evaluated points
   (mlrMBO's ``parego.normalize = "standard"``; a constant objective maps to 0);
2. draws weight vectors from the simplex lattice ``{(i_1..i_k)/s : sum i = s}``
   (``s`` = 100000, 450, 75, 37, 23 for 2..6 objectives and 10 beyond), excluding the
   ``k`` margin (unit) vectors; for a batch of ``n`` it draws ``n * sample_more_weights``
   distinct rows and repeatedly drops the row with the smallest nearest-neighbour distance
   until ``n`` remain.  As in mlrMBO, a single proposal draws one row (mlrMBO forces
   ``sample.more.weights = 1`` when ``propose.points = 1``);
3. scalarises with the augmented Tchebycheff function
   ``max_j(w_j y_j) + rho * sum_j w_j y_j`` and proposes one point per weight vector by
   GP + expected improvement on the scalarised values.

Configurations still being evaluated (``pending``) and earlier proposals of the same
batch enter each scalarised GP as a constant liar (the current best scalarised value), so
a batch does not collapse onto one point.  mlrMBO's infill default is a confidence bound
optimised by focus search; RFMS used EI, which is what this core does.  Lattice rows are
drawn by "stars and bars" without enumerating the lattice.  Objectives are minimised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.algorithms._acquisition import propose_config, random_config
from raytune_fed.algorithms.base import Config, SearchCore
from raytune_fed.algorithms.gp import GPSettings, check_gp_settings
from raytune_fed.errors import ConfigError
from raytune_fed.random import Seed
from raytune_fed.space import SearchSpace

_DEFAULT_LATTICE = {2: 100000, 3: 450, 4: 75, 5: 37, 6: 23}


def default_lattice_size(n_objectives: int) -> int:
    """mlrMBO's ``parego.s`` for ``n_objectives`` objectives."""
    return _DEFAULT_LATTICE.get(n_objectives, 10)


def n_inner_lattice_rows(n_objectives: int, lattice_size: int) -> int:
    """Number of lattice rows that are not margin (unit) vectors."""
    return math.comb(lattice_size + n_objectives - 1, n_objectives - 1) - n_objectives


def sample_lattice_weights(n_objectives: int, lattice_size: int, n: int,
                           rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct non-margin rows of the simplex lattice, uniformly (``(n, k)`` array).

    A lattice row is a composition of ``lattice_size`` into ``k`` non-negative parts; bar
    positions chosen uniformly among ``s + k - 1`` slots give a uniform composition.
    """
    k, s = n_objectives, lattice_size
    if n > n_inner_lattice_rows(k, s):
        raise ConfigError(f"cannot draw {n} distinct weight vectors from a lattice with "
                          f"{n_inner_lattice_rows(k, s)} non-margin rows (lattice_size={s})")
    rows: dict[tuple[int, ...], None] = {}
    while len(rows) < n:
        bars = np.sort(rng.choice(s + k - 1, size=k - 1, replace=False))
        parts = np.diff(np.concatenate([[-1], bars, [s + k - 1]])) - 1
        if parts.max() < s:
            rows.setdefault(tuple(int(p) for p in parts), None)
    return np.array(list(rows), dtype=float) / s


def spread_weights(weights: np.ndarray, n: int) -> np.ndarray:
    """Drop the row with the smallest nearest-neighbour distance until ``n`` rows remain."""
    w = np.asarray(weights, dtype=float)
    while len(w) > n:
        dist = np.sqrt(((w[:, None, :] - w[None, :, :]) ** 2).sum(axis=2))
        dist[dist == 0] = np.inf
        w = np.delete(w, int(np.argmin(dist.min(axis=1))), axis=0)
    return w


def normalize_objectives(Y: np.ndarray) -> np.ndarray:
    """Min-max scale each column to ``[0, 1]``; a constant column becomes 0."""
    Y = np.asarray(Y, dtype=float)
    lo, span = Y.min(axis=0), np.ptp(Y, axis=0)
    return (Y - lo) / np.where(span > 0, span, 1.0)


def tchebycheff(Y: np.ndarray, weights: np.ndarray, rho: float = 0.05) -> np.ndarray:
    """Augmented Tchebycheff scalarisation ``max_j(w_j y_j) + rho * sum_j w_j y_j`` per row."""
    wy = np.atleast_2d(Y) * np.asarray(weights, dtype=float)
    return wy.max(axis=1) + rho * wy.sum(axis=1)


class ParEGO(SearchCore):
    """Ask/tell ParEGO over a :class:`SearchSpace` with ``n_objectives`` minimised objectives.

    Parameters (besides those of :class:`~raytune_fed.algorithms.GPMinimizer`)
    ----------
    n_objectives : number of objectives (>= 2).
    rho : augmentation factor of the Tchebycheff function (>= 0; Knowles' 0.05).
    lattice_size : ``s`` of the weight lattice; ``None`` takes mlrMBO's default for ``k``.
    sample_more_weights : oversampling factor for spreading a batch of ``n > 1`` weights.

    ``n_inner_lattice_rows`` caps a batch's distinct weights; beyond it weights repeat and
    only the constant liar keeps the points apart.  ``last_weights_`` holds the weight
    vectors of the latest model-based batch (for inspection; not part of the state).
    """

    objectives_range = (2, None)

    def __init__(self, space: SearchSpace, n_objectives: int, *, seed: Seed, n_initial_points: int = 20,
                 points_to_evaluate: Sequence[Mapping[str, Any]] = (), rho: float = 0.05,
                 lattice_size: int | None = None, sample_more_weights: int = 5, gp: GPSettings = GPSettings()) -> None:
        opts = self.check_options(n_objectives=n_objectives, rho=rho, lattice_size=lattice_size,
                                  sample_more_weights=sample_more_weights)
        self.rho, self.lattice_size = opts["rho"], opts["lattice_size"]
        self.sample_more_weights = opts["sample_more_weights"]
        self.gp = check_gp_settings(gp)
        super().__init__(space, seed=seed, n_objectives=opts["n_objectives"],
                         n_initial_points=check_int("n_initial_points", n_initial_points, 1),
                         points_to_evaluate=points_to_evaluate)
        self.last_weights_: np.ndarray = np.empty((0, self.n_objectives))

    @staticmethod
    def check_options(*, n_objectives: int, rho: float = 0.05, lattice_size: int | None = None,
                      sample_more_weights: int = 5) -> dict[str, Any]:
        """ParEGO's own settings checked and normalised (the Tune adapter checks early with it)."""
        k = check_int("n_objectives", n_objectives, 2)
        return {"n_objectives": k, "rho": check_float("rho", rho, 0.0),
                "lattice_size": default_lattice_size(k) if lattice_size is None
                else check_int("lattice_size", lattice_size, 2),
                "sample_more_weights": check_int("sample_more_weights", sample_more_weights, 1)}

    def _propose(self, n: int, pending: list[Config]) -> list[Config]:
        if self.n_told < 2:
            out: list[Config] = []
            for _ in range(n):
                out.append(random_config(self.space, self._configs + pending + out, self._rng))
            return out
        weights = self.draw_weights(n)
        self.last_weights_ = weights
        X = self.space.to_unit(self._configs)
        Y = normalize_objectives(self._Y)
        out = []
        for w in weights:
            out.append(propose_config(self.space, X, tchebycheff(Y, w, self.rho), pending + out, rng=self._rng,
                                      settings=self.gp))
        return out

    def draw_weights(self, n: int) -> np.ndarray:
        """``n`` spread weight vectors (consumes the core's random stream)."""
        n_rows = n_inner_lattice_rows(self.n_objectives, self.lattice_size)
        n_distinct = min(n, n_rows)
        n_draw = min(n_distinct * self.sample_more_weights if n > 1 else 1, n_rows)
        w = spread_weights(sample_lattice_weights(self.n_objectives, self.lattice_size, n_draw, self._rng),
                           n_distinct)
        return np.resize(w, (n, self.n_objectives))

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "rho": self.rho, "lattice_size": self.lattice_size,
                "sample_more_weights": self.sample_more_weights, "gp": self.gp.to_dict()}
