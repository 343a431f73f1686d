"""``NSGA2Search`` against Optuna and pymoo run the way their users run them, at equal evaluations.

Problems: pymoo's ZDT1, ZDT2, ZDT3 (2 objectives) and DTLZ2 (3 objectives) with ``--n-var``
variables on [0, 1] (the problem definitions of ``experiments/bench_nsga2.py``).  Every method
gets ``--evaluations`` evaluations; a run that would overshoot is cut to the first
``--evaluations`` points it evaluated.  Score: the hypervolume of every evaluated point
(``raytune_fed.metrics.hypervolume``, pymoo's HV) against a fixed reference point per problem
(ZDT (1.1, 10), DTLZ2 (3, 3, 3)).  Seeds are ``--first-seed`` (0) and the ``--seeds - 1`` after
it, passed to every method.

Methods (``P`` a population from the lists given):

* ``optuna_P``: ``optuna.create_study(directions=[...], sampler=NSGAIISampler(population_size=P,
  seed=seed))`` and ``study.optimize(objective, n_trials=evaluations)`` - sequential, one trial
  at a time; every other setting Optuna's default (uniform crossover p 0.9, swapping 0.5; a
  parameter redrawn uniformly with p 1/n).  ``--optuna-populations`` (default 50, Optuna's
  default, and 20, NSGA2Search's);
* ``pymoo_P``: ``pymoo.optimize.minimize(problem, NSGA2(pop_size=P), ("n_evals", evaluations),
  seed=seed)`` with pymoo's default operators (SBX p 0.9, eta 15; polynomial mutation p 1/n,
  eta 20; duplicates eliminated).  ``--pymoo-populations`` (default 100, pymoo's default, and 20);
* ``nsga2_direct``: the ask/tell core :class:`raytune_fed.algorithms.nsga2.NSGA2` with its
  defaults and ``--population``, a generation asked and told at a time;
  ``nsga2_direct_p09_eta20`` the same with the variation the defaults replaced (crossover
  probability 0.9, mutation index 20);
* ``nsga2search_tune``: :class:`raytune_fed.search.NSGA2Search` with its defaults through
  ``tune.Tuner`` (``num_samples = evaluations``, ``max_concurrent_trials = population``, actors
  reused) on a local Ray session; at ``--tune-seeds`` seeds (the first ones), Tune runs being the
  slow part.  Its hypervolume is compared with ``nsga2_direct``'s at the same seed.

Per problem: each method's mean, standard deviation and per-seed values; the best peer (the
Optuna or pymoo setting with the largest mean) and ``nsga2_direct``'s mean over it (``ratio``).

    python experiments/bench_nsga2_peers.py                       # 10 seeds, 200 evaluations, 30 variables
    python experiments/bench_nsga2_peers.py --tune-seeds 0        # peers and the core only
    python experiments/bench_nsga2_peers.py --first-seed 1000 --seeds 30 --tune-seeds 0 \
        --out experiments/measured/bench_nsga2_peers_seeds1000.json  # other seeds
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import _revisions
from bench_nsga2 import REFERENCES, Problem, run_tune

from raytune_fed.metrics import hypervolume

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

PROBLEMS = ("zdt1", "zdt2", "zdt3", "dtlz2")
OUT = Path(__file__).parent / "measured" / "bench_nsga2_peers.json"


def run_optuna(problem: Problem, population: int, evaluations: int, seed: int) -> np.ndarray:
    import optuna

    sampler = optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    study = optuna.create_study(directions=["minimize"] * problem.n_obj, sampler=sampler)

    def objective(trial: Any) -> tuple[float, ...]:
        x = [trial.suggest_float(name, 0.0, 1.0) for name in problem.names]
        return tuple(map(float, problem.evaluate([x])[0]))

    study.optimize(objective, n_trials=evaluations)
    return np.array([t.values for t in study.trials], dtype=float)


def run_pymoo(problem: Problem, population: int, evaluations: int, seed: int) -> np.ndarray:
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.core.problem import Problem as PymooProblem
    from pymoo.optimize import minimize

    evaluated: list[np.ndarray] = []

    class Recorded(PymooProblem):  # the test problem, keeping every point pymoo evaluates, in order
        def __init__(self) -> None:
            p = problem.pymoo
            super().__init__(n_var=p.n_var, n_obj=p.n_obj, xl=p.xl, xu=p.xu)

        def _evaluate(self, X: np.ndarray, out: dict, *args: Any, **kwargs: Any) -> None:
            out["F"] = problem.evaluate(X)
            evaluated.append(out["F"])

    minimize(Recorded(), NSGA2(pop_size=population), ("n_evals", evaluations), seed=seed)
    return np.vstack(evaluated)[:evaluations]


BEFORE = {"crossover_prob": 0.9, "mutation_eta": 20.0}  # the core's variation before crossover 1.0 and index 10


def run_core(problem: Problem, population: int, evaluations: int, seed: int, **variation: Any) -> np.ndarray:
    from raytune_fed.algorithms.nsga2 import NSGA2
    from raytune_fed.space import Float, SearchSpace

    space = SearchSpace(tuple(Float(name, 0.0, 1.0) for name in problem.names))
    core = NSGA2(space, problem.n_obj, seed=seed, population_size=population, **variation)
    while core.n_told < evaluations:  # the members in the order NSGA2Search hands them to Tune
        configs = core.ask(evaluations - core.n_told)
        core.tell(configs, problem.evaluate([problem.row(c) for c in configs]))
    return np.asarray(core.values, dtype=float)


def _dirty() -> bool:
    """Whether the checkout has uncommitted changes (the numbers then belong to them, not to the revision)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return True
    return bool(out.strip())


