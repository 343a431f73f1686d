"""RFMS grid benchmark: per-method hypervolume with the sites' guard on and off, framework
overhead, core utilisation, and grid throughput with sites as Ray actors vs local services.

Runs reduced RFMS grids on Ray (one local session on all CPUs unless ``--address``):

* ``geo5_sim`` with its natural sites (the embedded stand-in for the paper's GEO data);
* a DRC split (PCA keeping 10 % of the variance, tied Gaussian mixtures) of a real dataset
  (``gina_agnostic_subset`` by default).

For each grid it records the mean hypervolume per learner and method, how often ``fmo``
and ``rand_mo`` beat ``lso`` (the paper's claim), the framework's own time per evaluation
(unit wall time minus cross-validation, fits, curator scoring, searcher work and final
evaluation; curator scoring counted as the curators' summed time, since on one machine
they share the cores, and also as the slowest curator only), the curator round trip per
query, and the share of core time busy
(sum of unit wall times / (grid wall time x CPUs)).

Each grid runs in several site setups (``--setups``): ``guard5_actor`` (the sites'
differencing guard with k = 5, sites as Ray actors: the default policy), ``guard0_actor``
(guard off: what the guard costs the benign methods) and ``guard5_service`` (the same
policy, sites as authenticated local network services: the grid's throughput against
the actors).  Every setup writes its own results; the report puts the hypervolumes side
by side and the evaluations per second of each.  Writes ``results/bench_rfms.json``.

    python experiments/bench_rfms.py                 # default (about 1-1.5 h on 2 cores)
    python experiments/bench_rfms.py --quick         # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from raytune_fed.grid import make_progress
from raytune_fed.runtime import connect
from raytune_fed.workflows.rfms import RFMSSettings, run_grid

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)


def _grid_stats(frame: pd.DataFrame, wall: float, n_cpus: int) -> dict:
    units = frame.drop_duplicates("experiment")
    busy = float((units["unit_finished"] - units["unit_started"]).sum())
    span = float(units["unit_finished"].max() - units["unit_started"].min())
    n_eval = float(units["unit_n_local"].sum())
    n_remote = float(units["unit_n_remote"].sum())
    scoring = np.minimum(units["unit_scoring"], units["unit_remote"])  # curators' CPU time, within round trips
    work = float((units["unit_local"] + units["unit_fit"] + scoring + units["unit_final"]).sum())
    work_max = float((units["unit_local"] + units["unit_fit"] + units["unit_scoring_max"] + units["unit_final"]).sum())
    hv = frame.groupby(["learner", "method"])["hypervolume"].agg(["mean", "std", "count"]).reset_index()
    wide = frame.pivot_table(index="experiment", columns="method", values="hypervolume")
    versus = {}
    for m in ("fmo", "rand_mo"):
        if m in wide and "lso" in wide:
            d = wide[m] - wide["lso"]
            versus[f"{m}_vs_lso"] = {"mean_difference": float(d.mean()), "wins": int((d > 1e-12).sum()),
                                     "ties": int((d.abs() <= 1e-12).sum()), "losses": int((d < -1e-12).sum())}
    return {
        "n_units": int(len(units)),
        "evaluations_per_second": float(n_eval / wall),
        "n_refused_evaluations": int(frame["n_refused_evaluations"].sum()),
        "n_withheld_finals": int(frame["n_withheld_finals"].sum()),
        "wall_seconds": wall,
        "busy_share": busy / (max(span, wall) * n_cpus),
        "busy_share_within_units_span": busy / (span * n_cpus),
        "evaluations": int(n_eval),
        "curator_queries": int(n_remote),
        "framework_seconds_per_evaluation": float(units["unit_framework"].sum() / n_eval),
        "work_seconds_per_evaluation": float(work / n_eval),
        "framework_share_of_evaluation_time": float(units["unit_framework"].sum() / work),
        "framework_share_counting_slowest_curator_only": float(units["unit_framework_max"].sum() / work_max),
        "searcher_seconds_per_evaluation": float(units["unit_search"].sum() / n_eval),
        "curator_round_trip_per_query": float(units["unit_remote"].sum() / max(n_remote, 1)),
        "curator_scoring_cpu_per_query": float(scoring.sum() / max(n_remote, 1)),
        "curator_round_trip_minus_slowest_curator": float(
            (units["unit_remote"] - units["unit_scoring_max"]).sum() / max(n_remote, 1)),
        "hypervolume": hv.to_dict(orient="records"),
        **versus,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny grids (smoke run)")
    p.add_argument("--drc-dataset", default="gina_agnostic_subset")
    p.add_argument("--learners", default="elastic_net,svm")
    p.add_argument("--pairs", type=int, default=4, help="openbox/lockbox pairs (n_pairs)")
    p.add_argument("--reps", type=int, default=1, help="replications (n_reps)")
    p.add_argument("--n-init", type=int, default=20)
    p.add_argument("--n-iter", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="results/bench_rfms.json")
    p.add_argument("--address", default=None)
    p.add_argument("--setups", default="guard5_actor,guard0_actor,guard5_service",
                   help="comma-separated guard<k>_<actor|service|local> site setups")
    args = p.parse_args()
    setups = {}
    for name in args.setups.split(","):
        guard, _, deployment = name.partition("_")
        if not guard.startswith("guard") or not guard[5:].isdigit() or deployment not in ("actor", "service", "local"):
            p.error(f"a setup is guard<k>_<actor|service|local>, got {name!r}")
        setups[name] = (int(guard[5:]), deployment)

    with Benchmark("bench_rfms", args.out) as bench:
        n_init, n_iter = (4, 4) if args.quick else (args.n_init, args.n_iter)
        n_pairs = 2 if args.quick else args.pairs
        learners = ["svm"] if args.quick else args.learners.split(",")
        ray = connect(args.address)
        n_cpus = int(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
        work = Path(args.out).with_suffix("")
        report = {"n_cpus": n_cpus, "n_init": n_init, "n_iter": n_iter, "n_pairs": n_pairs, "n_reps": args.reps,
                  "learners": learners, "setups": list(setups), "grids": {}}
        grids = {"geo5_sim_natural": RFMSSettings(dataset="geo5_sim", split="natural", n_init=n_init, n_iter=n_iter,
                                                  seed=args.seed),
                 f"{args.drc_dataset}_drc10": RFMSSettings(dataset=args.drc_dataset, split="drc", pca_variance=0.1,
                                                           n_init=n_init, n_iter=n_iter, seed=args.seed)}
        for name, settings in grids.items():
            report["grids"][name] = {}
            for setup, (guard_k, deployment) in setups.items():
                out = work / name / setup
                shutil.rmtree(out, ignore_errors=True)  # fresh: utilisation must not count resumed units
                start = time.time()
                frame = run_grid(replace(settings, guard_k=guard_k), learners=learners, n_reps=args.reps,
                                 n_pairs=n_pairs,
                                 out=out, address=args.address, progress=make_progress(), sites=deployment)
                stats = _grid_stats(frame, time.time() - start, n_cpus)
                report["grids"][name][setup] = stats
                print(json.dumps({name: {setup: {k: v for k, v in stats.items() if k != "hypervolume"}}}, indent=2))
        bench.figures.update(report)
    for name, by_setup in report["grids"].items():
        print(f"\n{name}: mean hypervolume per setup ({', '.join(by_setup)})")
        tables = {setup: {(r["learner"], r["method"]): r["mean"] for r in g["hypervolume"]}
                  for setup, g in by_setup.items()}
        for key in next(iter(tables.values())):
            print(f"  {key[0]:<12} {key[1]:<8} " + "  ".join(f"{t.get(key, np.nan):.4f}" for t in tables.values()))
        print("  evaluations per second: " + ", ".join(f"{s} {g['evaluations_per_second']:.2f}"
                                                     for s, g in by_setup.items()))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
