"""Benchmark the Tune searchers: ``suggest`` latency, where it goes, and search quality.

Every searcher is driven *directly* through Ray Tune's Searcher API (``suggest`` then
``on_trial_complete``, one trial at a time, no Tuner and no Ray session), so the numbers
measure the algorithms, not Tune's scheduling.

``profile``
    ``ParEGOSearch`` (2 objectives, ZDT1) and ``GPSearch`` (a smooth 1-objective function)
    on ``d`` uniform variables, after ``n`` observations told with ``add_evaluated_point``:
    wall, process-CPU and thread-CPU seconds of ``suggest`` (medians over ``--repeats``
    consecutive suggests), the 1-minute load average around them (the machine may be
    shared: CPU time is the number that load does not inflate), and from one cProfile pass
    the share of ``suggest`` spent fitting the GP (``fit_gp``).
``quality``
    Multi-objective: ZDT1, ZDT2, ZDT3, DTLZ2 (2 objectives, 5 variables), hypervolume of all
    evaluated points against 1.1 x the true front's nadir (as a ratio to the true front's).
    Single-objective: Branin (2 variables) and Hartmann-6, the best value found (regret).
    Methods: ``parego`` / ``gp`` (package defaults), ``parego_v0`` / ``gp_v0`` (the GP
    settings before this benchmark: 2 hyperparameter restarts, 5 EI polishing starts,
    with this package's GP),
    Optuna's ``random``, ``nsga2`` (population = initial design), ``tpe`` and ``optuna_gp``
    (``GPSampler``, needs torch) through Ray's ``OptunaSearch``.  Every method starts from
    ``--n-initial`` space-filling/random points and has ``--n-evals`` evaluations.
``compare``
    Merges result files (their profile rows and runs) and pairs every ``label:method``
    with the first ``--reference`` run
    on the same problem and replicate (replicate seeds come from ``--root-seed``, so runs
    of different code are paired): mean and sd of the differences, wins/ties/losses.
``all``
    ``profile`` and ``quality`` of this checkout, the same for the code of ``--before``
    (a git revision, checked out into a temporary worktree and run in a subprocess with
    the label ``today``; only ``parego``/``gp`` exist there), and ``compare`` of it all
    against ``today:parego`` / ``today:gp``, in one JSON file.

``experiments/measured/bench_searchers.json`` is (``optuna_gp`` needs torch in the
environment, e.g. a scratch venv with ``pip install torch`` and ``pip install -e .[bench]``;
``41bffa9`` is the last commit before the searchers moved onto the ask/tell protocol)::

    python experiments/bench_searchers.py all --before 41bffa9 \\
        --methods parego parego_v0 gp gp_v0 tpe optuna_gp --out experiments/measured/bench_searchers.json

Single parts (each writes JSON under ``results/``)::

    python experiments/bench_searchers.py profile
    python experiments/bench_searchers.py quality --methods parego parego_v0 tpe optuna_gp
    python experiments/bench_searchers.py compare results/bench_searchers_*.json --reference today:parego
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import math
import os
import pstats
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

MULTI = ("parego", "parego_v0", "random", "nsga2", "tpe", "optuna_gp")
SINGLE = ("gp", "gp_v0", "random", "tpe", "optuna_gp")


# ------------------------------------------------------------------------- problems

def _branin(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return ((x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10)[:, None]


_H6_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
                  [17, 8, 0.05, 10, 0.1, 14]])
_H6_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                         [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def _hartmann6(X: np.ndarray) -> np.ndarray:
    inner = np.sum(_H6_A[None] * (X[:, None, :] - _H6_P[None]) ** 2, axis=2)
    return (-np.sum(_H6_ALPHA * np.exp(-inner), axis=1))[:, None]


@dataclass(frozen=True)
class Problem:
    """A test problem on a box; ``ref_point`` (multi) or ``optimum`` (single) scores a run."""

    name: str
    n_var: int
    low: tuple[float, ...]
    high: tuple[float, ...]
    ref_point: tuple[float, ...] = ()
    optimum: float | None = None

    @property
    def n_obj(self) -> int:
        return len(self.ref_point) if self.ref_point else 1

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        if self.name == "branin":
            return _branin(X)
        if self.name == "hartmann6":
            return _hartmann6(X)
        return self._pymoo().evaluate(X)

    def _pymoo(self):
        from pymoo.problems import get_problem

        extra = {"n_obj": 2} if self.name == "dtlz2" else {}
        return get_problem(self.name, n_var=self.n_var, **extra)

    def true_hv(self) -> float:
        return hypervolume(self._pymoo().pareto_front(), self.ref_point)


def _box(n: int, lo: float = 0.0, hi: float = 1.0) -> dict:
    return {"n_var": n, "low": (lo,) * n, "high": (hi,) * n}


PROBLEMS = {
    "zdt1": Problem("zdt1", ref_point=(1.1, 1.1), **_box(5)),
    "zdt2": Problem("zdt2", ref_point=(1.1, 1.1), **_box(5)),
    "zdt3": Problem("zdt3", ref_point=(round(1.1 * 0.85183, 4), 1.1), **_box(5)),
    "dtlz2": Problem("dtlz2", ref_point=(1.1, 1.1), **_box(5)),
    "branin": Problem("branin", 2, (-5.0, 0.0), (10.0, 15.0), optimum=0.397887),
    "hartmann6": Problem("hartmann6", optimum=-3.32237, **_box(6)),
}


def hypervolume(F: np.ndarray, ref_point) -> float:
    from pymoo.indicators.hv import HV

    F = np.asarray(F)[np.all(np.asarray(F) < np.asarray(ref_point), axis=1)]
    return float(HV(ref_point=np.asarray(ref_point))(F)) if len(F) else 0.0


# ------------------------------------------------------------------------- searchers

def make_searcher(method: str, space: dict, n_obj: int, n_initial: int, seed: int):
    """A Tune searcher for ``method``; ``*_v0`` need this package's GPSettings."""
    metric = [f"f{i + 1}" for i in range(n_obj)] if n_obj > 1 else "f1"
    mode = ["min"] * n_obj if n_obj > 1 else "min"
    base, _, variant = method.partition("@")
    if base in ("parego", "parego_v0", "gp", "gp_v0"):
        from raytune_fed.search import GPSearch, ParEGOSearch

        cls = ParEGOSearch if base.startswith("parego") else GPSearch
        extra = {}
        settings = dict(n_restarts=2, n_starts=5) if base.endswith("_v0") else {}
        settings.update((k, type_of(v)) for k, v in (kv.split("=") for kv in variant.split(",") if kv))
        if settings:  # on top of the searcher's own default settings
            from raytune_fed.algorithms import GP_BO_SETTINGS, GPSettings

            default = GP_BO_SETTINGS if cls is GPSearch else GPSettings()
            extra["gp"] = GPSettings(**{**default.to_dict(), **settings})
        return cls(space, metric=metric, mode=mode, n_initial_points=n_initial, seed=seed, **extra)
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    samplers: dict[str, Callable[[], optuna.samplers.BaseSampler]] = {
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(population_size=n_initial, seed=seed),
        "tpe": lambda: optuna.samplers.TPESampler(n_startup_trials=n_initial, seed=seed),
        "optuna_gp": lambda: optuna.samplers.GPSampler(n_startup_trials=n_initial, seed=seed),
    }
    if method not in samplers:
        raise SystemExit(f"unknown method {method!r}; known: {sorted(set(MULTI) | set(SINGLE))}")
    return OptunaSearch(space, metric=metric, mode=mode, sampler=samplers[method]())