def summarise(runs: list[dict], seeds: list[int], methods: list[str], tune_seeds: list[int]) -> dict:
    out: dict = {}
    for problem in PROBLEMS:
        cell: dict = {}
        for method in methods:
            hv = {r["seed"]: r["hv"] for r in runs if (r["problem"], r["method"]) == (problem, method)}
            wanted = tune_seeds if method == "nsga2search_tune" else seeds
            if wanted and all(s in hv for s in wanted):
                values = np.array([hv[s] for s in wanted])
                cell[method] = {"seeds": wanted, "hv": values.tolist(), "mean": float(values.mean()),
                                "sd": float(values.std(ddof=1)) if len(values) > 1 else None}
        peers = {m: c["mean"] for m, c in cell.items() if m.startswith(("optuna_", "pymoo_"))}
        if peers and "nsga2_direct" in cell:
            best = max(peers, key=peers.get)
            cell["best_peer"] = best
            cell["ratio"] = cell["nsga2_direct"]["mean"] / peers[best]
            d = np.array(cell["nsga2_direct"]["hv"]) - np.array(cell[best]["hv"])
            cell["minus_best_peer"] = {"mean": float(d.mean()), "sd": float(d.std(ddof=1)),
                                       "wins": int((d > 0).sum()), "of": len(d)}
        if "nsga2search_tune" in cell and "nsga2_direct" in cell:
            direct = dict(zip(cell["nsga2_direct"]["seeds"], cell["nsga2_direct"]["hv"]))
            cell["tune_minus_direct"] = [t - direct[s] for s, t in zip(tune_seeds, cell["nsga2search_tune"]["hv"])]
        if cell:
            out[problem] = cell
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--tune-seeds", type=int, default=10, help="seeds (the first ones) run through tune.Tuner")
    ap.add_argument("--evaluations", type=int, default=200)
    ap.add_argument("--population", type=int, default=20, help="NSGA2Search's population")
    ap.add_argument("--optuna-populations", default="50,20")
    ap.add_argument("--pymoo-populations", default="100,20")
    ap.add_argument("--n-var", type=int, default=30)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--work", default="results/bench_nsga2_peers")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    if set(problems) - set(PROBLEMS) or not problems:
        ap.error(f"--problems takes some of {','.join(PROBLEMS)}, got {args.problems!r}")
    try:
        optuna_pops = [int(p) for p in args.optuna_populations.split(",") if p.strip()]
        pymoo_pops = [int(p) for p in args.pymoo_populations.split(",") if p.strip()]
    except ValueError:
        ap.error("--optuna-populations and --pymoo-populations take comma-separated integers")
    if args.seeds < 2 or args.first_seed < 0 or not 0 <= args.tune_seeds <= args.seeds or args.population < 2 \
            or args.evaluations < args.population or min(optuna_pops + pymoo_pops, default=0) < 2:
        ap.error("need --seeds >= 2, 0 <= --tune-seeds <= --seeds, populations >= 2, --evaluations >= --population")

    import optuna
    import pymoo
    import ray

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    with Benchmark("bench_nsga2_peers", args.out, argv) as bench:
        seeds = list(range(args.first_seed, args.first_seed + args.seeds))
        tune_seeds = seeds[:args.tune_seeds]
        peers = [f"optuna_{p}" for p in optuna_pops] + [f"pymoo_{p}" for p in pymoo_pops]
        methods = peers + ["nsga2_direct", "nsga2_direct_p09_eta20"] + (["nsga2search_tune"] if tune_seeds else [])
        out_path = Path(args.out)
        previous = figures_of(json.loads(out_path.read_text())) if out_path.exists() else {}
        settings = {k: getattr(args, k) for k in ("evaluations", "population", "n_var")}
        # rerunning with the same settings on the same code resumes; anything else starts afresh
        same = previous.get("settings") == settings and previous.get("revision") == _revisions.current()
        runs = previous.get("runs", []) if same else []
        command = "python experiments/bench_nsga2_peers.py" + "".join(f" {a}" for a in (sys.argv[1:] if argv is None
                                                                                       else argv))
        commands = (previous.get("commands", []) if same else []) + [command]  # the invocations that made the runs
        done = {(r["problem"], r["method"], r["seed"]) for r in runs}
        if tune_seeds:
            from raytune_fed.runtime import connect

            connect(None, args.num_cpus)
        report: dict = {}
        for name in problems:
            problem = Problem(name, args.n_var)
            # seed by seed, every method of a seed before the next: an interrupted run has paired seeds
            for seed in seeds:
                for method in methods:
                    if (name, method, seed) in done or (method == "nsga2search_tune" and seed not in tune_seeds):
                        continue
                    start = time.perf_counter()
                    if method.startswith("optuna_"):
                        F = run_optuna(problem, int(method.split("_")[1]), args.evaluations, seed)
                    elif method.startswith("pymoo_"):
                        F = run_pymoo(problem, int(method.split("_")[1]), args.evaluations, seed)
                    elif method.startswith("nsga2_direct"):
                        variation = BEFORE if method == "nsga2_direct_p09_eta20" else {}
                        F = run_core(problem, args.population, args.evaluations, seed, **variation)
                    else:
                        if args.evaluations % args.population:
                            ap.error("the Tune runs need --evaluations divisible by --population")
                        F = run_tune(problem, "nsga2search", args.population, args.evaluations // args.population,
                                     seed, Path(args.work).resolve())
                    if len(F) != args.evaluations:
                        raise RuntimeError(f"{method} on {name} seed {seed}: {len(F)} evaluations")
                    runs.append({"problem": name, "method": method, "seed": seed, "n_evals": len(F),
                                 "hv": hypervolume(F, problem.reference), "wall_s": time.perf_counter() - start})
                    print(f"{name} {method:17s} seed={seed} HV={runs[-1]['hv']:.4f} "
                          f"({runs[-1]['wall_s']:.1f} s)", flush=True)
                    report = {
                        "revision": _revisions.current(), "uncommitted_changes": _dirty(),
                        "commands": commands,
                        "settings": settings, "seeds": seeds, "tune_seeds": tune_seeds,
                        "references": {p: list(REFERENCES[p]) for p in PROBLEMS},
                        "peer_settings": {
                            **{f"optuna_{p}": f"study.optimize (sequential), NSGAIISampler(population_size={p}, "
                                              "seed=seed), Optuna's defaults otherwise" for p in optuna_pops},
                            **{f"pymoo_{p}": f"minimize(problem, NSGA2(pop_size={p}), ('n_evals', "
                                             f"{args.evaluations}), seed=seed), pymoo's default operators"
                               for p in pymoo_pops},
                            "nsga2_direct": f"NSGA2 core, defaults, population {args.population}, ask/tell",
                            "nsga2_direct_p09_eta20": f"NSGA2 core, population {args.population}, {BEFORE}",
                            "nsga2search_tune": f"NSGA2Search, defaults, population {args.population}, tune.Tuner "
                                                f"(max_concurrent_trials={args.population}, reuse_actors=True)"},
                        "summary": summarise(runs, seeds, methods, tune_seeds), "runs": runs,
                        "versions": {"ray": ray.__version__, "optuna": optuna.__version__,
                                     "pymoo": pymoo.__version__}}
                    out_path.parent.mkdir(parents=True, exist_ok=True)
                    out_path.write_text(json.dumps(report, indent=1))
        report = figures_of(json.loads(out_path.read_text()))  # this run's, or all resumed from the last
        bench.figures.update(report)
    for p, cell in report["summary"].items():
        line = "  ".join(f"{m} {c['mean']:.3f}±{c['sd']:.3f}" for m, c in cell.items()
                         if isinstance(c, dict) and "mean" in c and c["sd"] is not None)
        print(p, line, f"| best peer {cell.get('best_peer')} ratio {cell.get('ratio', float('nan')):.3f}")
    print(f"wrote {out_path}")
    return report


if __name__ == "__main__":
    main()
