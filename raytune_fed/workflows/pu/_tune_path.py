"""ODE through Ray Tune: one trial per configuration, :class:`PUHalvingScheduler` deciding the rungs.

The trainable does what one job of :func:`~raytune_fed.workflows.pu._ode.run_ode` does
(same row ordering, same density ratio, same model seeds), so for one seed the Tune path
and the in-process core see the same values and select the same configuration in
synchronous mode.  The split and everything derived from it go to the object store once
(``tune.with_parameters``).  Each report carries ``train_seconds`` (fit plus evaluation)
and ``train_cpu_seconds`` (its CPU seconds) so the caller can set the training time apart
from Tune's own cost.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import ray
from ray import tune

from raytune_fed.metrics import auc
from raytune_fed.random import derive, seed_int
from raytune_fed.schedulers import PUHalvingScheduler
from raytune_fed.simulation import PUSplit
from raytune_fed.workflows.pu._ode import (
    FIT_FAILURES,
    ODE_MIN_ROWS,
    ODESettings,
    ValidationCriterion,
    build_model,
    configuration_set,
    nested_order,
    search_budget,
)

METRIC = "pu_score"


@dataclass
class TuneSearchResult:
    """The Tune path's choice and what it cost."""

    config: dict[str, Any]
    config_id: int
    test_auc: float
    rows_used: int
    wall_seconds: float
    train_seconds: float
    train_cpu_seconds: float
    n_trial_rungs: int
    n_cpus: float


def _trainable(trial_config: dict, data: dict) -> None:
    config = trial_config["config"]
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "rung.json")) as f:
            start = json.load(f)["rung"] + 1
    X, s = data["X_train"], data["s_train"]
    for rung in range(start, len(data["rows"])):
        t0, cpu0 = time.perf_counter(), time.process_time()
        rows = data["order"][:data["rows"][rung]]
        try:
            model = build_model(config, prior=data["prior"], seed=data["model_seed"]).fit(X[rows], s[rows])
            value = data["criterion"](model)
        except FIT_FAILURES:
            value = float("nan")     # as run_ode: the scheduler discards the job, it ranks last
        spent, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "rung.json"), "w") as f:
                json.dump({"rung": rung}, f)
            tune.report({METRIC: value, "n_rows": int(data["rows"][rung]), "train_seconds": spent,
                         "train_cpu_seconds": cpu},
                        checkpoint=tune.Checkpoint.from_directory(d))


def run_ode_tune(split: PUSplit, settings: ODESettings, *, prior: float, seed: Any, storage_path: str,
                 name: str = "ode", configs: Sequence[Mapping[str, Any]] | None = None) -> TuneSearchResult:
    """ODE on ``split`` as a Tune experiment (needs a Ray session); the choice is refitted and tested.

    ``configs`` replaces the learners' grid as Omega (as for :func:`run_ode`).
    """
    configs = configuration_set(settings.learners) if configs is None else [dict(c) for c in configs]
    scheduler = PUHalvingScheduler(n_configs=len(configs), n_rows=split.n_train, seed=derive(seed, "ode", "ties"),
                                   budget_samples=search_budget(split, settings),
                                   budget_seconds=settings.budget_seconds, time_attr="train_seconds",
                                   schedule=settings.schedule, eta0=settings.eta0, mu=settings.mu,
                                   min_rows=ODE_MIN_ROWS, asynchronous=settings.asynchronous)
    data = {"X_train": split.X_train, "s_train": split.s_train,
            "order": nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling),
            "rows": scheduler.rung_rows, "criterion": ValidationCriterion(split, settings, seed=seed),
            "prior": prior, "model_seed": seed_int(derive(seed, "ode", "models"))}
    tuner = tune.Tuner(tune.with_parameters(_trainable, data=data),
                       param_space={"config": tune.grid_search(configs)},
                       tune_config=tune.TuneConfig(scheduler=scheduler, metric=METRIC, mode="max", reuse_actors=True),
                       run_config=tune.RunConfig(storage_path=storage_path, name=name, verbose=0,
                                                 callbacks=[scheduler.state_callback()]))
    t0 = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - t0
    train_cpu = sum(float(row.get("train_cpu_seconds", 0.0)) for result in grid
                    if result.metrics_dataframe is not None
                    for row in result.metrics_dataframe.to_dict("records"))
    best = configs[scheduler.best_config_id]
    final = build_model(best, prior=prior, seed=data["model_seed"]).fit(split.X_train, split.s_train)
    return TuneSearchResult(config=best, config_id=scheduler.best_config_id,
                            test_auc=auc(split.y_test, final.decision_function(split.X_test)),
                            rows_used=scheduler.rows_used, wall_seconds=wall, train_seconds=scheduler.seconds_used,
                            train_cpu_seconds=train_cpu,
                            n_trial_rungs=len(scheduler.results()), n_cpus=float(ray.cluster_resources().get("CPU", 1)))
