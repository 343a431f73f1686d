"""Single-objective Bayesian optimisation: a GP + expected-improvement ask/tell core.

``GPMinimizer`` always *minimises*; a Tune adapter flips ``mode="max"`` at its boundary.
The first proposals are ``points_to_evaluate`` and then a Latin-hypercube design; once
``n_initial_points`` results are in (or the design is used up), each proposal maximises
expected improvement of the GP surrogate (see :mod:`raytune_fed.algorithms._gp`).  Pending
configurations enter the GP as a "constant liar" (their value is the current best), so
concurrent asks differ.  No Ray import here.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.algorithms._gp import CoreBase
from raytune_fed.space import SearchSpace


class GPMinimizer(CoreBase):
    """Ask/tell GP-BO minimiser over a :class:`SearchSpace`.

    Parameters
    ----------
    space : the search space (inputs are mapped to the unit cube; log dims on log scale).
    n_initial_points : size of the initial design (``points_to_evaluate`` count towards it).
    points_to_evaluate : configurations proposed first, always, in order.
    seed : root seed; the same seed and the same tells give the same proposals.
    noise : fit a bounded white-noise nugget (``True``) or use a fixed tiny one.
    xi : exploration margin of expected improvement, in objective units.
    n_restarts : extra random restarts of the GP hyperparameter optimiser.

    Non-finite values passed to :meth:`tell` raise :class:`ConfigError`: the caller
    decides (the Tune adapter drops such trials and logs it).
    """

    def __init__(self, space: SearchSpace, *, n_initial_points: int = 20,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, seed: int | None = None,
                 noise: bool = True, xi: float = 0.0, n_restarts: int = 2) -> None:
        super().__init__(space, n_initial_points=n_initial_points, points_to_evaluate=points_to_evaluate,
                         seed=seed, noise=noise, xi=xi, n_restarts=n_restarts)
        self._y: list[float] = []

    def ask(self, pending: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The next configuration to evaluate, given configurations still being evaluated."""
        initial = self._pop_initial()
        if initial is not None:
            return initial
        pending = self._check_pending(pending)
        if self.n_told < 2:
            return self._random(self._configs + pending)
        return self._propose(self._configs, np.asarray(self._y), pending)

    def tell(self, config: Mapping[str, Any], value: float) -> None:
        """Record that ``config`` scored ``value`` (lower is better)."""
        c = self._check_config(config)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not math.isfinite(float(value)):
            raise ConfigError(f"value must be a finite number, got {value!r} for {c!r}")
        self._configs.append(c)
        self._y.append(float(value))

    @property
    def values(self) -> np.ndarray:
        """Told objective values, in telling order."""
        return np.asarray(self._y, dtype=float)

    @property
    def configs(self) -> list[dict[str, Any]]:
        """Told configurations, in telling order."""
        return [dict(c) for c in self._configs]

    def best(self) -> tuple[dict[str, Any], float]:
        """The told configuration with the lowest value (first one on ties)."""
        if not self._y:
            raise ConfigError("no results told yet, so there is no best configuration")
        i = int(np.argmin(self._y))
        return dict(self._configs[i]), self._y[i]

    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-friendly state (observations, design queue, rng)."""
        return {**self._base_state(), "values": list(self._y)}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output; settings in the state win over the constructor's."""
        self._set_base_state(state)
        self._y = [float(v) for v in state["values"]]
        if len(self._y) != len(self._configs):
            raise ConfigError(f"state has {len(self._configs)} configurations but {len(self._y)} values")
