"""A measured slice of the paper's RFMS grid, its core utilisation, and the full grid's projected wall time.

The slice: ``geo5_sim`` with its five natural sites (the stand-in for the paper's GEO
studies), 2 openbox/lockbox pairs x 2 replications x the three learners (elastic net, SVM,
ranger's probability forest) with the paper's search spaces, every RFMS method.  It runs

* on a local Ray session of ``--num-cpus`` CPUs (2 here), without and with the long-tail
  mode (idle cores lent to the last cells for parallel CV folds);
* on a ``ray.cluster_utils.Cluster``: an empty head node and one node per site declaring
  ``site:<name>`` (the sites' actors and rows live there); the two openbox sites' nodes
  hold one CPU each (cells run on their openbox's node), the others none.

Every run starts from an empty store with the same seed; the rows (every hypervolume,
every selected configuration) must be identical across the three runs, which is checked
and recorded.  From the no-tail local run's per-unit costs (one core each) it projects the
full grid (20 pairs x 10 replications x 3 learners = 600 units) on 2, 16 and 64 cores:
list scheduling, longest unit first, of the measured unit costs (each learner's measured
units repeated to 200), without the long tail and with it (once nothing waits, free cores
are shared round robin among running units, up to ``n_folds`` each; a unit with k cores
runs its local-CV share ``p`` k times faster, Amdahl, with ``p`` its measured share of
time in local CV).  Writes ``results/bench_grid.json``.

``--runs`` picks a subset of the three runs (``local``, ``local_tail``, ``cluster``); the
projection then uses the first local run given, counting a unit granted more than one
core at its learner's mean one-core cost.  Unit costs leave out the learner's warm-up
(kernel compilation, once per worker process; recorded apart).

    python experiments/bench_grid.py --n-init 4 --n-iter 4     # reduced (about 10 min on 2 cores)
    python experiments/bench_grid.py                            # the paper's 20 + 40 evaluations
    python experiments/bench_grid.py --runs local_tail          # the paper's budget, long-tail run only
    python experiments/bench_grid.py --project-from experiments/measured/bench_grid_paper.json  # projection only
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

LEARNERS = ("elastic_net", "svm", "random_forest")
FULL_GRID = {"n_pairs": 20, "n_reps": 10}  # x 3 learners = 600 units
MEASUREMENT_PREFIX = "unit_"
COUNTS_IN_ROWS = ("unit_n_curator_queries", "unit_n_ledger_queries")
RUNS = ("local", "local_tail", "cluster")
RUN_NAMES = {"local": ("local_one_core_per_unit", False), "local_tail": ("local_long_tail", True)}


def _rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The result rows without measurements, in a fixed order (what a rerun must reproduce)."""
    timing = [c for c in frame.columns if c == "seconds" or (c.startswith(MEASUREMENT_PREFIX) and c not in COUNTS_IN_ROWS)]
    rows = frame.drop(columns=timing).sort_values(["experiment", "method"]).reset_index(drop=True)
    return rows.map(lambda v: json.dumps(list(v)) if isinstance(v, (list, np.ndarray)) else v)


def _digest(rows: pd.DataFrame) -> str:
    return hashlib.sha256(rows.to_csv(index=False).encode()).hexdigest()[:16]


def _units(frame: pd.DataFrame) -> list[dict]:
    units = frame.drop_duplicates("experiment")
    usage = frame.attrs.get("usage", {})
    return [{"learner": r.learner, "openbox": int(r.openbox), "replication": int(r.replication),
             # without the learner's warm-up (compiling its kernels), paid once per worker process
             "seconds": float(r.unit_finished - r.unit_started - r.unit_warmup),
             "warmup_seconds": float(r.unit_warmup), "local_cv_seconds": float(r.unit_local),
             "total_seconds": float(r.unit_total),
             "cpu_seconds": usage.get(r.cell_key, {}).get("cpu_seconds"),
             "cores": usage.get(r.cell_key, {}).get("cores", 1)} for r in units.itertuples()]


def _run(name: str, settings, work: Path, *, n_pairs: int, n_reps: int, long_tail: bool, address: str | None) -> dict:
    from raytune_fed.grid import make_progress
    from raytune_fed.workflows.rfms import run_grid

    out = work / name
    shutil.rmtree(out, ignore_errors=True)  # fresh: utilisation must not count resumed units
    start = time.time()
    frame = run_grid(settings, learners=LEARNERS, n_reps=n_reps, n_pairs=n_pairs, out=out, address=address,
                     progress=make_progress(), long_tail=long_tail)
    wall = time.time() - start
    rows = _rows(frame)
    hv = frame.groupby(["learner", "method"], sort=False)["hypervolume"].agg(["mean", "std", "count"]).reset_index()
    report = {"long_tail": long_tail, "wall_seconds": wall, "load_average_after": list(os.getloadavg()), "utilisation": frame.attrs["utilisation"],
              "units": _units(frame), "rows_digest": _digest(rows), "hypervolume": hv.to_dict(orient="records")}
    print(json.dumps({name: {k: report[k] for k in ("wall_seconds", "utilisation", "rows_digest")}}, indent=2),
          flush=True)
    return report, rows


