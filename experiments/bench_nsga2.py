"""Benchmark ``NSGA2Search`` against Optuna's ``NSGAIISampler`` at equal budget on ZDT1 / ZDT2.

Both are Ray Tune searchers driven directly through the Searcher API, a generation at a
time: ``population`` suggestions, then their results (no Tuner, no Ray session), so the
numbers measure the algorithms and their ``suggest`` cost, not Tune's scheduling.

* ``nsga2search``: :class:`raytune_fed.search.NSGA2Search` with the CMOSB paper's
  variation (SBX p 0.9, eta 2; polynomial mutation p 0.1 per variable, eta 20),
  ``set_max_concurrency(population)`` so one ask proposes the whole generation.
* ``optuna_nsga2``: Ray's ``OptunaSearch`` with ``NSGAIISampler(population_size=population)``
  and Optuna's default variation (uniform crossover p 0.9, mutation 1/n per variable).

Problems: pymoo's ZDT1 and ZDT2 with ``--n-var`` variables on ``[0, 1]``.  Score: the
dominated hypervolume (:func:`raytune_fed.metrics.hypervolume`) of every evaluated point
against ``(1.1, 1.1)``, also as a ratio to the true front's hypervolume; ``suggest``
latency (mean and p95 seconds) per method.

Run ``python experiments/bench_nsga2.py`` (5 seeds, population 20, 20 generations) or
``--quick`` (2 seeds, 10 generations); JSON goes to ``results/bench_nsga2.json`` unless
``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

import numpy as np

from raytune_fed.metrics import hypervolume
from raytune_fed.random import seed_int, spawn

METHODS = ("nsga2search", "optuna_nsga2")
PROBLEMS = ("zdt1", "zdt2")
OBJECTIVES = ["f1", "f2"]
REFERENCE = (1.1, 1.1)


def make_searcher(method: str, space: dict, population: int, seed: int):
    if method == "nsga2search":
        from raytune_fed.search import NSGA2Search

        searcher = NSGA2Search(space, OBJECTIVES, ["min", "min"], seed=seed, population_size=population)
        searcher.set_max_concurrency(population)
        return searcher
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    sampler = optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    return OptunaSearch(space, metric=OBJECTIVES, mode=["min", "min"], sampler=sampler)


def run(problem_name: str, method: str, n_var: int, population: int, generations: int, seed: int) -> dict:
    from pymoo.problems import get_problem
    from ray import tune

    problem = get_problem(problem_name, n_var=n_var)
    names = [f"x{i}" for i in range(n_var)]
    searcher = make_searcher(method, {n: tune.uniform(0.0, 1.0) for n in names}, population, seed)
    F, latency, start = [], [], time.perf_counter()
    for g in range(generations):
        ids = [f"g{g}_t{i}" for i in range(population)]
        configs = []
        for tid in ids:
            t0 = time.perf_counter()
            configs.append(searcher.suggest(tid))
            latency.append(time.perf_counter() - t0)
        if any(not isinstance(c, dict) for c in configs):
            raise RuntimeError(f"{method} did not propose a whole generation: {configs}")
        rows = problem.evaluate(np.array([[c[n] for n in names] for c in configs]))
        for tid, f in zip(ids, rows):
            F.append([float(v) for v in f])
            searcher.on_trial_complete(tid, dict(zip(OBJECTIVES, F[-1])))
    hv = hypervolume(np.asarray(F), REFERENCE)
    lat = np.asarray(latency)
    return {"problem": problem_name, "method": method, "seed": seed, "n_evals": len(F), "hv": hv,
            "hv_ratio": hv / hypervolume(problem.pareto_front(), REFERENCE),
            "suggest_mean_s": float(lat.mean()), "suggest_p95_s": float(np.quantile(lat, 0.95)),
            "wall_s": time.perf_counter() - start}


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for p in PROBLEMS:
        for m in METHODS:
            rs = [r for r in runs if r["problem"] == p and r["method"] == m]
            if rs:
                hv = np.array([r["hv_ratio"] for r in rs])
                out.setdefault(p, {})[m] = {
                    "hv_ratio_mean": float(hv.mean()), "hv_ratio_std": float(hv.std(ddof=1)) if len(hv) > 1 else 0.0,
                    "suggest_mean_s": float(np.mean([r["suggest_mean_s"] for r in rs])),
                    "suggest_p95_s": float(np.max([r["suggest_p95_s"] for r in rs])), "n_runs": len(rs)}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--root-seed", type=int, default=2024)
    ap.add_argument("--population", type=int, default=20)
    ap.add_argument("--generations", type=int, default=20)
    ap.add_argument("--n-var", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 10 generations")
    ap.add_argument("--out", default="results/bench_nsga2.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.generations = 2, 10
    if args.seeds < 1 or args.population < 2 or args.generations < 1 or args.n_var < 2:
        ap.error("need --seeds >= 1, --population >= 2, --generations >= 1, --n-var >= 2")

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    seeds = [seed_int(s) for s in spawn(args.root_seed, args.seeds)]
    runs, t0 = [], time.perf_counter()
    for p in PROBLEMS:
        for seed in seeds:
            for m in METHODS:
                runs.append(run(p, m, args.n_var, args.population, args.generations, seed))
                r = runs[-1]
                print(f"{p} {m:13s} seed={seed:<10d} HV/HV*={r['hv_ratio']:.3f} "
                      f"suggest={r['suggest_mean_s'] * 1e3:.2f}ms", flush=True)
    import pymoo
    import ray

    report = {"benchmark": "bench_nsga2", "settings": vars(args), "reference": REFERENCE,
              "summary": summarise(runs), "runs": runs, "total_wall_s": time.perf_counter() - t0,
              "environment": {"python": platform.python_version(), "ray": ray.__version__,
                              "optuna": optuna.__version__, "pymoo": pymoo.__version__,
                              "machine": platform.machine()}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report["summary"], indent=2))
    print(f"total {report['total_wall_s']:.0f}s; wrote {out}")
    return report


if __name__ == "__main__":
    main()
