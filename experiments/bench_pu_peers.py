"""ODE's halving against the peers a user would otherwise pick: Optuna's SuccessiveHalvingPruner and Ray Tune's
ASHAScheduler, same inputs.

For every dataset x c x replication (the PU grid's split and TIcE prior: the same
``derive(seed, dataset, "c=<c>", rep)`` streams as ``raytune-fed pu``) both searches get the
same 100 uPU configurations of Table 3, the same nested row order (each configuration's
training rows grow by inclusion), the same criterion (IPM_PU with the shipped control variate,
:class:`~raytune_fed.workflows.pu._ode.ValidationCriterion`) and the same sample budget
``B = N`` (rows fed to learners over the whole search):

* ``ode`` - :func:`~raytune_fed.workflows.pu.run_ode`, self-paced schedule (the shipped search);
* ``optuna_sh`` - an Optuna study, ``GridSampler`` over the 100 configurations (each tried once,
  in a seeded order) and ``SuccessiveHalvingPruner(min_resource=r0, reduction_factor=2)``
  (``r0`` = ODE's first-rung rows, 2 the integer nearest ODE's ``1 / mu``); a trial reports the
  criterion after ``r0, 2 r0, 4 r0, ...`` rows and after all training rows, and is pruned when
  the pruner says so; a fit that fails (a prefix too small to fit on) reports nothing and the
  trial goes on to its next step.  Optuna has no sample budget, so the study counts rows before each fit and
  stops a trial whose next fit would exceed ``B`` (later trials then train nothing);
* ``optuna_sh_uncapped`` - the same study without the cap, as a user would run it (its rows are
  reported: what Optuna's halving spends on these inputs).  In both, the
  selection is the configuration with the best value among those that reached the highest
  step any trial reached (Optuna's ``best_trial`` covers completed trials only, which need every
  training row);
* ``ode_tune`` - the shipped search through Ray Tune: :func:`~raytune_fed.workflows.pu.run_ode_tune`,
  :class:`~raytune_fed.schedulers.PUHalvingScheduler` (synchronous), one trial per configuration;
* ``asha`` / ``asha_uncapped`` - Ray Tune's own ``ASHAScheduler(time_attr="n_rows", grace_period=r0,
  reduction_factor=2, max_t=<training rows>, brackets=1)``, one trial per configuration (in a seeded
  order) reporting the criterion after the same steps as the Optuna study; one trial at a time
  (``max_concurrent_trials=1``: the same sequential order on every run, as the Optuna study's).  ASHA has
  no sample budget either: for ``asha`` a ledger actor counts rows before each fit and ends a trial
  whose next fit would exceed ``B``; ``asha_uncapped`` runs without it.  The selection is chosen as for
  Optuna.

Both selections are refitted on all training rows and scored on the test rows.  Per split the
benchmark records test AUC, rows fed, the number of fits and CPU seconds (this process,
one thread; for the Tune runs the trainables' own fit-and-score CPU seconds, and the wall seconds of
the Tune run: Tune's own CPU cost per trial-rung is measured by ``experiments/bench_pu_tune.py``).  ``python experiments/bench_pu_peers.py``
writes ``--out`` (default ``experiments/measured/bench_pu_peers.json``); finished splits are kept in
``--rows`` (JSON lines), so an interrupted run resumes, and a stored split that lacks a method of
``--methods`` gets only that method computed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

DATASETS = ("twonorm", "spambase", "chess", "sat", "texture", "titanic")
METHODS = ("ode", "optuna_sh", "optuna_sh_uncapped", "ode_tune", "asha", "asha_uncapped")
TUNE_METHODS = ("ode_tune", "asha", "asha_uncapped")
METRIC = "pu_score"


def halving_steps(r0: int, n_train: int) -> list[int]:
    """The rows after which a peer's trial reports: r0, 2 r0, 4 r0, ... below the training rows, then all of them."""
    steps, r = [], r0
    while r < n_train:
        steps.append(r)
        r *= 2
    return [*steps, n_train]