def _cluster(site_names: tuple[str, ...], openboxes: set[str]):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for site in site_names:
        cluster.add_node(num_cpus=1 if site in openboxes else 0, resources={f"site:{site}": 1})
    cluster.wait_for_nodes()
    return cluster


# ----------------------------------------------------------------------------- projection

def project(units: list[tuple[float, float]], n_cores: int, *, long_tail: bool, max_parallelism: int = 10) -> float:
    """Makespan of ``units`` ((one-core seconds, share of it in local CV)) on ``n_cores`` (see the module notes)."""
    order = sorted(units, key=lambda u: -u[0])
    if not long_tail:
        free = [0.0] * n_cores
        for seconds, _ in order:
            heapq.heappush(free, heapq.heappop(free) + seconds)
        return max(free)
    now, queue = 0.0, list(order)
    running: list[list[float]] = []  # [work left in one-core seconds, p, cores]
    while queue or running:
        while queue and len(running) < n_cores:
            seconds, p = queue.pop(0)
            running.append([seconds, p, 1])
        if not queue:  # the tail: share the free cores, longest remaining first
            for r in running:
                r[2] = 1
            free = n_cores - len(running)
            running.sort(key=lambda r: -r[0])
            while free > 0 and any(r[2] < max_parallelism for r in running):
                for r in running:
                    if free and r[2] < max_parallelism:
                        r[2] += 1
                        free -= 1
        rates = [1.0 / ((1 - r[1]) + r[1] / r[2]) for r in running]
        step = min(r[0] / rate for r, rate in zip(running, rates))
        now += step
        for r, rate in zip(running, rates):
            r[0] -= step * rate
        running = [r for r in running if r[0] > 1e-9]
    return now


def _projections(units: list[dict], n_init: int, n_iter: int) -> dict:
    """The projection from wall seconds and, where measured, from each unit's CPU seconds.

    On a machine shared with other jobs a unit's wall seconds overstate its one-core cost
    (it got part of a core) and its CPU seconds understate it (the curators' scoring runs in
    the sites' processes); the two bracket what a quiet core would take.
    """
    out = _projection(units, n_init, n_iter)
    if units and all(u.get("cpu_seconds") is not None for u in units):
        on_cpu = [{**u, "seconds": u["cpu_seconds"], "cores": 1} for u in units]
        out["from_cpu_seconds"] = _projection(on_cpu, n_init, n_iter)
    return out


def _projection(units: list[dict], n_init: int, n_iter: int) -> dict:
    """Project from the one-core cost of each unit: its wall seconds if it ran on one core, else
    the mean of its learner's one-core units (its own wall seconds if there are none: a lower bound)."""
    one_core: dict[str, list[float]] = {}
    for u in units:
        if u.get("cores", 1) == 1:
            one_core.setdefault(u["learner"], []).append(u["seconds"])
    per_learner = {}
    for u in units:
        share = min(u["local_cv_seconds"] / u["total_seconds"], 1.0) if u["total_seconds"] > 0 else 0.0
        seconds = u["seconds"] if u.get("cores", 1) == 1 else float(np.mean(one_core.get(u["learner"],
                                                                                          [u["seconds"]])))
        per_learner.setdefault(u["learner"], []).append((seconds, share))
    n_per_learner = FULL_GRID["n_pairs"] * FULL_GRID["n_reps"]
    grid = [per_learner[name][i % len(per_learner[name])] for name in per_learner for i in range(n_per_learner)]
    scale = 60.0 / (n_init + n_iter)  # linear in evaluations (the GP's own cost grows faster: a lower bound)
    out = {"model": "list scheduling of the measured unit costs, longest first (each learner's measured units "
                    "repeated to 200); long tail: idle cores shared round robin once nothing waits, up to 10 per "
                    "unit, Amdahl speed-up of each unit's measured local-CV share",
           "n_units": len(grid), "cpu_hours": sum(s for s, _ in grid) / 3600,
           "mean_unit_seconds": {k: float(np.mean([s for s, _ in v])) for k, v in per_learner.items()},
           "local_cv_share": {k: float(np.mean([p for _, p in v])) for k, v in per_learner.items()},
           "warmup_seconds_per_worker": max((u.get("warmup_seconds", 0.0) for u in units), default=0.0),
           "evaluations_measured": n_init + n_iter, "scale_to_paper_evaluations": scale, "cores": {}}
    for cores in (2, 16, 64):
        row = {}
        for tail in (False, True):
            span = project(grid, cores, long_tail=tail)
            key = "long_tail" if tail else "one_core_per_unit"
            row[f"{key}_hours"] = span / 3600
            row[f"{key}_busy_share"] = sum(s for s, _ in grid) / (cores * span)  # one-core work over core time
            row[f"{key}_hours_at_60_evaluations"] = span * scale / 3600
        out["cores"][str(cores)] = row
    return out


