"""Benchmark ODE (PU model selection) against its baselines, as in the paper's section 5, on the PU grid.

Every part but ``tune`` is a grid of :func:`raytune_fed.workflows.pu.run_grid` (the engine
behind ``raytune-fed pu``) in its own directory under ``--root``, so an interrupted run
resumes where it stopped and a part can be grown (more c values, methods, replications)
without recomputing the cells it already holds.  Parts (``--parts``, all by default):

* ``main`` - Tables 2 and Figures 3-5: datasets x c x replications x methods (ODE with
  IPM_PU and/or AUC_PU, self-paced schedule, control variate; baselines uPU, nnPU, WSVM,
  supervised); test AUC, seconds, the prior used.
* ``schedules`` - Table 4: ODE-IPM with each pruning schedule.
* ``cv`` - Table 5: ODE-IPM, exp schedule, with and without the control variate (the
  paper's Table 5 "with" row equals its Table 4 exp row).
* ``timing`` - Table 6: seconds of WSVM, uPU, nnPU and ODE at c = 0.6, B = N, one
  replication; a thinned baseline grid (``--baseline-configs``) is scaled up to its full
  size (uPU 100, nnPU 500 configurations) for the ratios.
* ``tune`` - the Tune path: ODE through ``PUHalvingScheduler`` (synchronous and
  asynchronous) against the in-process core on one split: wall and training seconds,
  trial-rungs, Tune's cost per trial-rung, cores busy, selected test AUC, and whether the
  synchronous run picked the in-process core's configuration.

Cells derive their streams from ``derive(seed, dataset, "c=<c>", rep)``, the same as
``raytune-fed pu``.  Datasets: twonorm, spambase, chess (kr-vs-kp), satimage (class 1 vs
rest), texture (class 2 vs rest), titanic; the paper's ethn is not available.

``python experiments/bench_pu.py`` runs the full benchmark (long: the nnPU baseline trains
500 networks per cell); ``--parts main --methods ode`` e.g. runs ODE-IPM alone.  The report
(tables beside the paper's numbers) goes to ``--out`` (default ``results/bench_pu.json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from raytune_fed.grid import InProcessExecutor, RayExecutor, make_progress
from raytune_fed.workflows.pu import PUGridSettings, estimate_prior, run_grid, run_ode, summarize
from raytune_fed.workflows.pu._grid import PUCell, cell_split
from raytune_fed.workflows.pu._ode import ODESettings

DATASETS = ("twonorm", "spambase", "chess", "satimage", "texture", "titanic")
CS = (0.01, 0.05, 0.1, 0.2)
PARTS = ("main", "schedules", "cv", "timing", "tune")
SCHEDULE_NAMES = ("sh", "log", "exp", "linear", "selfpaced")
FULL_GRID = {"upu": 100, "nnpu": 500}

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


def _grid(args, part: str, **settings) -> dict:
    """Run (or resume) one part's grid; its rows and tables."""
    base = {"n_reps": args.reps, "seed": args.seed, "supervised_trials": args.supervised_trials,
            "baseline_configs": args.baseline_configs, "prior": args.prior}
    grid = PUGridSettings(**{**base, **settings})
    executor = InProcessExecutor() if args.in_process else RayExecutor()
    frame = run_grid(grid, out=Path(args.root) / part, address=args.address, num_cpus=args.num_cpus,
                     progress=make_progress(), executor=executor)
    keep = [c for c in frame.columns if c != "cell_key"]
    return {"settings": settings, "rows": json.loads(frame[keep].to_json(orient="records")),
            "tables": summarize(frame)["tables"]}


def part_main(args) -> dict:
    evaluators = tuple(e for e in ("ipm", "auc") if f"ode-{e}" in args.methods)
    methods = (("ode",) if evaluators else ()) + tuple(m for m in args.methods if not m.startswith("ode"))
    return _grid(args, "main", datasets=tuple(args.datasets), cs=tuple(args.c), methods=methods,
                 evaluators=evaluators or ("ipm",))


def part_schedules(args) -> dict:
    return _grid(args, "schedules", datasets=tuple(args.ablation_datasets), cs=tuple(args.ablation_c),
                 methods=("ode",), schedules=SCHEDULE_NAMES, n_reps=args.ablation_reps)


def part_cv(args) -> dict:
    return _grid(args, "cv", datasets=tuple(args.ablation_datasets), cs=tuple(args.ablation_c), methods=("ode",),
                 schedules=("exp",), control_variates=(True, False), n_reps=args.ablation_reps)


def part_timing(args) -> dict:
    result = _grid(args, "timing", datasets=tuple(args.timing_datasets), cs=(0.6,),
                   methods=("wsvm", "upu", "nnpu", "ode"), n_reps=1)
    used = args.baseline_configs
    seconds: dict = {}
    for row in result["rows"]:
        scale = FULL_GRID[row["method"]] / min(used, FULL_GRID[row["method"]]) if used and row["method"] in \
            FULL_GRID else 1.0
        seconds.setdefault(row["dataset"], {}).setdefault(row["method"], []).append(row["seconds"] * scale)
    full = {d: {m: float(np.mean(v)) for m, v in by.items()} for d, by in seconds.items()}
    ratios = {d: {m: s / by["ode"] for m, s in by.items()} for d, by in full.items() if by.get("ode")}
    mean_ratio = {m: float(np.mean([r[m] for r in ratios.values() if m in r])) for m in ("wsvm", "upu", "nnpu")}
    result.update(seconds_full_grid=full, ratio_to_ode=ratios, mean_ratio_to_ode=mean_ratio)
    return result