def type_of(text: str):
    """A GP setting from ``method@key=value`` (ints, floats, True/False)."""
    if text in ("True", "False"):
        return text == "True"
    return float(text) if "." in text or "e" in text else int(text)


def tune_space(problem: Problem) -> dict:
    from ray import tune

    return {f"x{i}": tune.uniform(lo, hi) for i, (lo, hi) in enumerate(zip(problem.low, problem.high))}


def drive(searcher, problem: Problem, n_evals: int, prefix: str = "t") -> tuple[np.ndarray, list, list]:
    """Run ``n_evals`` trials; returns objective rows and per-suggest wall / CPU seconds."""
    names = [f"x{i}" for i in range(problem.n_var)]
    F, wall, cpu = [], [], []
    for t in range(n_evals):
        tid = f"{prefix}{t}"
        w0, c0 = time.perf_counter(), time.process_time()
        config = searcher.suggest(tid)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        f = problem.evaluate(np.array([[config[n] for n in names]]))[0]
        F.append([float(v) for v in f])
        searcher.on_trial_complete(tid, {f"f{i + 1}": v for i, v in enumerate(F[-1])})
    return np.asarray(F), wall, cpu


# ------------------------------------------------------------------------- quality

def _save_partial(args, key: str, rows: list) -> None:
    """Write what has finished so far (``"partial": true``), so a stopped run keeps it."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": f"bench_searchers {args.command}", "partial": True,
                               "settings": vars(args), key: rows}, indent=2, default=str))


def run_quality(args) -> dict:
    seeds = np.random.SeedSequence(args.root_seed).spawn(args.seeds)
    runs = []
    for pname in args.problems:
        problem = PROBLEMS[pname]
        methods = [m for m in args.methods if m.partition("@")[0] in (MULTI if problem.n_obj > 1 else SINGLE)]
        true_hv = problem.true_hv() if problem.n_obj > 1 else None
        for r in range(args.seeds):
            seed = int(seeds[r].generate_state(1)[0] % 2 ** 31)
            for method in methods:
                searcher = make_searcher(method, tune_space(problem), problem.n_obj, args.n_initial, seed)
                start = time.perf_counter()
                F, wall, cpu = drive(searcher, problem, args.n_evals)
                row = {"label": args.label, "problem": pname, "method": method, "replicate": r, "seed": seed,
                       "suggest_mean_s": float(np.mean(wall)), "suggest_p95_s": float(np.quantile(wall, 0.95)),
                       "suggest_model_mean_s": float(np.mean(wall[args.n_initial:])),
                       "suggest_model_cpu_mean_s": float(np.mean(cpu[args.n_initial:])),
                       "wall_s": time.perf_counter() - start, "load_avg_1m": os.getloadavg()[0]}
                if true_hv is not None:
                    hv = hypervolume(F, problem.ref_point)
                    row.update(score=hv, hv=hv, hv_ratio=hv / true_hv)
                else:
                    best = float(F[:, 0].min())
                    row.update(score=-best, best=best, log10_regret=math.log10(max(best - problem.optimum, 1e-12)))
                runs.append(row)
                _save_partial(args, "runs", runs)
                print(f"{pname:9s} {method:9s} r{r} score={row['score']:.4f} "
                      f"suggest(model)={row['suggest_model_mean_s'] * 1e3:.1f}ms", flush=True)
    return {"runs": runs, "summary": summarise(runs)}


def summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for key in sorted({(r["problem"], r["label"], r["method"]) for r in runs}):
        rs = [r for r in runs if (r["problem"], r["label"], r["method"]) == key]
        s = {"n_runs": len(rs), "score_mean": float(np.mean([r["score"] for r in rs])),
             "score_sd": float(np.std([r["score"] for r in rs], ddof=1)) if len(rs) > 1 else 0.0,
             "suggest_model_mean_s": float(np.mean([r["suggest_model_mean_s"] for r in rs])),
             "suggest_model_cpu_mean_s": float(np.mean([r["suggest_model_cpu_mean_s"] for r in rs])),
             "suggest_p95_s": float(np.median([r["suggest_p95_s"] for r in rs]))}
        if "hv_ratio" in rs[0]:
            s["hv_ratio_mean"] = float(np.mean([r["hv_ratio"] for r in rs]))
        else:
            s["log10_regret_mean"] = float(np.mean([r["log10_regret"] for r in rs]))
        out.setdefault(key[0], {})[f"{key[1]}:{key[2]}"] = s
    return out


def compare(runs: list[dict], references: list[str]) -> dict:
    """Paired differences of every label:method against the first of ``references`` that ran
    on the same problem (same replicate)."""
    ref: dict = {}
    for reference in references:
        ref_label, ref_method = reference.split(":")
        for r in runs:
            if r["label"] == ref_label and r["method"] == ref_method:
                ref.setdefault(r["problem"], (reference, {}))
                if ref[r["problem"]][0] == reference:
                    ref[r["problem"]][1][r["replicate"]] = r["score"]
    out: dict = {}
    for key in sorted({(r["problem"], r["label"], r["method"]) for r in runs}):
        if key[0] not in ref or f"{key[1]}:{key[2]}" == ref[key[0]][0]:
            continue
        scores = ref[key[0]][1]
        d = np.asarray([r["score"] - scores[r["replicate"]] for r in runs
                        if (r["problem"], r["label"], r["method"]) == key and r["replicate"] in scores])
        if not len(d):
            continue
        out.setdefault(key[0], {})[f"{key[1]}:{key[2]}"] = {
            "reference": ref[key[0]][0], "n_pairs": len(d), "mean_diff": float(d.mean()),
            "sd_diff": float(d.std(ddof=1)) if len(d) > 1 else 0.0,
            "wins": int((d > 1e-12).sum()), "ties": int((np.abs(d) <= 1e-12).sum()), "losses": int((d < -1e-12).sum())}
    return out


def print_paired(paired: dict) -> None:
    for problem, rows in paired.items():
        for who, s in rows.items():
            print(f"{problem:9s} {who:22s} {s['mean_diff']:+.4f} ± {s['sd_diff']:.4f} vs {s['reference']} "
                  f"(wins/ties/losses {s['wins']}/{s['ties']}/{s['losses']})")


# ------------------------------------------------------------------------- before

def run_before(revision: str, args) -> tuple[list, list]:
    """Profile rows and quality runs of ``revision``'s parego/gp, labelled ``today``."""
    from _revisions import checkout, run_script

    common = ["--label", "today", "--root-seed", str(args.root_seed)]
    outputs = {}
    with checkout(revision) as tree:
        for command, extra in (("profile", ["--searchers", "parego", "gp", "--dims", *map(str, args.dims),
                                             "--n-obs", *map(str, args.n_obs), "--repeats", str(args.repeats)]),
                               ("quality", ["--methods", "parego", "gp", "--seeds", str(args.seeds),
                                            "--n-evals", str(args.n_evals), "--n-initial", str(args.n_initial),
                                            "--problems", *args.problems])):
            outputs[command] = figures_of(run_script(tree, __file__, [command, *common, *extra]))
    return outputs["profile"]["profile"], outputs["quality"]["runs"]


