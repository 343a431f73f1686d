"""Benchmark ODE (PU model selection) against its baselines, as in the paper's section 5, on the PU grid.

Table 6 (timing, like for like) is ``experiments/bench_pu_timing.py``, the Tune path's cost
``experiments/bench_pu_tune.py``, the criterion's quality ``experiments/bench_pu_criterion.py``.
Every part here is a grid of :func:`raytune_fed.workflows.pu.run_grid` (the engine behind
``raytune-fed pu``) in its own directory under ``--root``, so an interrupted run resumes where
it stopped and a part can be grown (more c values, methods, replications) without recomputing
the cells it already holds.  Parts (``--parts``):

* ``main`` - Table 2 and Figures 3-5: datasets x c x replications x methods (ODE with
  IPM_PU and/or AUC_PU, self-paced schedule, control variate; baselines uPU, nnPU, WSVM,
  supervised); test AUC, seconds, the prior used.
* ``figures`` - ODE-IPM at ``--figures-c`` (Figures 3-5's ODE curve; stored with ``main``).
* ``baselines`` - the compared methods of Figures 3-5 (uPU, WSVM, supervised; nnPU on request) at
  ``--baselines-c`` (default 0.01, Table 2's c), beside ODE-IPM on the same splits (the paper gives these
  methods as plots only: no number to compare with); the comparison adds per baseline the paired
  difference ODE-IPM minus it over the replications and in how many ODE's test AUC is higher.
* ``schedules`` - Table 4: ODE-IPM with each pruning schedule.
* ``cv`` - Table 5: ODE-IPM, exp schedule, with and without the control variate (the
  paper's Table 5 "with" row equals its Table 4 exp row; stored with ``schedules``, whose exp
  cells it shares).
* ``readings`` - Table 2's ODE-IPM (c = 0.01 by default) under the other readings of what the paper leaves open:
  rung rows stratified by ``s`` (``proportional``, the earlier default) or a uniformly random
  prefix (``uniform``, Algorithm 1's words read literally), ``B = 4 N``, the
  true class prior instead of TIcE's for training uPU (an oracle), and the control variate as the
  paper writes it (``cv_odds``: ``(1 - g) / g`` not normalised, eta not shrunk; ``cv_odds_exp``
  with the exp schedule on Table 5's datasets: its "with" row under that reading, beside the cv
  part's "without").

Cells derive their streams from ``derive(seed, dataset, "c=<c>", rep)``, the same as
``raytune-fed pu``.  Datasets: twonorm, spambase, chess (kr-vs-kp), sat (satimage class 7
vs class 1, the paper's sat), texture (class 2 vs rest: not the paper's texture, see
``docs/pu.md``), titanic; the paper's ethn is not available.  10 replications by default
(the paper's count).

``python experiments/bench_pu.py --parts main,schedules,cv,readings`` runs the paper tables;
the report (tables beside the paper's numbers, mean, sd, standard error, n) goes to ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from raytune_fed.grid import InProcessExecutor, RayExecutor, make_progress
from raytune_fed.workflows.pu import PUGridSettings, run_grid, summarize

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

DATASETS = ("twonorm", "spambase", "chess", "sat", "texture", "titanic")
CS = (0.01, 0.05, 0.1, 0.2)
PARTS = ("main", "figures", "baselines", "schedules", "cv", "readings")
READINGS = {"proportional": {"rung_sampling": "proportional"}, "uniform": {"rung_sampling": "uniform"},
            "budget_4n": {"budget_factor": 4.0},
            "true_prior": {"prior": "true"}, "cv_odds": {"cv_reading": "odds"},
            "cv_odds_exp": {"cv_reading": "odds", "schedules": ("exp",), "datasets": ("titanic", "chess", "sat")}}
SCHEDULE_NAMES = ("sh", "log", "exp", "linear", "selfpaced")

# The paper's numbers (AUC %, training seconds) for the closing comparison.
PAPER = {
    "table2_ode_ipm_c0.01": {"twonorm": 99.65, "spambase": 82.75, "sat": 99.73, "texture": 99.99,
                             "titanic": 66.17, "chess": 70.89},
    "table2_ode_auc_c0.01": {"twonorm": 96.87, "spambase": 80.89, "sat": 99.86, "texture": 89.49,
                             "titanic": 65.64, "chess": 69.88},
    "table4": {"sh": {"titanic": 63.99, "chess": 70.52, "sat": 91.85},
               "log": {"titanic": 66.09, "chess": 70.11, "sat": 90.24},
               "exp": {"titanic": 66.30, "chess": 69.74, "sat": 99.74},
               "linear": {"titanic": 65.65, "chess": 70.09, "sat": 96.74},
               "selfpaced": {"titanic": 66.17, "chess": 71.01, "sat": 99.73}},
    "table5": {"without": {"titanic": 67.69, "chess": 68.15, "sat": 96.54},
               "with": {"titanic": 66.30, "chess": 69.74, "sat": 99.74}},
}


def _grid(args, part: str, **settings) -> dict:
    """Run (or resume) one part's grid; its rows and tables."""
    base = {"n_reps": args.reps, "seed": args.seed, "supervised_trials": args.supervised_trials,
            "baseline_configs": args.baseline_configs, "prior": args.prior}
    if args.reps < 10:
        print(f"bench_pu: {args.reps} replications, fewer than the paper's 10: a reduced run, not for the docs",
              flush=True)
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


