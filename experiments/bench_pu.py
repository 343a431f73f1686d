"""Benchmark ODE (PU model selection) against its baselines, as in the paper's section 5.

Parts (``--parts``, all by default):

* ``main`` - Table 2 and Figures 3-5: every dataset x label frequency c x replication x
  method; methods ``ode`` (IPM, control variate, self-paced), ``ode-auc`` (AUC_PU),
  ``upu``, ``nnpu``, ``wsvm``, ``supervised``; test AUC, seconds, the prior used.
* ``schedules`` - Table 4: ODE-IPM with each pruning schedule.
* ``cv`` - Table 5: ODE-IPM with and without the control variate (exp schedule, the rows
  of the paper's Table 5 equal its Table 4 exp-schedule row).
* ``timing`` - Table 6: training seconds of WSVM, uPU, nnPU and ODE at c = 0.6, B = N,
  no time budget, and each method's ratio to ODE.
* ``tune`` - the Tune path: ODE through ``PUHalvingScheduler`` (synchronous and
  asynchronous) against the in-process core on one dataset: wall seconds, training
  seconds, trial-rungs, Tune's cost per trial-rung, cores busy, the selected test AUC, and
  whether the synchronous Tune run picked the in-process core's configuration.

Every cell gets its own split and seeds from ``derive(seed, dataset, c, rep)``; the
methods of a cell share the split.  Datasets: twonorm, spambase, chess (kr-vs-kp),
satimage (class 1 vs rest), texture (class 2 vs rest), titanic; ethn is not available.

Run ``python experiments/bench_pu.py`` for the full benchmark (long: the nnPU baseline
trains 500 networks per cell) or, e.g., ``--quick`` (twonorm and spambase at c = 0.01, 3
replications, nnPU baseline thinned to 25 configurations, 10 TPE trials).  Results go to
``results/bench_pu.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from raytune_fed.data import load_dataset
from raytune_fed.random import derive
from raytune_fed.simulation import pu_dataset, pu_split
from raytune_fed.workflows.pu import ODESettings, estimate_prior, run_method, run_ode

DATASETS = ("twonorm", "spambase", "chess", "satimage", "texture", "titanic")
CS = (0.01, 0.05, 0.1, 0.2)
MAIN_METHODS = ("ode", "ode-auc", "upu", "nnpu", "wsvm", "supervised")
SCHEDULE_NAMES = ("sh", "log", "exp", "linear", "selfpaced")
PARTS = ("main", "schedules", "cv", "timing", "tune")

# The paper's numbers (AUC %, training seconds) for the closing comparison.
PAPER = {
    "table2_ode_ipm_c0.01": {"twonorm": 99.65, "spambase": 82.75, "satimage": 99.73, "texture": 99.99,
                             "titanic": 66.17, "chess": 70.89},
    "table2_ode_auc_c0.01": {"twonorm": 96.87, "spambase": 80.89, "satimage": 99.86, "texture": 89.49,
                             "titanic": 65.64, "chess": 69.88},
    "table4": {"sh": {"titanic": 63.99, "chess": 70.52, "satimage": 91.85},
               "log": {"titanic": 66.09, "chess": 70.11, "satimage": 90.24},
               "exp": {"titanic": 66.30, "chess": 69.74, "satimage": 99.74},
               "linear": {"titanic": 65.65, "chess": 70.09, "satimage": 96.74},
               "selfpaced": {"titanic": 66.17, "chess": 71.01, "satimage": 99.73}},
    "table5": {"without": {"titanic": 67.69, "chess": 68.15, "satimage": 96.54},
               "with": {"titanic": 66.30, "chess": 69.74, "satimage": 99.74}},
    "table6_seconds": {"satimage": {"wsvm": 101.3, "upu": 13.5, "nnpu": 7.4, "ode": 6.4},
                       "spambase": {"wsvm": 683.8, "upu": 36.7, "nnpu": 16.9, "ode": 15.1},
                       "texture": {"wsvm": 29.7, "upu": 7.4, "nnpu": 7.1, "ode": 1.1},
                       "titanic": {"wsvm": 22.6, "upu": 1.4, "nnpu": 7.7, "ode": 0.3},
                       "twonorm": {"wsvm": 1182.4, "upu": 15.2, "nnpu": 20.6, "ode": 4.3}},
    "table6_mean_ratio_to_ode": {"wsvm": 72.0, "upu": 5.0, "nnpu": 6.2},
}


def _split(dataset: str, c: float, rep: int, seed: int):
    data = pu_dataset(load_dataset(dataset))
    cell = derive(seed, dataset, f"c={c}", rep)
    return pu_split(data.X, data.y, c=c, seed=cell, name=dataset), cell


def _ode_settings(method: str, **changes) -> ODESettings:
    return ODESettings(evaluator="auc" if method == "ode-auc" else "ipm", **changes)


def _run(method: str, split, cell, args, **ode_changes) -> dict:
    base = "ode" if method.startswith("ode") else method
    result = run_method(base, split, seed=cell, ode=_ode_settings(method, **ode_changes),
                        supervised_trials=args.supervised_trials,
                        max_configs=args.nnpu_configs if base == "nnpu" else None)
    return {"method": method, "test_auc": result.test_auc, "seconds": result.seconds, "prior": result.prior,
            "config": result.config, "rows_used": result.rows_used}


def _cells(args, datasets, cs):
    for dataset in datasets:
        for c in cs:
            for rep in range(args.reps):
                split, cell = _split(dataset, c, rep, args.seed)
                yield dataset, c, rep, split, cell


def part_main(args) -> list[dict]:
    rows = []
    for dataset, c, rep, split, cell in _cells(args, args.datasets, args.c):
        for method in args.methods:
            row = {"dataset": dataset, "c": c, "rep": rep, "true_prior": split.unlabelled_prior(),
                   **_run(method, split, cell, args)}
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("dataset", "c", "rep", "method", "test_auc", "seconds")}),
                  flush=True)
    return rows


def part_schedules(args) -> list[dict]:
    rows = []
    for dataset, c, rep, split, cell in _cells(args, args.ablation_datasets, args.ablation_c):
        prior = estimate_prior(split, cell)
        for schedule in SCHEDULE_NAMES:
            r = run_ode(split, ODESettings(schedule=schedule), prior=prior, seed=cell)
            rows.append({"dataset": dataset, "c": c, "rep": rep, "schedule": schedule, "test_auc": r.test_auc,
                         "rows_used": r.rows_used, "seconds": r.seconds})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def part_cv(args) -> list[dict]:
    rows = []
    for dataset, c, rep, split, cell in _cells(args, args.ablation_datasets, args.ablation_c):
        prior = estimate_prior(split, cell)
        for cv in (False, True):
            r = run_ode(split, ODESettings(schedule="exp", control_variate=cv), prior=prior, seed=cell)
            rows.append({"dataset": dataset, "c": c, "rep": rep, "control_variate": cv, "test_auc": r.test_auc})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def part_timing(args) -> list[dict]:
    rows = []
    for dataset, c, rep, split, cell in _cells(args, args.datasets, (0.6,)):
        for method in ("wsvm", "upu", "nnpu", "ode"):
            row = {"dataset": dataset, "c": c, "rep": rep, **_run(method, split, cell, args)}
            row["n_configs"] = {"upu": 100, "nnpu": args.nnpu_configs or 500, "ode": 100, "wsvm": 1}[method]
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("dataset", "rep", "method", "seconds", "n_configs")}), flush=True)
    return rows


def part_tune(args) -> list[dict]:
    from raytune_fed.runtime import connect
    from raytune_fed.workflows.pu import run_ode_tune

    connect(address=args.address, num_cpus=args.num_cpus)
    rows = []
    split, cell = _split(args.tune_dataset, args.tune_c, 0, args.seed)
    prior = estimate_prior(split, cell)
    with tempfile.TemporaryDirectory() as store:
        for asynchronous in (False, True):
            settings = ODESettings(asynchronous=asynchronous)
            t0 = time.perf_counter()
            core = run_ode(split, settings, prior=prior, seed=cell)
            core_wall = time.perf_counter() - t0
            tuned = run_ode_tune(split, settings, prior=prior, seed=cell, storage_path=store,
                                 name=f"ode_{'async' if asynchronous else 'sync'}")
            busy = tuned.train_seconds / (tuned.wall_seconds * tuned.n_cpus)
            rows.append({
                "dataset": args.tune_dataset, "c": args.tune_c, "mode": "async" if asynchronous else "sync",
                "core_wall_seconds": core_wall, "core_test_auc": core.test_auc,
                "tune_wall_seconds": tuned.wall_seconds, "tune_train_seconds": tuned.train_seconds,
                "trial_rungs": tuned.n_trial_rungs, "cpus": tuned.n_cpus,
                "tune_cost_cpu_seconds_per_trial_rung":
                    (tuned.wall_seconds * tuned.n_cpus - tuned.train_seconds) / tuned.n_trial_rungs,
                "train_seconds_per_trial_rung": tuned.train_seconds / tuned.n_trial_rungs,
                "cores_busy": busy, "tune_test_auc": tuned.test_auc,
                "same_choice_as_core": tuned.config == core.config, "rows_used": tuned.rows_used})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def summarise(report: dict) -> dict:
    def mean_by(rows, keys, value="test_auc"):
        groups: dict = {}
        for row in rows:
            groups.setdefault(tuple(row[k] for k in keys), []).append(row[value])
        return {" | ".join(str(k) for k in key): {"mean": float(np.mean(v)), "sd": float(np.std(v)), "n": len(v)}
                for key, v in sorted(groups.items())}

    summary = {}
    if report.get("main"):
        summary["test_auc_by_dataset_c_method"] = mean_by(report["main"], ("dataset", "c", "method"))
    if report.get("schedules"):
        summary["test_auc_by_schedule"] = mean_by(report["schedules"], ("dataset", "c", "schedule"))
    if report.get("cv"):
        summary["test_auc_by_control_variate"] = mean_by(report["cv"], ("dataset", "c", "control_variate"))
    if report.get("timing"):
        for row in report["timing"]:      # a thinned nnPU grid: scale its seconds up to the full 500
            full = 500 if row["method"] == "nnpu" else row["n_configs"]
            row["seconds_full_grid"] = row["seconds"] * full / row["n_configs"]
        secs = mean_by(report["timing"], ("dataset", "method"), "seconds_full_grid")
        ratios = {}
        for key, cell in secs.items():
            dataset, method = key.split(" | ")
            ode = secs.get(f"{dataset} | ode")
            if ode:
                ratios[key] = cell["mean"] / ode["mean"]
        summary["timing_seconds_full_grid"], summary["timing_ratio_to_ode"] = secs, ratios
    return summary


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--c", default=",".join(str(c) for c in CS))
    p.add_argument("--methods", default=",".join(MAIN_METHODS))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ablation-datasets", default="titanic,chess,satimage")
    p.add_argument("--ablation-c", default="0.01")
    p.add_argument("--nnpu-configs", type=int, default=None, help="thin the nnPU baseline grid (default: all 500)")
    p.add_argument("--supervised-trials", type=int, default=30)
    p.add_argument("--tune-dataset", default="spambase")
    p.add_argument("--tune-c", type=float, default=0.1)
    p.add_argument("--address", default=None)
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="results/bench_pu.json")
    args = p.parse_args(argv)
    if args.quick:
        args.datasets, args.c, args.nnpu_configs, args.supervised_trials = "twonorm,spambase", "0.01", 25, 10
    args.parts = [x for x in args.parts.split(",") if x]
    args.datasets = args.datasets.split(",")
    args.c = [float(c) for c in args.c.split(",")]
    args.methods = args.methods.split(",")
    args.ablation_datasets = args.ablation_datasets.split(",")
    args.ablation_c = [float(c) for c in args.ablation_c.split(",")]
    unknown = sorted(set(args.parts) - set(PARTS)) + sorted(set(args.methods) - set(MAIN_METHODS))
    if unknown:
        p.error(f"unknown parts or methods {unknown}")

    report = {"settings": {k: v for k, v in vars(args).items()},
              "machine": {"python": platform.python_version(), "platform": platform.platform()},
              "paper": PAPER}
    started = time.perf_counter()
    with threadpool_limits(1):          # one BLAS thread: timings per core, no oversubscription
        for part in args.parts:
            report[part] = globals()[f"part_{part}"](args)
    report["summary"] = summarise(report)
    report["seconds"] = time.perf_counter() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report["summary"], indent=2))


if __name__ == "__main__":
    main()