def _optuna_sh(split, settings, *, prior: float, seed, configs: list, budget: int | None, r0: int) -> dict:
    import optuna

    from raytune_fed.metrics import auc
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu._ode import (
        FIT_FAILURES,
        ValidationCriterion,
        build_model,
        nested_order,
    )

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    order = nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling)
    criterion = ValidationCriterion(split, settings, seed=seed)
    model_seed = seed_int(derive(seed, "ode", "models"))
    steps = halving_steps(r0, split.n_train)
    state = {"rows": 0, "fits": 0, "failed": 0}
    reached: dict[int, tuple[int, float]] = {}      # trial number -> (deepest step, its value)

    def objective(trial):
        config = configs[trial.suggest_categorical("config_id", list(range(len(configs))))]
        value = None
        for step in steps:
            if budget is not None and state["rows"] + step > budget:
                break                                   # the sample budget B: no fit beyond it
            state["rows"] += step
            state["fits"] += 1
            rows = order[:step]
            try:
                model = build_model(config, prior=prior, seed=model_seed).fit(split.X_train[rows], split.s_train[rows])
                value = criterion(model)
            except FIT_FAILURES:
                state["failed"] += 1                    # no report at this step: judged at its next one
                continue
            reached[trial.number] = (step, value)
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        if value is None:
            raise optuna.TrialPruned()
        return value

    sampler = optuna.samplers.GridSampler({"config_id": list(range(len(configs)))},
                                          seed=seed_int(derive(seed, "optuna")))
    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=r0, reduction_factor=2, min_early_stopping_rate=0)
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    study.optimize(objective, n_trials=len(configs))
    if not reached:                                     # every fit failed: nothing to select
        return {"test_auc": float("nan"), "rows_fed": state["rows"], "fits": state["fits"],
                "failed_fits": state["failed"], "deepest_step": 0, "n_complete": 0, "config": None}
    deepest = max(step for step, _ in reached.values())
    number = max((n for n, (step, _) in reached.items() if step == deepest), key=lambda n: reached[n][1])
    best = configs[study.trials[number].params["config_id"]]
    final = build_model(best, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
    return {"test_auc": auc(split.y_test, final.decision_function(split.X_test)), "rows_fed": state["rows"],
            "fits": state["fits"], "failed_fits": state["failed"], "deepest_step": int(deepest),
            "n_complete": sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials), "config": best}


def _row_ledger(budget: int | None):
    """A Ray actor that counts the rows fed to every trial's fits and refuses a fit beyond ``budget``."""
    import ray

    @ray.remote(num_cpus=0)
    class RowLedger:
        def __init__(self) -> None:
            self.rows, self.fits, self.failed = 0, 0, 0

        def take(self, n: int) -> bool:
            if budget is not None and self.rows + n > budget:
                return False
            self.rows, self.fits = self.rows + n, self.fits + 1
            return True

        def fit_failed(self) -> None:
            self.failed += 1

        def counts(self) -> tuple[int, int, int]:
            return self.rows, self.fits, self.failed

    return RowLedger.remote()


def _asha_trainable(trial_config: dict, data: dict) -> None:
    import ray
    from ray import tune

    from raytune_fed.workflows.pu._ode import FIT_FAILURES, build_model

    config = data["configs"][trial_config["config_id"]]
    for step in data["steps"]:
        if not ray.get(data["ledger"].take.remote(step)):
            return                                      # the sample budget B: no fit beyond it
        cpu0 = time.process_time()
        rows = data["order"][:step]
        try:
            model = build_model(config, prior=data["prior"], seed=data["model_seed"]).fit(data["X"][rows],
                                                                                          data["s"][rows])
            value = data["criterion"](model)
        except FIT_FAILURES:
            data["ledger"].fit_failed.remote()          # no report at this step: judged at its next one
            continue
        tune.report({METRIC: value, "n_rows": step, "train_cpu_seconds": time.process_time() - cpu0})


