"""Benchmark ``ParEGOSearch`` against random search, NSGA-II and TPE on pymoo test problems.

Every method is a Ray Tune ``Searcher`` driven *directly* through the Searcher API
(``suggest`` then ``on_trial_complete``, one trial at a time, no Tuner and no Ray
session), so the numbers measure the algorithms rather than Tune's scheduling overhead.

* ``parego``: :class:`raytune_fed.search.ParEGOSearch`, 20-point LHS then ParEGO
  (GP + EI on augmented-Tchebycheff scalarisations), package defaults otherwise.
* ``random``, ``nsga2``, ``tpe``: Ray's ``OptunaSearch`` with ``metric=[..]``,
  ``mode=[..]`` and Optuna's ``RandomSampler``, ``NSGAIISampler(population_size=20)`` and
  ``TPESampler(n_startup_trials=20)`` (population / start-up matched to ParEGO's initial
  design; Optuna's defaults are 50 and 10).

Problems are pymoo's ZDT1, ZDT2, ZDT3 and DTLZ2 (2 objectives), each with 5 variables on
``[0, 1]^5``.  Score: the dominated hypervolume (pymoo's ``HV``) of all evaluated points
against a fixed reference point, 1.1 times the nadir of the true Pareto front
(``(1.1, 1.1)``; ZDT3 ``(0.937, 1.1)``), also given as a ratio to the true front's
hypervolume (from ``problem.pareto_front()``).  ``suggest`` latency (mean and p95
seconds) is recorded for every method.  Note that the ZDT optima lie on the boundary of
the box (``x_2..x_n = 0``), which favours a GP + EI search that likes the boundary;
DTLZ2's optimum (``x_2..x_n = 0.5``) is interior.

Run ``python experiments/bench_parego.py`` (5 seeds, 60 evaluations, 20 initial) or
``--quick`` (1 seed, 30 evaluations, 10 initial); results go to
``results/bench_parego.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

METHODS = ("parego", "random", "nsga2", "tpe")
OBJECTIVES = ("f1", "f2")


@dataclass(frozen=True)
class ProblemSpec:
    """A pymoo test problem and the reference point its hypervolume is measured against."""

    name: str
    pymoo_name: str
    n_var: int
    ref_point: tuple[float, float]
    extra: tuple = ()

    def build(self):
        from pymoo.problems import get_problem

        return get_problem(self.pymoo_name, n_var=self.n_var, **dict(self.extra))


PROBLEMS = {
    "zdt1": ProblemSpec("zdt1", "zdt1", 5, (1.1, 1.1)),
    "zdt2": ProblemSpec("zdt2", "zdt2", 5, (1.1, 1.1)),
    "zdt3": ProblemSpec("zdt3", "zdt3", 5, (round(1.1 * 0.85183, 4), 1.1)),
    "dtlz2": ProblemSpec("dtlz2", "dtlz2", 5, (1.1, 1.1), (("n_obj", 2),)),
}


@dataclass(frozen=True)
class Cell:
    """One run: a problem, a method and a replicate; ``seed`` is derived from the root seed."""

    problem: str
    method: str
    replicate: int
    seed: int
    n_evals: int
    n_initial: int

    @property
    def key(self) -> str:
        return f"{self.problem}/{self.method}/r{self.replicate}"


def make_grid(problems, methods, n_seeds: int, root_seed: int, n_evals: int, n_initial: int) -> list[Cell]:
    seeds = np.random.SeedSequence(root_seed).spawn(n_seeds)
    return [Cell(p, m, r, int(seeds[r].generate_state(1)[0] % 2**31), n_evals, n_initial)
            for p in problems for r in range(n_seeds) for m in methods]


def make_searcher(cell: Cell, space: dict):
    metric, mode = list(OBJECTIVES), ["min", "min"]
    if cell.method == "parego":
        from raytune_fed.search import ParEGOSearch

        return ParEGOSearch(space, metric, mode, n_initial_points=cell.n_initial, seed=cell.seed)
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    samplers: dict[str, Callable[[], optuna.samplers.BaseSampler]] = {
        "random": lambda: optuna.samplers.RandomSampler(seed=cell.seed),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(population_size=cell.n_initial, seed=cell.seed),
        "tpe": lambda: optuna.samplers.TPESampler(n_startup_trials=cell.n_initial, seed=cell.seed),
    }
    if cell.method not in samplers:
        raise ValueError(f"unknown method {cell.method!r}; known: {list(METHODS)}")
    return OptunaSearch(space, metric=metric, mode=mode, sampler=samplers[cell.method]())


def hypervolume(F: np.ndarray, ref_point) -> float:
    from pymoo.indicators.hv import HV

    F = F[np.all(F < np.asarray(ref_point), axis=1)]
    return float(HV(ref_point=np.asarray(ref_point))(F)) if len(F) else 0.0


def run_cell(cell: Cell) -> dict:
    from ray import tune

    spec = PROBLEMS[cell.problem]
    problem = spec.build()
    names = [f"x{i}" for i in range(spec.n_var)]
    space = {n: tune.uniform(float(lo), float(hi)) for n, lo, hi in zip(names, problem.xl, problem.xu)}
    searcher = make_searcher(cell, space)
    F, latency = [], []
    start = time.perf_counter()
    for t in range(cell.n_evals):
        tid = f"trial_{t}"
        t0 = time.perf_counter()
        config = searcher.suggest(tid)
        latency.append(time.perf_counter() - t0)
        f = problem.evaluate(np.array([[config[n] for n in names]]))[0]
        F.append([float(v) for v in f])
        searcher.on_trial_complete(tid, dict(zip(OBJECTIVES, F[-1])))
    F = np.asarray(F)
    hv = hypervolume(F, spec.ref_point)
    true_hv = hypervolume(problem.pareto_front(), spec.ref_point)
    lat = np.asarray(latency)
    return {**asdict(cell), "key": cell.key, "hv": hv, "hv_ratio": hv / true_hv,
            "suggest_mean_s": float(lat.mean()), "suggest_p95_s": float(np.quantile(lat, 0.95)),
            "suggest_mean_model_s": float(lat[cell.n_initial:].mean()) if cell.n_evals > cell.n_initial else None,
            "wall_s": time.perf_counter() - start}


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for p in sorted({r["problem"] for r in runs}):
        out[p] = {}
        for m in METHODS:
            rs = [r for r in runs if r["problem"] == p and r["method"] == m]
            if not rs:
                continue
            hv = np.array([r["hv_ratio"] for r in rs])
            lat = np.array([r["suggest_mean_s"] for r in rs])
            out[p][m] = {"hv_ratio_mean": float(hv.mean()),
                         "hv_ratio_std": float(hv.std(ddof=1)) if len(hv) > 1 else 0.0,
                         "hv_mean": float(np.mean([r["hv"] for r in rs])), "n_runs": len(rs),
                         "suggest_mean_s": float(lat.mean()),
                         "suggest_p95_s": float(np.max([r["suggest_p95_s"] for r in rs]))}
        by_seed = {}
        for r in runs:
            if r["problem"] == p:
                by_seed.setdefault(r["replicate"], {})[r["method"]] = r["hv"]
        wins = {m: 0 for m in METHODS if m != "parego"}
        for scores in by_seed.values():
            for m in wins:
                if m in scores and "parego" in scores and scores["parego"] > scores[m]:
                    wins[m] += 1
        out[p]["parego_wins_vs"] = wins
    return out


def parego_latency(runs: list[dict]) -> dict:
    rs = [r for r in runs if r["method"] == "parego"]
    return {"mean_s": float(np.mean([r["suggest_mean_s"] for r in rs])),
            "mean_model_phase_s": float(np.mean([r["suggest_mean_model_s"] for r in rs])),
            "p95_s_median_over_runs": float(np.median([r["suggest_p95_s"] for r in rs])),
            "p95_s_max_over_runs": float(np.max([r["suggest_p95_s"] for r in rs]))}


def print_table(summary: dict) -> None:
    print(f"\n{'problem':8s} {'method':7s} {'HV/HV*':>15s} {'HV':>8s} {'suggest mean':>13s} {'p95':>8s}")
    for p, by_method in summary.items():
        for m in METHODS:
            s = by_method.get(m)
            if s:
                print(f"{p:8s} {m:7s} {s['hv_ratio_mean']:7.3f} ± {s['hv_ratio_std']:5.3f} {s['hv_mean']:8.4f} "
                      f"{s['suggest_mean_s']:12.4f}s {s['suggest_p95_s']:7.3f}s")
        print(f"{'':8s} ParEGO wins per seed vs {by_method['parego_wins_vs']}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="replicates per problem and method (default 5)")
    ap.add_argument("--root-seed", type=int, default=2024)
    ap.add_argument("--n-evals", type=int, default=60)
    ap.add_argument("--n-initial", type=int, default=20)
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 30 evaluations, 10 initial")
    ap.add_argument("--out", default="results/bench_parego.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.n_evals, args.n_initial = 1, 30, 10
    if args.seeds < 1 or args.n_evals <= args.n_initial or args.n_initial < 1:
        ap.error("need --seeds >= 1 and --n-evals > --n-initial >= 1")

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune").setLevel(logging.ERROR)

    grid = make_grid(args.problems, args.methods, args.seeds, args.root_seed, args.n_evals, args.n_initial)
    runs, t0 = [], time.perf_counter()
    for i, cell in enumerate(grid):
        runs.append(run_cell(cell))
        r = runs[-1]
        print(f"[{i + 1}/{len(grid)}] {cell.key:22s} HV/HV*={r['hv_ratio']:.3f} "
              f"suggest={r['suggest_mean_s']:.4f}s wall={r['wall_s']:.1f}s", flush=True)
    summary = summarise(runs)
    import pymoo
    import ray
    import sklearn

    report = {"benchmark": "bench_parego", "settings": vars(args),
              "problems": {p: asdict(PROBLEMS[p]) for p in args.problems},
              "summary": summary, "parego_suggest_latency": parego_latency(runs) if "parego" in args.methods else None,
              "runs": runs, "total_wall_s": time.perf_counter() - t0,
              "environment": {"python": platform.python_version(), "ray": ray.__version__,
                              "optuna": optuna.__version__, "pymoo": pymoo.__version__,
                              "scikit-learn": sklearn.__version__, "machine": platform.machine()}}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print_table(summary)
    if report["parego_suggest_latency"]:
        print(f"\nParEGO suggest latency: {report['parego_suggest_latency']}")
    print(f"total {report['total_wall_s']:.0f}s; wrote {out}")
    return report


if __name__ == "__main__":
    main()