def part_figures(args) -> dict:
    # ODE-IPM against c (Figures 3-5's ODE curve), stored with the main part, whose cells it shares
    return _grid(args, "main", datasets=tuple(args.datasets), cs=tuple(args.figures_c), methods=("ode",),
                 evaluators=("ipm",))


def part_baselines(args) -> dict:
    # ODE-IPM (as in Table 2) in the same grid, so every baseline sits beside it on the same splits and priors
    return _grid(args, "baselines", datasets=tuple(args.datasets), cs=tuple(args.baselines_c),
                 methods=("ode", *args.baselines), evaluators=("ipm",))


def part_schedules(args) -> dict:
    return _grid(args, "schedules", datasets=tuple(args.ablation_datasets), cs=tuple(args.ablation_c),
                 methods=("ode",), schedules=SCHEDULE_NAMES)


def part_cv(args) -> dict:
    # stored with the schedules part: its exp cells with the control variate are this part's "with" cells
    return _grid(args, "schedules", datasets=tuple(args.ablation_datasets), cs=tuple(args.ablation_c), methods=("ode",),
                 schedules=("exp",), control_variates=(True, False))


def part_readings(args) -> dict:
    """ODE-IPM (self-paced, control variate) under each reading of :data:`READINGS`, one grid each."""
    out = {}
    for name in args.readings:
        change = dict(READINGS[name])
        datasets = change.pop("datasets", tuple(args.readings_datasets or args.datasets))
        out[name] = _grid(args, f"readings/{name}", datasets=datasets, cs=tuple(args.readings_c), methods=("ode",),
                          **change)
    return out


PAPER_TABLE1 = {"twonorm": (5180, 2220, 20, 0.496), "spambase": (3220, 1381, 57, 0.399),
                "chess": (2237, 959, 36, 0.486), "sat": (2218, 913, 36, 0.495), "titanic": (1540, 661, 3, 0.324),
                "texture": (1418, 608, 19, 0.492)}


def dataset_sizes(names) -> dict:
    """Rows, features, positive share, and the PU data / test sizes of each dataset's splits, beside Table 1."""
    from raytune_fed.data import load_dataset
    from raytune_fed.simulation import pu_dataset, pu_split

    out = {}
    for name in names:
        data = pu_dataset(load_dataset(name))
        split = pu_split(data.X, data.y, c=0.2, seed=0, name=name)
        paper = PAPER_TABLE1.get(name)
        out[name] = {"rows": data.n_rows, "features": data.n_features, "positive_share": float(data.y.mean()),
                     "pu_data_rows": split.n_pu, "test_rows": int(split.y_test.size),
                     "paper": None if paper is None else dict(zip(("training", "testing", "features", "class_ratio"),
                                                                  paper))}
    return out


def _beside(paper: float, row: dict | None) -> dict:
    """Ours (mean, sd, n, standard error) beside the paper's number, and whether ours >= paper - one se."""
    if row is None or row["mean"] is None:
        return {"paper": paper, "ours": None, "n_no_selection": None if row is None else row["n_no_selection"]}
    se = row["sd"] / np.sqrt(row["n"]) if row["sd"] is not None else None
    return {"paper": paper, "ours": row["mean"], "sd": row["sd"], "n": row["n"], "se": se,
            "n_no_selection": row.get("n_no_selection", 0), "ours_minus_paper": row["mean"] - paper,
            "within_one_se_below": bool(se is not None and row["mean"] >= paper - se)}


