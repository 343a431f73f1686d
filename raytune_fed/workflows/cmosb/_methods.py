"""The methods CMOSB is compared with (paper section VII-A), as Tune search spaces and searchers.

* ``cmosb`` - :class:`~raytune_fed.search.NSGA2Search` over Table III's space (population
  20, 40 generations by default) with the paper's variation (:data:`PAPER_VARIATION`);
  ``max_cost`` / ``max_leakage`` become constraints with the paper's penalty (alpha = 20)
  or pymoo's constraint domination;
* ``es`` - empirical selection: FATE's defaults, VF2Boost's, and their average, each with
  one local tree and no purity threshold (``theta_p = 1``);
* ``gs`` - a grid through ``tune.grid_search``: ``grid_levels`` values of every parameter, the
  midpoints of equal slices of Table III's ranges (the paper does not list its grid; 2
  levels give 64 configurations);
* ``bo`` - Optuna's TPE through Ray's ``OptunaSearch``, one run per objective (the paper
  optimises each objective separately), proposing ``bo_batch`` trials at a time: each batch
  waits for the previous one (Tune's ``ConcurrencyLimiter(batch=True)``), so what TPE has
  seen when it proposes does not depend on which trial happened to finish first, and the
  same seed gives the same trials on any number of CPUs.

Every method is a list of :class:`Run`; a run is one ``tune.Tuner`` experiment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.random import derive, seed_int
from raytune_fed.space import Float, Int, SearchSpace
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES, PARAMETERS, search_space

METHODS = ("cmosb", "es", "gs", "bo")
BASELINES = ("es", "gs", "bo")

PAPER_VARIATION: dict[str, Any] = {"crossover": "sbx", "crossover_prob": 0.9, "crossover_eta": 2.0,
                                   "mutation_prob": 0.1, "mutation_eta": 20.0}
"""Section VII-A's CMOSB setup for real-valued genes: SBX (p 0.9, n_c 2), polynomial mutation (p 0.1, n_m 20)."""

ES_PRESETS: dict[str, dict[str, Any]] = {
    "fate": {"n_federated_trees": 5, "max_depth": 3, "learning_rate": 0.3, "subsample": 0.8},
    "vf2boost": {"n_federated_trees": 20, "max_depth": 7, "learning_rate": 0.1, "subsample": 0.8},
    "average": {"n_federated_trees": 10, "max_depth": 5, "learning_rate": 0.3, "subsample": 0.8},
}
"""Section VII-A's empirical settings; all with ``n_local_trees=1`` and ``purity_threshold=1``."""
ES_COMMON = {"n_local_trees": 1, "purity_threshold": 1.0}


def es_config(preset: str) -> dict[str, Any]:
    return {**ES_PRESETS[preset], **ES_COMMON}


@dataclass(frozen=True)
class Run:
    """One Tune experiment of a method: its name, parameter space, searcher factory and trial budget."""

    method: str
    name: str
    param_space: dict[str, Any]
    num_samples: int
    make_searcher: Callable[[], Any] | None = None
    max_concurrent: int = 0


def grid_values(space: SearchSpace, levels: int) -> dict[str, list[Any]]:
    """The midpoints of ``levels`` equal slices of each range (integers rounded, duplicates dropped)."""
    out: dict[str, list[Any]] = {}
    for p in space.params:
        if not isinstance(p, (Float, Int)):
            raise ConfigError(f"grid_values needs numeric parameters, {p.name!r} is a {type(p).__name__}")
        grid = p.low + (np.arange(levels) + 0.5) / levels * (p.high - p.low)
        out[p.name] = (sorted({int(round(v)) for v in grid}) if isinstance(p, Int)
                       else [round(float(v), 6) for v in grid])
    return out


def tune_domains(space: SearchSpace) -> dict[str, Any]:
    """Tune domains of ``space`` (Tune's ``randint`` upper bound is exclusive)."""
    from ray import tune  # lazily: importing the workflow loads no Ray (see the package docstring)

    out: dict[str, Any] = {}
    for p in space.params:
        if isinstance(p, Int):
            out[p.name] = tune.randint(p.low, p.high + 1)
        elif isinstance(p, Float):
            out[p.name] = tune.uniform(p.low, p.high)
    return out


def method_runs(method: str, *, binary: bool, seed: Any, population: int, generations: int,
                constraints: Mapping[str, tuple[str, float]], grid_levels: int, bo_trials: int,
                constraint_handling: str = "penalty", bo_batch: int = 2) -> list[Run]:
    """The Tune experiments of ``method`` (one of :data:`METHODS`)."""
    from ray import tune  # lazily: importing the workflow loads no Ray (see the package docstring)

    space = search_space(binary)
    if method == "cmosb":
        from raytune_fed.search import NSGA2Search  # lazily: it loads Ray Tune

        def nsga2() -> Any:
            return NSGA2Search(space, metric=list(OBJECTIVES), mode=["min"] * len(OBJECTIVES),
                               seed=seed_int(derive(seed, "cmosb")), population_size=population,
                               n_generations=generations, constraints=dict(constraints) or None,
                               constraint_handling=constraint_handling, **PAPER_VARIATION)

        return [Run("cmosb", "cmosb", {}, population * generations, nsga2, population)]
    if method == "es":
        return [Run("es", "es", {"es": tune.grid_search([{"name": n, **es_config(n)} for n in ES_PRESETS])}, 1)]
    if method == "gs":
        grid = {name: tune.grid_search(values) for name, values in grid_values(space, grid_levels).items()}
        return [Run("gs", "gs", grid, 1)]
    if method == "bo":
        runs = []
        for objective in OBJECTIVES:
            def tpe(objective: str = objective) -> Any:
                import optuna  # lazily, with Ray Tune's Optuna adapter: only BO runs need them
                from ray.tune.search import ConcurrencyLimiter
                from ray.tune.search.optuna import OptunaSearch

                sampler = optuna.samplers.TPESampler(seed=seed_int(derive(seed, "bo", objective)))
                return ConcurrencyLimiter(OptunaSearch(metric=objective, mode="min", sampler=sampler),
                                          max_concurrent=bo_batch, batch=True)

            runs.append(Run("bo", f"bo_{objective}", tune_domains(space), bo_trials, tpe))
        return runs
    raise KeyError(method)


def trial_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """SecureBoost parameters of a trial's configuration (an ES entry ``{"es": {...}}`` or the six parameters)."""
    source = config["es"] if "es" in config else config
    return {name: source[name] for name in PARAMETERS}
