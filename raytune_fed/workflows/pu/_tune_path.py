"""ODE through Ray Tune: one trial per configuration, :class:`PUHalvingScheduler` deciding the rungs.

The trainable does what one job of :func:`~raytune_fed.workflows.pu._ode.run_ode` does
(same row ordering, same density ratio, same model seeds), so for one seed the Tune path
and the in-process core see the same values and select the same configuration in
synchronous mode.  The split and everything derived from it go to the object store once
(``tune.with_parameters``).  Each report carries ``train_seconds`` (fit plus evaluation)
so the caller can set the training time apart from Tune's own cost.
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

from raytune_fed.metrics import DensityRatio, auc, pu_score
from raytune_fed.random import derive, seed_int
from raytune_fed.schedulers import PUHalvingScheduler
from raytune_fed.simulation import PUSplit
from raytune_fed.workflows.pu._ode import (
    FIT_FAILURES,
    ODE_MIN_ROWS,
    ODESettings,
    build_model,
    configuration_set,
    nested_order,
    validation_scores,
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
        t0 = time.perf_counter()
        rows = data["order"][:data["rows"][rung]]
        try:
            model = build_model(config, prior=data["prior"], seed=data["model_seed"]).fit(X[rows], s[rows])
            value = pu_score(data["s_val"], validation_scores(model, data["X_val"]), evaluator=data["evaluator"],
                             ratio=data["ratio"])
        except FIT_FAILURES:
            value = float("nan")     # as run_ode: the scheduler discards the job, it ranks last
        spent = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "rung.json"), "w") as f:
                json.dump({"rung": rung}, f)
            tune.report({METRIC: value, "n_rows": int(data["rows"][rung]), "train_seconds": spent},
                        checkpoint=tune.Checkpoint.from_directory(d))


def run_ode_tune(split: PUSplit, settings: ODESettings, *, prior: float, seed: Any, storage_path: str,
                 name: str = "ode", configs: Sequence[Mapping[str, Any]] | None = None) -> TuneSearchResult:
    """ODE on ``split`` as a Tune experiment (needs a Ray session); the choice is refitted and tested.

    ``configs`` replaces the learners' grid as Omega (as for :func:`run_ode`).
    """
    configs = configuration_set(settings.learners) if configs is None else [dict(c) for c in configs]
    budget = split.n_pu if settings.budget_samples is None else settings.budget_samples
    scheduler = PUHalvingScheduler(n_configs=len(configs), n_rows=split.n_train, seed=derive(seed, "ode", "ties"),
                                   budget_samples=budget, budget_seconds=settings.budget_seconds,
                                   time_attr="train_seconds", schedule=settings.schedule, eta0=settings.eta0,
                                   mu=settings.mu, min_rows=ODE_MIN_ROWS, asynchronous=settings.asynchronous)
    ratio = None
    if settings.control_variate:
        ntc = DensityRatio(seed=seed_int(derive(seed, "ode", "ntc"))).fit(split.X_train, split.s_train)
        ratio = ntc.ratio(split.X_val[split.s_val == 1])
    data = {"X_train": split.X_train, "s_train": split.s_train, "X_val": split.X_val, "s_val": split.s_val,
            "order": nested_order(split.s_train, derive(seed, "ode", "order")), "rows": scheduler.rung_rows,
            "ratio": ratio, "prior": prior, "model_seed": seed_int(derive(seed, "ode", "models")),
            "evaluator": settings.evaluator}
    tuner = tune.Tuner(tune.with_parameters(_trainable, data=data),
                       param_space={"config": tune.grid_search(configs)},
                       tune_config=tune.TuneConfig(scheduler=scheduler, metric=METRIC, mode="max", reuse_actors=True),
                       run_config=tune.RunConfig(storage_path=storage_path, name=name, verbose=0,
                                                 callbacks=[scheduler.state_callback()]))
    t0 = time.perf_counter()
    tuner.fit()
    wall = time.perf_counter() - t0
    best = configs[scheduler.best_config_id]
    final = build_model(best, prior=prior, seed=data["model_seed"]).fit(split.X_train, split.s_train)
    return TuneSearchResult(config=best, config_id=scheduler.best_config_id,
                            test_auc=auc(split.y_test, final.decision_function(split.X_test)),
                            rows_used=scheduler.rows_used, wall_seconds=wall, train_seconds=scheduler.seconds_used,
                            n_trial_rungs=len(scheduler.results()), n_cpus=float(ray.cluster_resources().get("CPU", 1)))