def _find(rows: list, column: str, value, dataset: str, c: float = 0.01) -> dict | None:
    return next((r for r in rows if r[column] == value and r["dataset"] == dataset and r["c"] == c), None)


def comparison(report: dict) -> dict:
    """Our means at c = 0.01 beside the paper's numbers (AUC %), with sd, n and standard error."""
    out: dict = {}
    main = report.get("main", {}).get("tables", {}).get("table2_test_auc", [])
    for evaluator in ("ipm", "auc"):
        key = f"table2_ode_{evaluator}_c0.01"
        out[key] = {d: _beside(p, _find(main, "column", f"ode-{evaluator}", d)) for d, p in PAPER[key].items()}
    for name, part in report.get("readings", {}).items():
        rows = part["tables"].get("table2_test_auc", [])
        out[f"table2_ode_ipm_c0.01_{name}"] = {d: _beside(p, _find(rows, "column", "ode-ipm", d))
                                               for d, p in PAPER["table2_ode_ipm_c0.01"].items()}
    if "baselines" in report:
        out["baselines"] = paired_with_ode(report["baselines"]["rows"])
    sched = report.get("schedules", {}).get("tables", {}).get("table4_schedules", [])
    if sched:
        out["table4"] = {s: {d: _beside(p, _find(sched, "schedule", s, d)) for d, p in PAPER["table4"][s].items()}
                         for s in SCHEDULE_NAMES}
        # every dataset x c of the grid (the paper's numbers are at c = 0.01 on three datasets only): each
        # schedule beside the self-paced one on the same splits
        out["table4_paired"] = paired_with_ode(report["schedules"]["rows"], ode="ode-ipm-selfpaced")
    cv = report.get("cv", {}).get("tables", {}).get("table5_control_variate", [])
    if cv:
        out["table5"] = {name: {d: _beside(p, _find(cv, "control_variate", name == "with", d))
                                for d, p in PAPER["table5"][name].items()}
                         for name in ("with", "without")}
        # every dataset x c: with the variate (exp schedule) minus without, paired by split
        out["table5_paired"] = paired_with_ode(report["cv"]["rows"], ode="ode-ipm-exp")
    return out


def paired_with_ode(rows: list, ode: str = "ode-ipm-selfpaced") -> dict:
    """Per dataset x c and method: test AUC (%) mean, sd, n, standard error, and the paired difference of
    ODE (``ode``, the Table 2 variant; or another reference variant) minus the method over the replications
    where both selected a model: mean, sd, and in how many the reference is higher / equal."""
    by: dict = {}
    for r in rows:
        by.setdefault((r["dataset"], r["c"]), {}).setdefault(r["variant"], {})[r["rep"]] = r["test_auc"]
    out: dict = {}
    for (dataset, c), methods in by.items():
        ode_auc = methods.get(ode, {})
        cell = {}
        for variant, per_rep in methods.items():
            v = np.array([a for a in per_rep.values() if a is not None and np.isfinite(a)], dtype=float) * 100
            sd = float(v.std(ddof=1)) if v.size > 1 else None
            entry = {"mean": float(v.mean()) if v.size else None, "sd": sd, "n": int(v.size),
                     "se": None if sd is None else sd / np.sqrt(v.size)}
            if variant != ode:
                reps = [k for k in per_rep if k in ode_auc and all(
                    x is not None and np.isfinite(x) for x in (per_rep[k], ode_auc[k]))]
                d = np.array([ode_auc[k] - per_rep[k] for k in reps], dtype=float) * 100
                entry["ode_minus"] = {"mean": float(d.mean()) if d.size else None,
                                      "sd": float(d.std(ddof=1)) if d.size > 1 else None, "n": int(d.size),
                                      "ode_higher": int((d > 0).sum()), "equal": int((d == 0).sum())}
            cell[variant] = entry
        out[f"{dataset} c={c}"] = cell
    return out


_CELL_KEYS = ("dataset", "c", "rep", "variant", "test_auc", "prior", "true_prior", "n_labelled", "no_selection")


