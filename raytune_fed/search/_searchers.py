"""The Tune searchers: each builds its core, :class:`CoreSearcher` does the rest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raytune_fed._checks import check_int
from raytune_fed.algorithms import GPMinimizer, GPSettings, ParEGO
from raytune_fed.algorithms.gp import GP_BO_SETTINGS, check_gp_settings
from raytune_fed.errors import ConfigError
from raytune_fed.search._base import CoreSearcher
from raytune_fed.space import SearchSpace


class GPSearch(CoreSearcher):
    """Tune searcher for single-objective GP + expected-improvement search (:class:`GPMinimizer`).

    Concurrent trials enter the GP as constant liars, so parallel suggestions differ.
    """

    objectives_range = (1, 1)

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None, metric: str | None = None,
                 mode: str | None = None, points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, *,
                 seed: int, n_initial_points: int = 20, gp: GPSettings = GP_BO_SETTINGS) -> None:
        options = {"n_initial_points": check_int("n_initial_points", n_initial_points, 1),
                   "gp": check_gp_settings(gp).to_dict()}
        super().__init__(space, metric, mode, points_to_evaluate, seed=seed, options=options)

    def _build_core(self, space: SearchSpace, n_objectives: int, points: list[dict[str, Any]],
                    seed: int) -> GPMinimizer:
        return GPMinimizer(space, seed=seed, points_to_evaluate=points,
                           n_initial_points=self._options["n_initial_points"],
                           gp=GPSettings.from_dict(self._options["gp"]))


class ParEGOSearch(CoreSearcher):
    """Tune searcher for multi-objective ParEGO (:class:`ParEGO`).

    Give the metrics here (``metric=["a", "b"], mode=["min", "max"]``), not to
    ``TuneConfig``.  With ``max_concurrent_trials`` set, one ask proposes a point for every
    free slot from spread weight vectors and buffers the extras.
    """

    objectives_range = (2, None)

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None,
                 metric: Sequence[str] | None = None, mode: Sequence[str] | None = None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, *, seed: int,
                 n_initial_points: int = 20, rho: float = 0.05, lattice_size: int | None = None,
                 sample_more_weights: int = 5, gp: GPSettings = GPSettings()) -> None:
        if metric is None or mode is None:
            raise ConfigError(f"ParEGOSearch needs metric=[...] and mode=[...], got metric={metric!r}, mode={mode!r}")
        own = ParEGO.check_options(n_objectives=2, rho=rho, lattice_size=lattice_size,
                                   sample_more_weights=sample_more_weights)  # the metric count is checked below
        options = {"n_initial_points": check_int("n_initial_points", n_initial_points, 1), "rho": own["rho"],
                   "lattice_size": None if lattice_size is None else own["lattice_size"],
                   "sample_more_weights": own["sample_more_weights"],
                   "gp": check_gp_settings(gp).to_dict()}
        super().__init__(space, metric, mode, points_to_evaluate, seed=seed, options=options)

    def _build_core(self, space: SearchSpace, n_objectives: int, points: list[dict[str, Any]],
                    seed: int) -> ParEGO:
        o = self._options
        return ParEGO(space, n_objectives, seed=seed, points_to_evaluate=points,
                      n_initial_points=o["n_initial_points"], rho=o["rho"], lattice_size=o["lattice_size"],
                      sample_more_weights=o["sample_more_weights"], gp=GPSettings.from_dict(o["gp"]))
