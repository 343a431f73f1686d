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
from typing import Any, Mapping, Sequence

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import pareto_mask
from raytune_fed.algorithms._gp import CoreBase, check_float, check_int
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


class ParEGO(CoreBase):
    """Ask/tell ParEGO over a :class:`SearchSpace` with ``n_objectives`` minimised objectives.

    Parameters (besides those of :class:`~raytune_fed.algorithms.gp_bo.GPMinimizer`)
    ----------
    n_objectives : number of objectives (>= 2).
    rho : augmentation factor of the Tchebycheff function (>= 0; Knowles' 0.05).
    lattice_size : ``s`` of the weight lattice; ``None`` takes mlrMBO's default for ``k``.
    sample_more_weights : oversampling factor for spreading a batch of ``n > 1`` weights.

    ``n_inner_lattice_rows`` caps a batch's distinct weights; beyond it weights repeat and
    only the constant liar keeps the points apart.
    """

    def __init__(self, space: SearchSpace, n_objectives: int, *, n_initial_points: int = 20,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, seed: int | None = None,
                 rho: float = 0.05, lattice_size: int | None = None, sample_more_weights: int = 5,
                 noise: bool = True, xi: float = 0.0, n_restarts: int = 2) -> None:
        opts = self.validate_options(n_objectives=n_objectives, rho=rho, lattice_size=lattice_size,
                                     sample_more_weights=sample_more_weights, n_initial_points=n_initial_points,
                                     seed=seed, noise=noise, xi=xi, n_restarts=n_restarts)
        self.n_objectives, self.rho = opts["n_objectives"], opts["rho"]
        self.lattice_size, self.sample_more_weights = opts["lattice_size"], opts["sample_more_weights"]
        super().__init__(space, n_initial_points=n_initial_points, points_to_evaluate=points_to_evaluate,
                         seed=seed, noise=noise, xi=xi, n_restarts=n_restarts)
        self._Y: list[list[float]] = []
        self.last_weights_: np.ndarray = np.empty((0, self.n_objectives))

    @classmethod
    def validate_options(cls, *, n_objectives: int, rho: float = 0.05, lattice_size: int | None = None,
                         sample_more_weights: int = 5, **options: Any) -> dict[str, Any]:
        """Check the settings (not the space) and return them normalised; raises ConfigError."""
        k = check_int("n_objectives", n_objectives, 2)
        return {**super().validate_options(**options), "n_objectives": k, "rho": check_float("rho", rho, 0.0),
                "lattice_size": default_lattice_size(k) if lattice_size is None
                else check_int("lattice_size", lattice_size, 2),
                "sample_more_weights": check_int("sample_more_weights", sample_more_weights, 1)}

    # ------------------------------------------------------------------ ask / tell
    def ask(self, n: int = 1, pending: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """``n`` configurations to evaluate next, given configurations still being evaluated."""
        n = check_int("n", n, 1)
        pending = self._check_pending(pending)
        out: list[dict[str, Any]] = []
        while len(out) < n:
            initial = self._pop_initial()
            if initial is None:
                break
            out.append(initial)
        n_model = n - len(out)
        if n_model == 0:
            return out
        if self.n_told < 2:
            while len(out) < n:
                out.append(self._random(self._configs + pending + out))
            return out
        weights = self.draw_weights(n_model)
        self.last_weights_ = weights
        Y = normalize_objectives(np.asarray(self._Y))
        for w in weights:
            out.append(self._propose(self._configs, tchebycheff(Y, w, self.rho), pending + out))
        return out

    def draw_weights(self, n: int) -> np.ndarray:
        """``n`` spread weight vectors (consumes the core's random stream)."""
        n_rows = n_inner_lattice_rows(self.n_objectives, self.lattice_size)
        n_distinct = min(n, n_rows)
        n_draw = min(n_distinct * self.sample_more_weights if n > 1 else 1, n_rows)
        w = spread_weights(sample_lattice_weights(self.n_objectives, self.lattice_size, n_draw, self._rng),
                           n_distinct)
        return np.resize(w, (n, self.n_objectives))

    def tell(self, config: Mapping[str, Any], values: Sequence[float]) -> None:
        """Record the objective values (all minimised) of ``config``."""
        c = self._check_config(config)
        try:
            v = [float(x) for x in values]
        except (TypeError, ValueError):
            raise ConfigError(f"values must be a sequence of {self.n_objectives} numbers, got {values!r}") from None
        if len(v) != self.n_objectives:
            raise ConfigError(f"expected {self.n_objectives} objective values, got {len(v)}: {values!r}")
        if not all(math.isfinite(x) for x in v):
            raise ConfigError(f"objective values must be finite, got {values!r} for {c!r}")
        self._configs.append(c)
        self._Y.append(v)

    # ------------------------------------------------------------------ results
    @property
    def values(self) -> np.ndarray:
        """Told objective vectors, ``(n_told, n_objectives)``."""
        return np.asarray(self._Y, dtype=float).reshape(-1, self.n_objectives)

    @property
    def configs(self) -> list[dict[str, Any]]:
        """Told configurations, in telling order."""
        return [dict(c) for c in self._configs]

    def pareto_front(self) -> np.ndarray:
        """The non-dominated told objective vectors."""
        Y = self.values
        return Y[pareto_mask(Y)] if len(Y) else Y

    def pareto_configs(self) -> list[dict[str, Any]]:
        """The configurations whose objective vectors are non-dominated."""
        if not self._Y:
            return []
        return [dict(c) for c, keep in zip(self._configs, pareto_mask(self.values)) if keep]

    # ------------------------------------------------------------------ state
    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "n_objectives": self.n_objectives, "rho": self.rho,
                "lattice_size": self.lattice_size, "sample_more_weights": self.sample_more_weights}

    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-friendly state (observations, design queue, rng)."""
        return {**self._base_state(), "values": [list(v) for v in self._Y]}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output; settings in the state win over the constructor's."""
        if int(state.get("settings", {}).get("n_objectives", -1)) != self.n_objectives:
            raise ConfigError(f"state has n_objectives={state.get('settings', {}).get('n_objectives')!r}, "
                              f"this core has {self.n_objectives}")
        self._set_base_state(state)
        s = state["settings"]
        self.rho, self.lattice_size = float(s["rho"]), int(s["lattice_size"])
        self.sample_more_weights = int(s["sample_more_weights"])
        self._Y = [[float(x) for x in v] for v in state["values"]]
        if len(self._Y) != len(self._configs):
            raise ConfigError(f"state has {len(self._configs)} configurations but {len(self._Y)} value rows")