def write_measured(record: dict, directory: Path) -> None:
    """One compact JSON per part: settings, tables, the comparison, and per cell its test AUC and prior.

    Each is the run's harness record (``record``: revision, machine, load, CPU of the whole run) with the part's
    numbers as its figures and ``bench_pu_<part>`` as its name.
    """
    report = record["figures"]
    directory.mkdir(parents=True, exist_ok=True)
    parts = {name: part for name, part in report.items() if name in PARTS}
    for name, part in parts.items():
        grids = part if name == "readings" else {name: part}
        body = {"settings": report["settings"], "comparison": report["comparison"],
                "datasets": report.get("datasets"),
                "grids": {g: {"settings": v["settings"], "tables": v["tables"],
                              "cells": [{k: r.get(k) for k in _CELL_KEYS} for r in v["rows"]]}
                          for g, v in grids.items()}}
        part_record = {**record, "benchmark": f"bench_pu_{name}", "figures": body, "headline": {}}
        (directory / f"bench_pu_{name}.json").write_text(json.dumps(part_record, separators=(",", ":"), default=str))


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", type=csv, default=list(PARTS))
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=list(CS))
    p.add_argument("--methods", type=csv, default=["ode-ipm", "ode-auc"],
                   help="main part's methods (ODE variants ode-ipm / ode-auc, and baselines if wanted at every c; "
                        "nnpu: its 500-network grid per cell, about 33 CPU hours for 6 x 4 x 10 cells)")
    p.add_argument("--baselines", type=csv, default=["upu", "wsvm", "supervised"],
                   help="the baselines part's methods (nnpu: its 500-network grid per cell, not in the default)")
    p.add_argument("--figures-c", type=lambda t: [float(x) for x in csv(t)], default=list(CS))
    p.add_argument("--baselines-c", type=lambda t: [float(x) for x in csv(t)], default=[0.01])
    p.add_argument("--reps", type=int, default=10, help="replications (default: the paper's 10)")
    p.add_argument("--readings", type=csv, default=list(READINGS), help=f"readings to run (default: all of "
                                                                       f"{list(READINGS)})")
    p.add_argument("--readings-datasets", type=csv, default=None, help="datasets of the readings part "
                                                                       "(default: --datasets)")
    p.add_argument("--readings-c", type=lambda t: [float(x) for x in csv(t)], default=[0.01],
                   help="c values of the readings part (default: 0.01, Table 2's)")
    p.add_argument("--ablation-datasets", type=csv, default=list(DATASETS))
    p.add_argument("--ablation-c", type=lambda t: [float(x) for x in csv(t)], default=list(CS))
    p.add_argument("--baseline-configs", type=int, default=None,
                   help="thin the uPU/nnPU baselines to this many configurations (default: all)")
    p.add_argument("--supervised-trials", type=int, default=30)
    p.add_argument("--address", default=None)
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--in-process", action="store_true", help="run the grids in this process instead of on Ray")
    p.add_argument("--prior", default="tice", choices=("tice", "true"),
                   help="true: train/select with the split's true prior (an oracle; use another --root)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--root", default="results/bench_pu", help="directory of the parts' grids (resumable)")
    p.add_argument("--out", default="results/bench_pu.json")
    p.add_argument("--measured", default=None,
                   help="also write one compact JSON per part to this directory (bench_pu_<part>.json: the part's "
                        "settings, tables, comparison with the paper and per-cell test AUC and prior)")
    args = p.parse_args(argv)
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        p.error(f"unknown parts {unknown}; known: {list(PARTS)}")
    unknown = sorted(set(args.readings) - set(READINGS))
    if unknown:
        p.error(f"unknown readings {unknown}; known: {list(READINGS)}")
    out = Path(args.out)
    with Benchmark("bench_pu", out, argv) as bench:
        report: dict = {"settings": vars(args), "paper": PAPER}
        for part in args.parts:
            report[part] = globals()[f"part_{part}"](args)
        report["comparison"] = comparison(report)
        report["datasets"] = dataset_sizes(dict.fromkeys([*args.datasets, "satimage"]))
        bench.figures.update(report)
    if args.measured:
        write_measured(json.loads(out.read_text()), Path(args.measured))
    print(json.dumps(report["comparison"], indent=2))


if __name__ == "__main__":
    main()