def part_tune(args) -> dict:
    from raytune_fed.runtime import connect
    from raytune_fed.workflows.pu import run_ode_tune

    connect(address=args.address, num_cpus=args.num_cpus)
    probe = PUCell(args.tune_dataset, args.tune_c, 0, "ode", "ipm", "selfpaced", True,
                   settings=PUGridSettings(datasets=(args.tune_dataset,), cs=(args.tune_c,), seed=args.seed))
    split, cell = cell_split(probe), probe.seed()
    prior = estimate_prior(split, cell)
    rows = []
    with tempfile.TemporaryDirectory() as store:
        for asynchronous in (False, True):
            settings = ODESettings(asynchronous=asynchronous)
            t0 = time.perf_counter()
            core = run_ode(split, settings, prior=prior, seed=cell)
            core_wall = time.perf_counter() - t0
            tuned = run_ode_tune(split, settings, prior=prior, seed=cell, storage_path=store,
                                 name=f"ode_{'async' if asynchronous else 'sync'}")
            rows.append({
                "dataset": args.tune_dataset, "c": args.tune_c, "mode": "async" if asynchronous else "sync",
                "core_wall_seconds": core_wall, "core_test_auc": core.test_auc,
                "tune_wall_seconds": tuned.wall_seconds, "tune_train_seconds": tuned.train_seconds,
                "trial_rungs": tuned.n_trial_rungs, "cpus": tuned.n_cpus,
                "tune_cost_cpu_seconds_per_trial_rung":
                    (tuned.wall_seconds * tuned.n_cpus - tuned.train_seconds) / tuned.n_trial_rungs,
                "train_seconds_per_trial_rung": tuned.train_seconds / tuned.n_trial_rungs,
                "cores_busy": tuned.train_seconds / (tuned.wall_seconds * tuned.n_cpus),
                "tune_test_auc": tuned.test_auc, "same_choice_as_core": tuned.config == core.config,
                "rows_used": tuned.rows_used})
            print(json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


def comparison(report: dict) -> dict:
    """Our means beside the paper's numbers (AUC %), with the difference."""
    out: dict = {}

    def table(rows, column, value):
        return {(r["dataset"], r["c"]): r for r in rows if r[column] == value}

    main = report.get("main", {}).get("tables", {})
    for evaluator, key in (("ipm", "table2_ode_ipm_c0.01"), ("auc", "table2_ode_auc_c0.01")):
        ours = table(main.get("table2_test_auc", []), "column", f"ode-{evaluator}")
        out[key] = {d: {"paper": p, "ours": ours[(d, 0.01)]["mean"], "sd": ours[(d, 0.01)]["sd"],
                        "n": ours[(d, 0.01)]["n"], "ours_minus_paper": ours[(d, 0.01)]["mean"] - p}
                    for d, p in PAPER[key].items() if (d, 0.01) in ours}
    sched = report.get("schedules", {}).get("tables", {}).get("table4_schedules", [])
    if sched:
        out["table4"] = {s: {d: {"paper": p, "ours": r["mean"], "n": r["n"]}
                             for d, p in PAPER["table4"][s].items()
                             for r in sched if r["schedule"] == s and r["dataset"] == d and r["c"] == 0.01}
                         for s in SCHEDULE_NAMES}
    cv = report.get("cv", {}).get("tables", {}).get("table5_control_variate", [])
    if cv:
        out["table5"] = {name: {d: {"paper": p, "ours": r["mean"], "n": r["n"]}
                                for d, p in PAPER["table5"][name].items()
                                for r in cv if r["control_variate"] == (name == "with") and r["dataset"] == d
                                and r["c"] == 0.01}
                         for name in ("with", "without")}
    if "timing" in report:
        out["table6_mean_ratio_to_ode"] = {m: {"paper": PAPER["table6_mean_ratio_to_ode"][m], "ours": r}
                                           for m, r in report["timing"]["mean_ratio_to_ode"].items()}
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", type=csv, default=list(PARTS))
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=list(CS))
    p.add_argument("--methods", type=csv, default=["ode-ipm", "ode-auc", "upu", "nnpu", "wsvm", "supervised"])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ablation-datasets", type=csv, default=["titanic", "chess", "satimage"])
    p.add_argument("--ablation-c", type=lambda t: [float(x) for x in csv(t)], default=[0.01])
    p.add_argument("--ablation-reps", type=int, default=3)
    p.add_argument("--timing-datasets", type=csv, default=["satimage", "spambase", "texture", "titanic", "twonorm"])
    p.add_argument("--baseline-configs", type=int, default=None,
                   help="thin the uPU/nnPU baselines to this many configurations (default: all)")
    p.add_argument("--supervised-trials", type=int, default=30)
    p.add_argument("--tune-dataset", default="titanic")
    p.add_argument("--tune-c", type=float, default=0.1)
    p.add_argument("--address", default=None)
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--in-process", action="store_true", help="run the grids in this process instead of on Ray")
    p.add_argument("--prior", default="tice", choices=("tice", "true"),
                   help="true: train/select with the split's true prior (an oracle; use another --root)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--root", default="results/bench_pu", help="directory of the parts' grids (resumable)")
    p.add_argument("--out", default="results/bench_pu.json")
    args = p.parse_args(argv)
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        p.error(f"unknown parts {unknown}; known: {list(PARTS)}")

    report: dict = {"settings": vars(args), "paper": PAPER,
                    "machine": {"python": platform.python_version(), "platform": platform.platform()}}
    started = time.perf_counter()
    for part in args.parts:
        report[part] = globals()[f"part_{part}"](args)
    report["comparison"] = comparison(report)
    report["seconds"] = time.perf_counter() - started
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report["comparison"], indent=2))


if __name__ == "__main__":
    main()
