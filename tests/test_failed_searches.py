"""A search whose every trial failed says so: no "best" configuration is ever named.

The halving core (and so ``PUHalvingScheduler`` and ODE) raises when every job failed;
the multi-objective searchers return an empty front.
"""

from __future__ import annotations

import pytest

from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.errors import ConfigError


def _core():
    return SuccessiveHalving([{"c": i} for i in range(4)], n_rows=400, seed=0, schedule="sh")


def test_halving_core_with_every_job_failed_names_no_best():
    core = _core()
    while not core.is_finished:
        core.discard(core.ask(4))
    with pytest.raises(ConfigError, match="every job failed"):
        core.best_id()
    with pytest.raises(ConfigError, match="every job failed"):
        core.best()


def test_halving_core_skips_a_top_rung_where_every_job_failed():
    core = _core()
    first = core.ask(4)
    core.tell(first, [[float(job["c"])] for job in first])     # config 0 is best in rung 0
    while not core.is_finished:
        core.discard(core.ask(4))
    config_id, value = core.best_id()
    assert (config_id, value) == (0, 0.0)


def test_halving_core_with_nothing_told_names_no_best():
    with pytest.raises(ConfigError, match="no results told yet"):
        _core().best_id()


def _always_fails(config):
    raise RuntimeError("this trial fails on purpose")


def test_pu_halving_scheduler_with_every_trial_failed_names_no_best(ray_session, tmp_path):
    from ray import tune

    from raytune_fed.schedulers import PUHalvingScheduler

    scheduler = PUHalvingScheduler(n_configs=3, n_rows=300, seed=0, metric="ipm", mode="max", schedule="sh")
    tune.Tuner(_always_fails, param_space={"lam": tune.grid_search([0.1, 1.0, 10.0])},
               tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
               run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    with pytest.raises(ConfigError, match="every job failed"):
        scheduler.best_config_id  # noqa: B018 - the property raises


def test_parego_search_with_every_trial_failed_has_an_empty_front(ray_session, tmp_path):
    from ray import tune

    from raytune_fed.search import ParEGOSearch

    searcher = ParEGOSearch(metric=["a", "b"], mode=["min", "min"], n_initial_points=3, seed=0)
    results = tune.Tuner(_always_fails, param_space={"x": tune.uniform(0.0, 1.0)},
                         tune_config=tune.TuneConfig(search_alg=searcher, num_samples=4, reuse_actors=True),
                         run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    assert all(r.error is not None for r in results)
    assert searcher.core.pareto_front().shape == (0, 2)
    assert searcher.core.pareto_configs() == []