def _asha(split, settings, *, prior: float, seed, configs: list, budget: int | None, r0: int, storage_path: str,
          name: str) -> dict:
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from raytune_fed.metrics import auc
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu._ode import ValidationCriterion, build_model, nested_order

    ledger = _row_ledger(budget)
    data = {"configs": configs, "steps": halving_steps(r0, split.n_train), "ledger": ledger, "prior": prior,
            "order": nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling),
            "criterion": ValidationCriterion(split, settings, seed=seed), "X": split.X_train, "s": split.s_train,
            "model_seed": seed_int(derive(seed, "ode", "models"))}
    order = [int(i) for i in np.random.default_rng(seed_int(derive(seed, "asha"))).permutation(len(configs))]
    scheduler = ASHAScheduler(time_attr="n_rows", max_t=split.n_train, grace_period=r0, reduction_factor=2,
                              brackets=1)
    tuner = tune.Tuner(tune.with_parameters(_asha_trainable, data=data),
                       param_space={"config_id": tune.grid_search(order)},
                       tune_config=tune.TuneConfig(scheduler=scheduler, metric=METRIC, mode="max", reuse_actors=True,
                                                   max_concurrent_trials=1),
                       run_config=tune.RunConfig(storage_path=storage_path, name=name, verbose=0))
    wall0 = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - wall0
    reached, train_cpu = {}, 0.0                        # config id -> (deepest step, its value)
    for result in grid:
        frame = result.metrics_dataframe
        if frame is None or frame.empty or METRIC not in frame:
            continue
        frame = frame[frame[METRIC].notna()]
        if frame.empty:
            continue
        train_cpu += float(frame["train_cpu_seconds"].sum())
        reached[int(result.config["config_id"])] = (int(frame["n_rows"].iloc[-1]), float(frame[METRIC].iloc[-1]))
    rows, fits, failed = ray.get(ledger.counts.remote())
    ray.kill(ledger)
    out = {"rows_fed": rows, "fits": fits, "failed_fits": failed, "wall_seconds": wall, "cpu_seconds": train_cpu}
    if not reached:
        return {**out, "test_auc": float("nan"), "deepest_step": 0, "config": None}
    deepest = max(step for step, _ in reached.values())
    # the best value at the deepest step; equal values go to the trial Tune ran first
    config_id = max((i for i in order if i in reached and reached[i][0] == deepest), key=lambda i: reached[i][1])
    best = configs[config_id]
    final = build_model(best, prior=prior, seed=data["model_seed"]).fit(split.X_train, split.s_train)
    return {**out, "test_auc": auc(split.y_test, final.decision_function(split.X_test)), "deepest_step": deepest,
            "config": best}


def _ode_tune(split, settings, *, prior: float, seed, configs: list, storage_path: str, name: str) -> dict:
    from raytune_fed.workflows.pu import run_ode_tune

    tuned = run_ode_tune(split, settings, prior=prior, seed=seed, storage_path=storage_path, name=name,
                         configs=configs)
    return {"test_auc": tuned.test_auc, "rows_fed": tuned.rows_used, "fits": tuned.n_trial_rungs,
            "wall_seconds": tuned.wall_seconds, "cpu_seconds": tuned.train_cpu_seconds, "config": tuned.config}


