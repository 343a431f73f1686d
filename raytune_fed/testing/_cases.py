"""The cores and searchers of this package as contract cases (what ``tests/test_contracts.py`` runs).

A new core or searcher registers by adding its case to ``CORE_CASES`` / ``SEARCHER_CASES``
below (or by running ``CORE_CHECKS`` / ``SEARCHER_CHECKS`` over a case in its own tests).
The problems are small and cheap; the space mixes a log-scaled real, an integer and a
categorical parameter so that snapping and the JSON round trips are exercised.
"""

from __future__ import annotations

import math

from raytune_fed.algorithms import GPMinimizer, ParEGO, SuccessiveHalving
from raytune_fed.algorithms.nsga2 import NSGA2
from raytune_fed.space import Categorical, Float, Int, SearchSpace
from raytune_fed.testing._cores import CoreCase
from raytune_fed.testing._searchers import SearcherCase

MIXED = SearchSpace((Float("lr", 1e-4, 1e-1, log=True), Float("x", -1.0, 1.0), Int("depth", 1, 6),
                     Categorical("kind", ("a", "b", "c"))))
_KIND = {"a": 0.3, "b": 0.0, "c": 0.6}
_FIRST = {"lr": 1e-1, "x": 1.0, "depth": 6, "kind": "c"}  # the range's upper edges, log scale included


def one_objective(config: dict) -> list[float]:
    return [(math.log10(config["lr"]) + 2.5) ** 2 + (config["x"] - 0.2) ** 2 + (config["depth"] - 4) ** 2 / 8
            + _KIND[config["kind"]]]


def two_objectives(config: dict) -> list[float]:
    u = (math.log10(config["lr"]) + 4) / 3
    return [u + 0.1 * config["x"] ** 2, (1 - u) ** 2 + 0.05 * config["depth"] + _KIND[config["kind"]]]


def make_gp_minimizer(seed) -> GPMinimizer:
    return GPMinimizer(MIXED, seed=seed, n_initial_points=4, points_to_evaluate=[_FIRST])


def make_parego(seed) -> ParEGO:
    return ParEGO(MIXED, 2, seed=seed, n_initial_points=4, points_to_evaluate=[_FIRST])


def make_nsga2(seed) -> NSGA2:
    return NSGA2(MIXED, 2, seed=seed, population_size=4, n_constraints=1, points_to_evaluate=[_FIRST])


def depth_at_most_four(config: dict) -> list[float]:
    return [config["depth"] - 4.0]


def _tune_space() -> dict:
    from ray import tune

    return {"lr": tune.loguniform(1e-4, 1e-1), "x": tune.uniform(-1.0, 1.0), "depth": tune.randint(1, 7),
            "kind": tune.choice(["a", "b", "c"]), "inner": {"q": tune.qrandint(0, 10, 2), "const": "kept"}}


def tune_one_objective(config: dict) -> dict:
    return {"loss": one_objective(config)[0] + 0.01 * config["inner"]["q"], "other": 1.0}


def tune_two_objectives(config: dict) -> dict:
    f1, f2 = two_objectives(config)
    return {"f1": f1 + 0.01 * config["inner"]["q"], "score": -f2}  # "score" is maximised


def make_gp_search(seed):
    from raytune_fed.search import GPSearch

    return GPSearch(_tune_space(), "loss", "min", seed=seed, n_initial_points=4)


def make_parego_search(seed):
    from raytune_fed.search import ParEGOSearch

    return ParEGOSearch(_tune_space(), ["f1", "score"], ["min", "max"], seed=seed, n_initial_points=4)


def tune_two_objectives_with_cost(config: dict) -> dict:
    return {**tune_two_objectives(config), "cost": float(config["depth"])}


def make_nsga2_search(seed):
    from raytune_fed.search import NSGA2Search

    return NSGA2Search(_tune_space(), ["f1", "score"], ["min", "max"], seed=seed, population_size=4,
                       constraints={"cost": ("<=", 4.0)}, constraint_handling="penalty")


_HALVING_SET = [{"lr": lr, "kind": kind} for lr in (1e-4, 1e-3, 1e-2, 1e-1) for kind in ("a", "b", "c")]


def halving_objective(job: dict) -> list[float]:
    """A validation loss that shrinks with the rows trained on (what a halving core is told)."""
    return [(math.log10(job["lr"]) + 2.5) ** 2 + _KIND[job["kind"]] + 10.0 / job["n_rows"]]


def make_halving(seed) -> SuccessiveHalving:
    return SuccessiveHalving(_HALVING_SET, n_rows=400, seed=seed, schedule="sh")


def make_async_halving(seed) -> SuccessiveHalving:
    return SuccessiveHalving(_HALVING_SET, n_rows=400, seed=seed, schedule="selfpaced", asynchronous=True)


CORE_CASES = (CoreCase("GPMinimizer", make_gp_minimizer, one_objective),
              CoreCase("ParEGO", make_parego, two_objectives),
              CoreCase("NSGA2", make_nsga2, two_objectives, constraints=depth_at_most_four, exact_batch=False),
              CoreCase("SuccessiveHalving", make_halving, halving_objective, n_rounds=12, exact_batch=False,
                       best_is_lowest=False),
              CoreCase("SuccessiveHalving-async", make_async_halving, halving_objective, n_rounds=12,
                       exact_batch=False, best_is_lowest=False))
SEARCHER_CASES = (SearcherCase("GPSearch", make_gp_search, tune_one_objective),
                  SearcherCase("ParEGOSearch", make_parego_search, tune_two_objectives),
                  SearcherCase("NSGA2Search", make_nsga2_search, tune_two_objectives_with_cost))