# ------------------------------------------------------------------------- profile

def _smooth(X: np.ndarray) -> np.ndarray:
    return (np.sum((X - 0.3) ** 2, axis=1) + 0.1 * np.sum(np.sin(10 * X), axis=1))[:, None]


def run_profile(args) -> dict:
    from ray import tune

    rows = []
    for kind in args.searchers:
        for d in args.dims:
            space = {f"x{i}": tune.uniform(0.0, 1.0) for i in range(d)}
            multi = kind.startswith("parego")
            for n in args.n_obs:
                rng = np.random.default_rng(args.root_seed + 1000 * d + n)
                X = rng.random((n, d))
                if multi:
                    from pymoo.problems import get_problem

                    F = get_problem("zdt1", n_var=d).evaluate(X)
                    evaluate = get_problem("zdt1", n_var=d).evaluate
                else:
                    F, evaluate = _smooth(X), _smooth
                row = {"label": args.label, "searcher": kind, "dim": d, "n_obs": n, "load_avg_1m": os.getloadavg()[0]}
                for phase in ("timed", "profiled"):
                    searcher = make_searcher(kind, space, F.shape[1], 20, args.root_seed)
                    names = [f"x{i}" for i in range(d)]
                    for x, f in zip(X, F):
                        value = [float(v) for v in f] if multi else float(f[0])
                        searcher.add_evaluated_point(dict(zip(names, map(float, x))), value)
                    prof = cProfile.Profile() if phase == "profiled" else None
                    wall, cpu, thread = [], [], []
                    for t in range(args.repeats):
                        w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
                        if prof:
                            prof.enable()
                        config = searcher.suggest(f"p{t}")
                        if prof:
                            prof.disable()
                        wall.append(time.perf_counter() - w0)
                        cpu.append(time.process_time() - c0)
                        thread.append(time.thread_time() - t0)
                        f = evaluate(np.array([[config[k] for k in names]]))[0]
                        searcher.on_trial_complete(f"p{t}", {f"f{i + 1}": float(v) for i, v in enumerate(f)})
                    if prof:
                        row["shares"] = _shares(prof)
                    else:
                        row.update(suggest_median_s=float(np.median(wall)), suggest_mean_s=float(np.mean(wall)),
                                   suggest_cpu_median_s=float(np.median(cpu)),
                                   suggest_thread_median_s=float(np.median(thread)),
                                   load_avg_1m_after=os.getloadavg()[0])
                rows.append(row)
                _save_partial(args, "profile", rows)
                print(f"{args.label:6s} {kind:9s} d={d:2d} n={n:3d} suggest median {row['suggest_median_s'] * 1e3:7.1f} ms "
                      f"(cpu {row['suggest_cpu_median_s'] * 1e3:7.1f} ms, load {row['load_avg_1m']:.1f}), GP fit "
                      f"{100 * row['shares'].get('fit_gp', 0):.0f} %", flush=True)
    return {"profile": rows}