def run_split(dataset: str, c: float, rep: int, seed: int, methods=METHODS, stored: dict | None = None) -> dict:
    """One split's row: ``methods`` computed, anything else taken from ``stored`` (an earlier run's row)."""
    import tempfile

    from raytune_fed.algorithms.schedules import rung_table
    from raytune_fed.errors import NoSelectionError
    from raytune_fed.workflows.pu import ODESettings, run_ode
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, cell_split
    from raytune_fed.workflows.pu._methods import estimate_prior
    from raytune_fed.workflows.pu._ode import ODE_MIN_ROWS, configuration_set, search_budget

    cell = PUCell(dataset, c, rep, "ode", "ipm", "selfpaced", True,
                  settings=PUGridSettings(datasets=(dataset,), cs=(c,), seed=seed))
    split = cell_split(cell)
    prior = estimate_prior(split, cell.seed())
    settings = ODESettings()
    configs = configuration_set(settings.learners)
    budget = search_budget(split, settings)
    r0 = rung_table(len(configs), n_rows=split.n_train, budget_samples=budget, schedule=settings.schedule,
                    min_rows=ODE_MIN_ROWS).rungs[0].n_rows
    row = {**(stored or {}), "dataset": dataset, "c": c, "rep": rep, "budget": budget, "r0": int(r0),
           "n_train": split.n_train, "prior": prior}
    if "ode" in methods:
        t0 = time.process_time()
        try:
            ode = run_ode(split, settings, prior=prior, seed=cell.seed(), configs=configs)
            ode_row = {"test_auc": ode.test_auc, "rows_fed": ode.rows_fed, "fits": len(ode.trace) + ode.n_failed,
                       "failed_fits": ode.n_failed, "config": ode.config}
        except NoSelectionError:
            ode_row = {"test_auc": float("nan"), "rows_fed": budget, "fits": None, "failed_fits": None,
                       "config": None}
        row["ode"] = {**ode_row, "cpu_seconds": time.process_time() - t0}
    for name, cap in (("optuna_sh", budget), ("optuna_sh_uncapped", None)):
        if name in methods:
            t0 = time.process_time()
            peer = _optuna_sh(split, settings, prior=prior, seed=cell.seed(), configs=configs, budget=cap, r0=r0)
            row[name] = {**peer, "cpu_seconds": time.process_time() - t0}
    if any(m in methods for m in TUNE_METHODS):
        with tempfile.TemporaryDirectory() as store:
            if "ode_tune" in methods:
                row["ode_tune"] = _ode_tune(split, settings, prior=prior, seed=cell.seed(), configs=configs,
                                            storage_path=store, name="ode_tune")
            for name, cap in (("asha", budget), ("asha_uncapped", None)):
                if name in methods:
                    row[name] = _asha(split, settings, prior=prior, seed=cell.seed(), configs=configs, budget=cap,
                                      r0=r0, storage_path=store, name=name)
    return row


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    keys = list(dict.fromkeys((r["dataset"], r["c"]) for r in rows))
    for dataset, c in keys:
        part = [r for r in rows if (r["dataset"], r["c"]) == (dataset, c)]
        entry = {"dataset": dataset, "c": c, "n": len(part)}
        methods = [m for m in METHODS if all(m in r for r in part)]
        for method in methods:
            auc = np.array([r[method]["test_auc"] for r in part], dtype=float) * 100
            entry[method] = {"no_selection": int(np.isnan(auc).sum()),
                             "test_auc_mean": float(np.nanmean(auc)),
                             "test_auc_sd": float(np.nanstd(auc, ddof=1)) if auc.size > 1 else None,
                             "rows_fed_mean": float(np.mean([r[method]["rows_fed"] for r in part])),
                             "fits_mean": float(np.mean([r[method]["fits"] or 0 for r in part])),
                             "cpu_seconds_mean": float(np.mean([r[method]["cpu_seconds"] for r in part]))}
            if method in TUNE_METHODS:
                entry[method]["wall_seconds_mean"] = float(np.mean([r[method]["wall_seconds"] for r in part]))
        if "ode_tune" in methods:
            entry["ode_tune"]["same_choice_as_ode"] = sum(r["ode_tune"]["config"] == r["ode"]["config"] for r in part)
        for peer in methods[1:]:
            diff = np.array([r["ode"]["test_auc"] - r[peer]["test_auc"] for r in part], dtype=float) * 100
            diff = diff[np.isfinite(diff)]                  # pairs where both selected something
            entry[f"ode_minus_{peer}"] = {"n": int(diff.size), "mean": float(diff.mean()),
                                          "sd": float(diff.std(ddof=1)) if diff.size > 1 else None,
                                          "ode_better": int((diff > 0).sum()), "equal": int((diff == 0).sum())}
        entry["budget_mean"] = float(np.mean([r["budget"] for r in part]))
        out.append(entry)
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=[0.01, 0.1])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--methods", type=csv, default=list(METHODS), help=f"of {list(METHODS)} (default: all)")
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray session of the Tune methods")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="experiments/measured/bench_pu_peers.json")
    p.add_argument("--rows", default="results/bench_pu_peers/rows.jsonl",
                   help="each split's row is appended here as it finishes; a rerun skips the stored ones")
    args = p.parse_args(argv)
    unknown = sorted(set(args.methods) - set(METHODS))
    if unknown or "ode" not in args.methods:
        p.error(f"--methods must name 'ode' and only known methods {list(METHODS)}, got {args.methods}")
    out = Path(args.out)
    with Benchmark("bench_pu_peers", out, argv) as bench:
        ray = None
        done = Path(args.rows)
        stored = {}
        if done.is_file():
            for line in done.read_text().splitlines():
                row = json.loads(line)
                stored[(row["dataset"], row["c"], row["rep"], row["seed"])] = row  # a later line completes an earlier
        done.parent.mkdir(parents=True, exist_ok=True)
        rows = []
        for dataset in args.datasets:
            for c in args.c:
                for rep in range(args.reps):
                    key = (dataset, c, rep, args.seed)
                    missing = [m for m in args.methods if m not in stored.get(key, {})]
                    if not missing:
                        rows.append(stored[key])
                        continue
                    if ray is None and any(m in missing for m in TUNE_METHODS):
                        from raytune_fed.runtime import connect

                        ray = connect(None, args.num_cpus)      # a local Ray session, once a split needs Tune
                    rows.append({**run_split(dataset, c, rep, args.seed, methods=missing, stored=stored.get(key)),
                                 "seed": args.seed})
                    with done.open("a") as f:
                        f.write(json.dumps(rows[-1], default=str) + "\n")
                    r = rows[-1]
                    print(f"{dataset} c={c:g} rep={rep}: " + ", ".join(
                        f"{m} {r[m]['test_auc']:.4f} ({r[m]['rows_fed']} rows)" for m in args.methods), flush=True)
        if ray is not None:
            ray.shutdown()
        report = {"settings": vars(args), "table": summarize(rows), "rows": rows}
        bench.figures.update(report)
    print(json.dumps(report["table"], indent=1))


if __name__ == "__main__":
    main()
