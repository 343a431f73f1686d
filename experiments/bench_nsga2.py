"""Benchmark ``NSGA2Search`` against Optuna's ``NSGAIISampler`` and pymoo's NSGA-II at equal budget.

Each searcher is driven a generation at a time or through ``tune.Tuner``; the comparison with
the peers run as their users run them (``study.optimize``, ``minimize``) is
``experiments/bench_nsga2_peers.py``.

Problems: pymoo's ZDT1, ZDT2, ZDT3 (2 objectives) and DTLZ2 (3 objectives) with ``--n-var``
variables on [0, 1], and ``cmosb``: the CMOSB paper's six-parameter space (Table III,
three integers, three reals) with a surrogate of its three objectives, one random forest
per objective fit on the real evaluations in ``measured/cmosb_space_sample_synthetic1.json`` (from a one-off
script, in git history)
(objectives min-max scaled over that sample).  Every method gets ``--population`` x
``--generations`` evaluations.

Methods:

* ``nsga2search``: :class:`raytune_fed.search.NSGA2Search` with its defaults (the stored
  ``bench_nsga2_direct.json`` and ``bench_nsga2_tune.json`` were made with the defaults before
  crossover probability 1.0 and mutation index 10: 0.9 and 20);
* ``nsga2search_paper``: NSGA2Search with the CMOSB paper's variation (SBX p 0.9, eta 2;
  polynomial mutation p 0.1 per variable, eta 20), which the CMOSB workflow uses;
* ``optuna_nsga2``: Ray's ``OptunaSearch`` around ``NSGAIISampler(population_size=...)``
  with Optuna's defaults (uniform crossover p 0.9, a parameter redrawn with p 1/n);
* ``pymoo_nsga2``: pymoo's ``NSGA2(pop_size=...)`` with pymoo's defaults (SBX p 0.9, eta 15;
  polynomial mutation p 1/n, eta 20) through its own ask/tell.

Modes: ``direct`` drives each Tune searcher through the Searcher API by hand, a generation
at a time (``population`` suggestions, then their results; pymoo through ask/tell);
``tune`` runs ``tune.Tuner`` with ``num_samples = population x generations`` and
``max_concurrent_trials = population`` (actors reused) on a local Ray session, so trials finish in
whatever order they do (pymoo has no Tune searcher and runs only directly).

Score: the hypervolume of every evaluated point against the stated reference point
(ZDT (1.1, 10), DTLZ2 (3, 3, 3), cmosb (1, 1, 1) on the scaled objectives); per problem
and mode each method's mean and standard deviation over the seeds, and the paired
difference to Optuna's with its t statistic (``behind`` when t < -2).

    python experiments/bench_nsga2.py                          # 10 seeds, 20 x 10, 30 variables
    python experiments/bench_nsga2.py --modes direct --generations 50
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.metrics import hypervolume
from raytune_fed.random import seed_int, spawn
from raytune_fed.workflows.cmosb._methods import PAPER_VARIATION

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

PROBLEMS = ("zdt1", "zdt2", "zdt3", "dtlz2", "cmosb")
METHODS = ("nsga2search", "nsga2search_paper", "optuna_nsga2", "pymoo_nsga2")
TUNE_METHODS = ("nsga2search", "optuna_nsga2")
SAMPLE = Path(__file__).parent / "measured" / "cmosb_space_sample_synthetic1.json"
REFERENCES = {"zdt1": (1.1, 10.0), "zdt2": (1.1, 10.0), "zdt3": (1.1, 10.0), "dtlz2": (3.0, 3.0, 3.0),
              "cmosb": (1.0, 1.0, 1.0)}


class Problem:
    """A test problem: Tune domains, a vectorised objective, the hypervolume reference point."""

    def __init__(self, name: str, n_var: int, sample: Path = SAMPLE) -> None:
        from ray import tune

        self.name = name
        if name == "cmosb":
            from sklearn.ensemble import RandomForestRegressor

            from raytune_fed.workflows.cmosb import OBJECTIVES, PARAMETERS, search_space
            from raytune_fed.workflows.cmosb._methods import tune_domains

            data = json.loads(sample.read_text())
            X = np.array([[r[p] for p in PARAMETERS] for r in data["rows"]], dtype=float)
            Y = np.array([[r[o] for o in OBJECTIVES] for r in data["rows"]], dtype=float)
            self.low, self.span = Y.min(axis=0), np.ptp(Y, axis=0)
            self.forests = [RandomForestRegressor(n_estimators=100, min_samples_leaf=2, random_state=0)
                            .fit(X, (Y[:, j] - self.low[j]) / self.span[j]) for j in range(Y.shape[1])]
            self.names, self.domains = list(PARAMETERS), tune_domains(search_space(binary=True))
            self.space = search_space(binary=True)
            self.n_obj = 3
            self.sample = {"file": str(sample.relative_to(Path(__file__).parent.parent)), "n": len(X),
                           "command": data["command"]}
        else:
            from pymoo.problems import get_problem

            self.pymoo = get_problem(name, n_var=n_var) if name.startswith("zdt") \
                else get_problem(name, n_var=n_var, n_obj=3)
            self.names = [f"x{i:02d}" for i in range(n_var)]
            self.domains = {n: tune.uniform(0.0, 1.0) for n in self.names}
            self.n_obj = self.pymoo.n_obj
        self.reference = REFERENCES[name]
        self.metrics = [f"f{j}" for j in range(self.n_obj)]

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if self.name == "cmosb":
            return np.column_stack([f.predict(X) for f in self.forests])
        return np.asarray(self.pymoo.evaluate(X), dtype=float)

    def row(self, config: dict) -> list[float]:
        return [float(config[n]) for n in self.names]


def make_searcher(method: str, problem: Problem, population: int, seed: int, *, with_space: bool):
    """The Tune searcher of ``method`` (``with_space=False``: the Tuner's ``param_space`` gives the space)."""
    mins = ["min"] * problem.n_obj
    space = problem.domains if with_space else None
    if method.startswith("nsga2search"):
        from raytune_fed.search import NSGA2Search

        variation = PAPER_VARIATION if method == "nsga2search_paper" else {}
        return NSGA2Search(space, problem.metrics, mins, seed=seed, population_size=population, **variation)
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    sampler = optuna.samplers.NSGAIISampler(population_size=population, seed=seed)
    space = None if space is None else OptunaSearch.convert_search_space(space)
    return OptunaSearch(space, metric=problem.metrics, mode=mins, sampler=sampler)


def _round_integers(n_integers: int):
    from pymoo.core.repair import Repair

    class RoundIntegers(Repair):  # pymoo's documented way to keep integer variables integer
        def _do(self, problem: Any, X: np.ndarray, **kwargs: Any) -> np.ndarray:
            X = np.asarray(X, dtype=float).copy()
            X[:, :n_integers] = np.rint(X[:, :n_integers])
            return X

    return RoundIntegers()


def run_direct(problem: Problem, method: str, population: int, generations: int, seed: int) -> np.ndarray:
    if method == "pymoo_nsga2":
        from pymoo.algorithms.moo.nsga2 import NSGA2
        from pymoo.core.problem import Problem as PymooProblem

        if problem.name == "cmosb":  # the three integer parameters come first
            lo = np.array([p.low for p in problem.space.params], dtype=float)
            hi = np.array([p.high for p in problem.space.params], dtype=float)
            algorithm = NSGA2(pop_size=population, repair=_round_integers(3))
        else:
            lo, hi = problem.pymoo.xl, problem.pymoo.xu
            algorithm = NSGA2(pop_size=population)
        algorithm.setup(PymooProblem(n_var=len(lo), n_obj=problem.n_obj, xl=lo, xu=hi), seed=seed)
        F = []
        for _ in range(generations):
            pop = algorithm.ask()
            values = problem.evaluate(pop.get("X"))
            pop.set("F", values)
            algorithm.tell(infills=pop)
            F.append(values)
        return np.vstack(F)
    searcher = make_searcher(method, problem, population, seed, with_space=True)
    searcher.set_max_concurrency(population)
    F = []
    for g in range(generations):
        ids = [f"g{g}_{i}" for i in range(population)]
        configs = [searcher.suggest(t) for t in ids]
        if any(not isinstance(c, dict) for c in configs):
            raise RuntimeError(f"{method} did not propose a whole generation: {configs}")
        values = problem.evaluate([problem.row(c) for c in configs])
        for t, f in zip(ids, values):
            searcher.on_trial_complete(t, dict(zip(problem.metrics, map(float, f))))
        F.append(values)
    return np.vstack(F)


def _trainable(config: dict, problem: Problem) -> dict:
    return dict(zip(problem.metrics, map(float, problem.evaluate([problem.row(config)])[0])))


def run_tune(problem: Problem, method: str, population: int, generations: int, seed: int, storage: Path) -> np.ndarray:
    from ray import tune

    searcher = make_searcher(method, problem, population, seed, with_space=False)
    tuner = tune.Tuner(tune.with_resources(tune.with_parameters(_trainable, problem=problem), {"cpu": 0.25}),
                       param_space=problem.domains,
                       tune_config=tune.TuneConfig(search_alg=searcher, num_samples=population * generations,
                                                   max_concurrent_trials=population, reuse_actors=True),
                       run_config=tune.RunConfig(storage_path=str(storage), name=f"{problem.name}_{method}_{seed}",
                                                 verbose=0))
    results = tuner.fit()
    if results.errors or len(results) != population * generations:
        raise RuntimeError(f"{method} on {problem.name}: {len(results)} trials, {len(results.errors)} errors")
    return np.array([[r.metrics[m] for m in problem.metrics] for r in results], dtype=float)


def optuna_generations(work: Path, runs: list[dict]) -> dict:
    """How NSGAIISampler spread each Tune run's trials over its generations, from the run's own searcher state.

    Optuna's sampler assigns a trial to the generation after the last one with ``population_size`` finished
    trials, so a trial asked while others of its generation still run joins that generation: under Tune's
    concurrency a generation holds more trials than a population, and the first one is all random draws.
    """
    import pickle
    from collections import Counter

    out: dict = {}
    for r in runs:
        if (r["mode"], r["method"]) != ("tune", "optuna_nsga2"):
            continue
        states = sorted((work / f"{r['problem']}_optuna_nsga2_{r['seed']}").glob("searcher-state-*.pkl"))
        if not states:
            continue
        with open(states[-1], "rb") as f:
            study = pickle.load(f)["_ot_study"]
        counts = Counter(t.system_attrs.get("NSGAIISampler:generation") for t in study.get_trials(deepcopy=False))
        cell = out.setdefault(r["problem"], {"seeds": [], "generation0_trials": [], "last_generation": []})
        cell["seeds"].append(r["seed"])
        cell["generation0_trials"].append(counts.get(0, 0))
        cell["last_generation"].append(max(g for g in counts if g is not None))
    return out


def summarise(runs: list[dict], seeds: list[int]) -> dict:
    out: dict = {}
    for problem in PROBLEMS:
        for mode in ("direct", "tune"):
            cell: dict = {}
            for method in METHODS:
                hv = {r["seed"]: r["hv"] for r in runs if (r["problem"], r["mode"], r["method"]) == (problem, mode,
                                                                                                   method)}
                if len(hv) == len(seeds):
                    values = np.array([hv[s] for s in seeds])
                    cell[method] = {"hv_mean": float(values.mean()), "hv_std": float(values.std(ddof=1)),
                                    "hv": values.tolist()}
            if "optuna_nsga2" in cell:
                ref = np.array(cell["optuna_nsga2"]["hv"])
                for method, c in cell.items():
                    if method != "optuna_nsga2":
                        d = np.array(c["hv"]) - ref
                        t = float(d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))) if d.std(ddof=1) > 0 else 0.0
                        c["minus_optuna"] = {"mean": float(d.mean()), "std": float(d.std(ddof=1)), "t": t,
                                             "verdict": "behind" if t < -2 else "ahead" if t > 2 else "even"}
            if cell:
                out.setdefault(problem, {})[mode] = cell
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--root-seed", type=int, default=2024)
    ap.add_argument("--population", type=int, default=20)
    ap.add_argument("--generations", type=int, default=10)
    ap.add_argument("--n-var", type=int, default=30)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--modes", default="direct,tune")
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--work", default="results/bench_nsga2")
    ap.add_argument("--out", default="results/bench_nsga2.json")
    args = ap.parse_args(argv)
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if set(problems) - set(PROBLEMS) or not problems:
        ap.error(f"--problems takes some of {','.join(PROBLEMS)}, got {args.problems!r}")
    if set(modes) - {"direct", "tune"} or not modes:
        ap.error(f"--modes takes direct and/or tune, got {args.modes!r}")
    if args.seeds < 2 or args.population < 2 or args.generations < 1 or args.n_var < 2 or args.num_cpus < 1:
        ap.error("need --seeds >= 2, --population >= 2, --generations >= 1, --n-var >= 2, --num-cpus >= 1")

    import optuna
    import pymoo
    import ray

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    with Benchmark("bench_nsga2", args.out, argv) as bench:
        seeds = [seed_int(s) for s in spawn(args.root_seed, args.seeds)]
        out_path = Path(args.out)
        previous = figures_of(json.loads(out_path.read_text())) if out_path.exists() else {}
        # what the numbers depend on (not where they are kept: the same run resumes from another path to its files)
        settings = {k: v for k, v in vars(args).items() if k not in ("problems", "modes", "work", "out")}
        same = {k: v for k, v in previous.get("settings", {}).items() if k not in ("work", "out")} == settings
        runs = previous.get("runs", []) if same else []  # rerunning the same command resumes
        done = {(r["problem"], r["mode"], r["method"], r["seed"]) for r in runs}
        if "tune" in modes:
            from raytune_fed.runtime import connect

            connect(None, args.num_cpus)
        for name in problems:
            problem = Problem(name, args.n_var)
            for mode in modes:
                # seed by seed, every method of a seed before the next: an interrupted run has paired seeds
                for seed, method in ((s, m) for s in seeds for m in (METHODS if mode == "direct" else TUNE_METHODS)):
                    if (name, mode, method, seed) in done:
                        continue
                    start = time.perf_counter()
                    F = run_direct(problem, method, args.population, args.generations, seed) if mode == "direct" \
                        else run_tune(problem, method, args.population, args.generations, seed,
                                      Path(args.work).resolve())
                    runs.append({"problem": name, "mode": mode, "method": method, "seed": seed, "n_evals": len(F),
                                 "hv": hypervolume(F, problem.reference), "wall_s": time.perf_counter() - start})
                    print(f"{name} {mode:6s} {method:17s} seed={seed:<10d} HV={runs[-1]['hv']:.4f}", flush=True)
                    report = {"benchmark": "bench_nsga2",
                              "settings": settings,
                              "population": args.population, "generations": args.generations,
                              "evaluations": args.population * args.generations,
                              "references": {p: list(r) for p, r in REFERENCES.items()},
                              "paper_variation": PAPER_VARIATION, "seeds": seeds,
                              "summary": summarise(runs, seeds), "runs": runs,
                              "versions": {"ray": ray.__version__, "optuna": optuna.__version__,
                                           "pymoo": pymoo.__version__}}
                    if name == "cmosb":
                        report["cmosb_surrogate"] = problem.sample
                    out_path.parent.mkdir(parents=True, exist_ok=True)
                    out_path.write_text(json.dumps(report, indent=1))
        report = figures_of(json.loads(out_path.read_text()))  # this run's, or all resumed from the last
        if "tune" in modes:
            report["optuna_tune_generations"] = optuna_generations(Path(args.work), report["runs"])
        bench.figures.update(report)
    if "tune" in modes:
        for p, g in report["optuna_tune_generations"].items():
            print(f"{p} tune   optuna_nsga2: trials in generation 0 per seed {g['generation0_trials']}, "
                  f"last generation reached {g['last_generation']}")
    for p, modes_ in report["summary"].items():
        for mode, cell in modes_.items():
            print(p, mode, "  ".join(f"{m} {c['hv_mean']:.3f}±{c['hv_std']:.3f}"
                                    + (f" ({c['minus_optuna']['verdict']})" if "minus_optuna" in c else "")
                                    for m, c in cell.items()))
    print(f"wrote {out_path}")
    return report


if __name__ == "__main__":
    main()