def _shares(prof: cProfile.Profile) -> dict:
    """Cumulative time of the GP fit and the EI proposal as shares of ``suggest``."""
    stats = pstats.Stats(prof).stats
    cum: dict[str, float] = {}
    for (_, _, name), (_, _, _, ct, _) in stats.items():
        if name in ("suggest", "fit_gp", "propose_ei"):
            cum[name] = max(cum.get(name, 0.0), ct)
    total = cum.get("suggest", 0.0) or 1.0
    return {k: v / total for k, v in cum.items() if k != "suggest"}


# ------------------------------------------------------------------------- main

def _environment() -> dict:
    import importlib

    env: dict = {}
    for mod in ("numpy", "scipy", "sklearn", "ray", "optuna", "pymoo", "torch", "raytune_fed"):
        try:
            m = importlib.import_module(mod)
            env[mod] = getattr(m, "__version__", "?")
            if mod == "raytune_fed":
                env["raytune_fed_path"] = str(Path(m.__file__).parent.parent.name)
        except ImportError:
            env[mod] = None
    return env


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("profile", "quality", "all"):
        p = sub.add_parser(name)
        p.add_argument("--label", default="new", help="names this code version in the output (default new)")
        p.add_argument("--root-seed", type=int, default=2024)
        p.add_argument("--out", default=f"results/bench_searchers_{name}.json")
    for p in (sub.choices["profile"], sub.choices["all"]):
        p.add_argument("--searchers", nargs="+", default=["parego", "gp"],
                       choices=["parego", "gp", "parego_v0", "gp_v0"])
        p.add_argument("--dims", nargs="+", type=int, default=[2, 6, 10])
        p.add_argument("--n-obs", nargs="+", type=int, default=[20, 60, 120, 200])
        p.add_argument("--repeats", type=int, default=5)
    for p in (sub.choices["quality"], sub.choices["all"]):
        p.add_argument("--seeds", type=int, default=5)
        p.add_argument("--n-evals", type=int, default=60)
        p.add_argument("--n-initial", type=int, default=20)
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
        p.add_argument("--methods", nargs="+", default=list(dict.fromkeys(MULTI + SINGLE)))
    sub.choices["all"].add_argument("--before", help="git revision whose parego/gp to measure as 'today'")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("files", nargs="+")
    cmp_.add_argument("--out", default="results/bench_searchers_compare.json")
    for p in (cmp_, sub.choices["all"]):
        p.add_argument("--reference", nargs="+", default=["today:parego", "today:gp"],
                       help="label:method the others are paired with (the first that ran on a problem)")
    args = ap.parse_args(argv)

    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    try:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
    except ImportError:
        pass
    out = Path(args.out)
    with Benchmark(f"bench_searchers_{args.command}", out, argv) as bench:
        if args.command == "compare":
            parts = [figures_of(json.loads(Path(f).read_text())) for f in args.files]
            runs = [r for part in parts for r in part.get("runs", [])]
            report = {"benchmark": "bench_searchers compare", "inputs": [Path(f).name for f in args.files],
                      "reference": args.reference,
                      "profile": [row for part in parts for row in part.get("profile", [])], "runs": runs,
                      "summary": summarise(runs), "paired": compare(runs, args.reference),
                      "environments": [part.get("environment") for part in parts]}
            print_paired(report["paired"])
        elif args.command == "all":
            profile = run_profile(args)["profile"]
            runs = run_quality(args)["runs"]
            if args.before:
                before_profile, before_runs = run_before(args.before, args)
                profile, runs = before_profile + profile, before_runs + runs
            report = {"benchmark": "bench_searchers all", "settings": vars(args), "profile": profile, "runs": runs,
                      "summary": summarise(runs), "paired": compare(runs, args.reference),
                      "environment": _environment()}
            print_paired(report["paired"])
        else:
            body = run_profile(args) if args.command == "profile" else run_quality(args)
            report = {"benchmark": f"bench_searchers {args.command}", "settings": vars(args), **body,
                      "environment": _environment()}
        bench.figures.update(report)
    print(f"wrote {out}")
    return report


if __name__ == "__main__":
    main()