def reproject(path: Path) -> None:
    """Projection of the first local run recorded in ``path``, from its measured units (the harness's record, whose
    figures are the benchmark's numbers, or a JSON written before the harness)."""
    try:
        record = json.loads(path.read_text())
        report = figures_of(record)
        name = report["projection"]["from_run"] if "from_run" in report.get("projection", {}) else next(
            n for n in report["runs"] if n.startswith("local"))
        units = report["runs"][name]["units"]
        n_init, n_iter = report["settings"]["n_init"], report["settings"]["n_iter"]
    except (OSError, ValueError, KeyError, StopIteration, TypeError) as exc:
        raise ValueError(f"--project-from {path}: not a bench_grid JSON with a local run ({type(exc).__name__})") \
            from None
    report["projection"] = {**_projections(units, n_init, n_iter), "from_run": name}
    path.write_text(json.dumps(record, indent=2, default=float))
    print(json.dumps(report["projection"], indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-init", type=int, default=20)
    p.add_argument("--n-iter", type=int, default=40)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", default=",".join(RUNS),
                   help=f"comma-separated subset of {', '.join(RUNS)} (the projection uses the first local run)")
    p.add_argument("--skip-cluster", action="store_true", help="the same as leaving 'cluster' out of --runs")
    p.add_argument("--out", default="results/bench_grid.json")
    p.add_argument("--project-from", metavar="JSON",
                   help="recompute the projection of a finished benchmark's JSON (no grid runs) and rewrite it")
    args = p.parse_args()
    if args.project_from:
        try:
            reproject(Path(args.project_from))
        except ValueError as exc:
            p.error(str(exc))
        return
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = sorted(set(runs) - set(RUNS))
    if unknown or not runs:
        p.error(f"--runs: unknown run(s) {unknown or runs!r}; choose from {', '.join(RUNS)}")
    if args.skip_cluster and "cluster" in runs:
        runs.remove("cluster")

    import ray

    from raytune_fed.runtime import connect
    from raytune_fed.workflows.rfms import RFMSSettings, build_grid
    from raytune_fed.workflows.rfms._sites import plan_sites

    with Benchmark("bench_grid", args.out) as bench:
        settings = RFMSSettings(dataset="geo5_sim", split="natural", n_init=args.n_init, n_iter=args.n_iter,
                                seed=args.seed)
        work = Path(args.out).with_suffix("")
        report: dict = {"settings": vars(args), "ray": ray.__version__,
                        "slice": {"dataset": "geo5_sim", "n_pairs": args.pairs, "n_reps": args.reps,
                                  "learners": list(LEARNERS), "methods": list(settings.methods)},
                        "runs": {}}
        bench.figures = report  # filled run by run: a run stopped by an exception is recorded with what it measured
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)

        def save() -> None:  # after every run, so a run killed outright still leaves what it measured
            Path(args.out).write_text(json.dumps(report, indent=2, default=float))

        connect(num_cpus=args.num_cpus)
        rows = {}
        for name, tail in (RUN_NAMES[r] for r in runs if r in RUN_NAMES):
            report["runs"][name], rows[name] = _run(name, settings, work, n_pairs=args.pairs, n_reps=args.reps,
                                                    long_tail=tail, address=None)
            if "projection" not in report:
                report["projection"] = _projections(report["runs"][name]["units"], args.n_init, args.n_iter)
                report["projection"]["from_run"] = name
            save()
        ray.shutdown()
        if "cluster" in runs:
            plan = plan_sites(settings)
            specs = build_grid(settings, n_sites=len(plan.site_names), learners=LEARNERS, n_reps=args.reps,
                               n_pairs=args.pairs, site_names=plan.site_names)
            openboxes = {s.site_name(s.openbox) for s in specs}
            cluster = _cluster(plan.site_names, openboxes)
            try:
                connect(cluster.address)
                name = "cluster_sites_on_own_nodes_long_tail"
                report["runs"][name], rows[name] = _run(name, settings, work, n_pairs=args.pairs, n_reps=args.reps,
                                                        long_tail=True, address=cluster.address)
                report["runs"][name]["nodes"] = {"head": 0, **{s: int(s in openboxes) for s in plan.site_names}}
                save()
            finally:
                ray.shutdown()
                cluster.shutdown()
        first = next(iter(rows.values()))
        report["identical_rows_across_runs"] = all(r.equals(first) for r in rows.values()) if len(rows) > 1 else None
    print(json.dumps({"identical_rows_across_runs": report["identical_rows_across_runs"],
                      "projection": report.get("projection")}, indent=2))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
