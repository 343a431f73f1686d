"""GP-BO: a single-objective ask/tell minimiser with GP + expected improvement (no Ray)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raytune_fed._checks import check_int
from raytune_fed.algorithms._acquisition import propose_config, random_config
from raytune_fed.algorithms.base import Config, SearchCore
from raytune_fed.algorithms.gp import GP_BO_SETTINGS, GPSettings, check_gp_settings
from raytune_fed.random import Seed
from raytune_fed.space import SearchSpace


class GPMinimizer(SearchCore):
    """Ask/tell GP-BO minimiser over a :class:`SearchSpace` (one objective).

    Parameters
    ----------
    space : the search space (inputs are mapped to the unit cube; log dims on log scale).
    seed : root seed; the same seed and the same tells give the same proposals.
    n_initial_points : size of the initial design (``points_to_evaluate`` count towards it).
    points_to_evaluate : configurations proposed first, always, in order.
    gp : how the surrogate is fitted and EI maximised (:class:`GPSettings`; by default
        ``GP_BO_SETTINGS``, which polishes 5 EI candidates).

    A batch ``ask(n)`` proposes one point at a time, earlier points of the batch and
    ``pending`` entering the GP as constant liars.  Before two results are told the
    proposals are uniform random.
    """

    objectives_range = (1, 1)

    def __init__(self, space: SearchSpace, *, seed: Seed, n_initial_points: int = 20,
                 points_to_evaluate: Sequence[Mapping[str, Any]] = (), gp: GPSettings = GP_BO_SETTINGS) -> None:
        self.gp = check_gp_settings(gp)
        super().__init__(space, seed=seed, n_objectives=1, n_initial_points=check_int("n_initial_points",
                                                                                      n_initial_points, 1),
                         points_to_evaluate=points_to_evaluate)

    def _propose(self, n: int, pending: list[Config]) -> list[Config]:
        out: list[Config] = []
        X = self.space.to_unit(self._configs)
        for _ in range(n):
            if self.n_told < 2:
                out.append(random_config(self.space, self._configs + pending + out, self._rng))
            else:
                out.append(propose_config(self.space, X, self._Y[:, 0], pending + out, rng=self._rng,
                                          settings=self.gp))
        return out

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "gp": self.gp.to_dict()}
