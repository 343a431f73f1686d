"""ODE through Ray Tune: one trial per configuration, :class:`PUHalvingScheduler` deciding the rungs.

The trainable does what one job of :func:`~raytune_fed.workflows.pu._ode.run_ode` does
(same row ordering, same density ratio, same model seeds), so for one seed the Tune path
and the in-process core see the same values and select the same configuration in
synchronous mode.  The split and everything derived from it go to the object store once
(``tune.with_parameters``).  Each report carries ``train_seconds`` (fit plus evaluation)
and ``train_cpu_seconds`` (its CPU seconds) so the caller can set the training time apart
from Tune's own cost.  Tune's CSV, JSON and TensorBoard loggers are off for the run; the rung
reports come back in :attr:`TuneSearchResult.reports`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    reports: list[dict[str, Any]] = field(default_factory=list)
    """Every rung report: ``config_id``, ``rung``, the trainable's wall-clock ``trial_started`` (this
    actor took the trial), ``rung_started``, ``rung_ended``, ``train_cpu_seconds`` and the worker's ``pid``."""


def _trainable(trial_config: dict, data: dict) -> None:
    config = trial_config["config"]
    trial_started = time.time()     # wall clock: comparable across workers (when this actor took the trial)
    checkpoint = tune.get_checkpoint()
    start = 0
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "rung.json")) as f:
            start = json.load(f)["rung"] + 1
    X, s = data["X_train"], data["s_train"]
    for rung in range(start, len(data["rows"])):
        t0, cpu0, rung_started = time.perf_counter(), time.process_time(), time.time()
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
                         "train_cpu_seconds": cpu, "trial_started": trial_started,
                         "rung_started": rung_started, "rung_ended": time.time(), "pid": os.getpid()},
                        checkpoint=tune.Checkpoint.from_directory(d))


class _Reports(tune.Callback):
    """Every rung report, kept in the driver (in place of Tune's CSV, JSON and TensorBoard loggers)."""

    KEYS = ("n_rows", "trial_started", "rung_started", "rung_ended", "train_cpu_seconds", "pid")

    def __init__(self) -> None:
        self.rows: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        self.rows.append((trial.config["config"], {k: result[k] for k in self.KEYS if k in result}))


def _no_file_loggers() -> list[tune.Callback]:
    """Tune's CSV, JSON and TensorBoard logger callbacks, writing nothing.

    Tune adds each of its default loggers unless one of its class is among the run's callbacks; they write every
    report of every trial from the driver (TensorBoard's with an fsync), a tenth of the driver's time here, and
    nothing reads them (:class:`_Reports` keeps the reports).  Handing Tune silent instances keeps that to this
    run, where the ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS`` variable would switch them off in the whole process.
    """
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback, TBXLoggerCallback

    def silent(base: type) -> tune.Callback:
        def nothing(self: Any, *args: Any, **kwargs: Any) -> None:
            return None

        names = ("__init__", "log_trial_start", "log_trial_restore", "log_trial_save", "log_trial_result",
                 "log_trial_end")
        return type(f"Silent{base.__name__}", (base,), dict.fromkeys(names, nothing))()

    return [silent(CSVLoggerCallback), silent(JsonLoggerCallback), silent(TBXLoggerCallback)]


def _trainable_data(split: PUSplit, settings: ODESettings, *, prior: float, seed: Any,
                    rung_rows: Sequence[int]) -> dict[str, Any]:
    """What :func:`_trainable` reads (sent once, with ``tune.with_parameters``): as one job of ``run_ode``."""
    return {"X_train": split.X_train, "s_train": split.s_train,
            "order": nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling),
            "rows": list(rung_rows), "criterion": ValidationCriterion(split, settings, seed=seed),
            "prior": prior, "model_seed": seed_int(derive(seed, "ode", "models"))}


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
    data = _trainable_data(split, settings, prior=prior, seed=seed, rung_rows=scheduler.rung_rows)
    collected = _Reports()
    callbacks = [scheduler.state_callback(), collected, *_no_file_loggers()]
    tuner = tune.Tuner(tune.with_parameters(_trainable, data=data),
                       param_space={"config": tune.grid_search(configs)},
                       tune_config=tune.TuneConfig(scheduler=scheduler, metric=METRIC, mode="max", reuse_actors=True),
                       run_config=tune.RunConfig(storage_path=storage_path, name=name, verbose=0,
                                                 callbacks=callbacks))
    t0 = time.perf_counter()
    tuner.fit()
    wall = time.perf_counter() - t0
    rungs = {n: t for t, n in enumerate(scheduler.rung_rows)}
    reports = [{"config_id": configs.index(config), "rung": rungs[int(row.pop("n_rows"))], **row}
               for config, row in collected.rows]
    train_cpu = sum(float(row["train_cpu_seconds"]) for row in reports)
    best = configs[scheduler.best_config_id]
    final = build_model(best, prior=prior, seed=data["model_seed"]).fit(split.X_train, split.s_train)
    return TuneSearchResult(config=best, config_id=scheduler.best_config_id,
                            test_auc=auc(split.y_test, final.decision_function(split.X_test)),
                            rows_used=scheduler.rows_used, wall_seconds=wall, train_seconds=scheduler.seconds_used,
                            train_cpu_seconds=train_cpu,
                            n_trial_rungs=len(scheduler.results()), n_cpus=float(ray.cluster_resources().get("CPU", 1)),
                            reports=reports)
