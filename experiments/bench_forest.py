"""The RFMS forest and the fold cache, measured.

Forest: the package's ``ProbabilityForest`` (ranger's probability forest, numba) against
scikit-learn's ``RandomForestClassifier`` with the registry's former mapping, on
configurations drawn from the paper's space (Latin hypercube over num_trees 100..5000,
min_node_size 1..50, sample_fraction 0.1..1), 10-fold CV with the same folds for both,
on three data sets at the paper's scale: ``geo5_sim`` site GSE16446_sim (114 x 1,000),
``gse6861_subset`` (128 x 1,000) and a stratified 120-row sample of
``gina_agnostic_subset`` (120 x 970).  Per configuration: CV error of each, CPU seconds
per CV, seconds per tree; per data set: the least-squares line seconds = a + b * trees
(b is the marginal cost of a tree in a 10-fold CV).

Fold cache: milliseconds per 10-fold CV through the pipeline and with a ``CVPlan``
(folds and per-fold preprocessing computed once) for the elastic net and the SVM over
configurations of their spaces, plus the one-off cost of the plan; every cached CV error
is checked to equal the uncached one.

Projection: the issue's full grid (20 pairs x 10 replications x 3 learners) took 633
CPU-hours with scikit-learn's forest, 98.9 % of it in forests; the forest part scales by
the measured per-tree cost ratio (our b / scikit-learn's b, averaged over data sets) and
the rest by the fold cache's saving.

Run from the repository root::

    .venv/bin/python experiments/bench_forest.py                   # paper's space, ~1 h on a quiet core
    .venv/bin/python experiments/bench_forest.py --max-trees 500   # same configurations, trees capped
    .venv/bin/python experiments/bench_forest.py --quick           # smoke run

Writes ``results/bench_forest.json`` (or ``--out``) and prints a summary.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from raytune_fed.data import load_dataset  # noqa: E402
from raytune_fed.models import LEARNERS, CVPlan, Learner, cross_validate  # noqa: E402
from raytune_fed.models import warm_up as elastic_net_warm_up  # noqa: E402
from raytune_fed.models._forest import warm_up as forest_warm_up  # noqa: E402
from raytune_fed.models._registry import _sklearn_forest_steps  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

# The grid figures with scikit-learn's forest (CPU-hours, forest share).
GRID_CPU_HOURS_SKLEARN = 633.0
GRID_FOREST_SHARE = 0.989
N_UNITS = {"pairs": 20, "replications": 10, "learners": 3}

SKLEARN_FOREST = Learner("random_forest_sklearn", LEARNERS["random_forest"].space, _sklearn_forest_steps)


def cpu_seconds(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def datasets(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    geo = load_dataset("geo5_sim")
    site = geo.sites == geo.site_names.index("GSE16446_sim")
    gse = load_dataset("gse6861_subset")
    gina = load_dataset("gina_agnostic_subset")
    rng = np.random.default_rng(seed)
    rows = np.concatenate([rng.choice(np.flatnonzero(gina.y == c), 60, replace=False) for c in (0, 1)])
    return {"geo5_sim/GSE16446_sim": (geo.X[site], geo.y[site]), "gse6861_subset": (gse.X, gse.y),
            "gina_agnostic_subset/120": (gina.X[np.sort(rows)], gina.y[np.sort(rows)])}


def forest_configs(n: int, max_trees: int | None, seed: int) -> list[dict]:
    configs = LEARNERS["random_forest"].space.latin_hypercube(n, np.random.default_rng(seed))
    if max_trees is not None:
        configs = [{**c, "num_trees": min(int(c["num_trees"]), max_trees)} for c in configs]
    return configs


def bench_forest(data, configs, seed: int) -> dict:
    out = {}
    for name, (X, y) in data.items():
        rows = []
        for config in configs:
            row = {"config": config}
            for label, learner in (("ours", LEARNERS["random_forest"]), ("sklearn", SKLEARN_FOREST)):
                res, cpu = cpu_seconds(lambda: cross_validate(learner, config, X, y, n_folds=10, seed=seed))
                row[label] = {"cv_error": res.error, "cpu_seconds": cpu,
                              "ms_per_tree": 1e3 * cpu / config["num_trees"]}
            rows.append(row)
            print(f"{name:26s} trees={config['num_trees']:5d} node={config['min_node_size']:2d} "
                  f"frac={config['sample_fraction']:.2f}  ours {row['ours']['cv_error']:.3f} "
                  f"{row['ours']['cpu_seconds']:7.2f}s  sklearn {row['sklearn']['cv_error']:.3f} "
                  f"{row['sklearn']['cpu_seconds']:7.2f}s", flush=True)
        trees = np.array([r["config"]["num_trees"] for r in rows], dtype=float)
        summary = {}
        for label in ("ours", "sklearn"):
            seconds = np.array([r[label]["cpu_seconds"] for r in rows])
            slope, intercept = np.polyfit(trees, seconds, 1) if len(set(trees)) > 1 else (seconds.sum() / trees.sum(), 0.0)
            summary[label] = {"ms_per_tree_marginal": 1e3 * slope, "seconds_per_cv_fixed": intercept,
                              "ms_per_tree_mean": float(np.mean(1e3 * seconds / trees)),
                              "mean_cv_error": float(np.mean([r[label]["cv_error"] for r in rows]))}
        summary["mean_abs_cv_error_difference"] = float(np.mean([abs(r["ours"]["cv_error"] - r["sklearn"]["cv_error"])
                                                                 for r in rows]))
        summary["per_tree_speedup"] = summary["sklearn"]["ms_per_tree_mean"] / summary["ours"]["ms_per_tree_mean"]
        out[name] = {"shape": list(X.shape), "rows": rows, "summary": summary}
    return out


def bench_fold_cache(X, y, n_configs: int, seed: int) -> dict:
    out = {}
    plan, plan_cpu = cpu_seconds(lambda: CVPlan(X, y, n_folds=10, seed=seed))
    out["plan_cpu_seconds"] = plan_cpu
    for name in ("elastic_net", "svm", "random_forest"):
        learner = LEARNERS[name]
        configs = learner.space.latin_hypercube(n_configs, np.random.default_rng(seed + 1))
        if name == "random_forest":
            configs = [{**c, "num_trees": 100} for c in configs]
        first, first_cpu = cpu_seconds(lambda: cross_validate(learner, configs[0], X, y, seed=seed, cache=plan))
        plain_ms, cached_ms = [], []
        for config in configs:
            plain, cpu = cpu_seconds(lambda: cross_validate(learner, config, X, y, seed=seed))
            plain_ms.append(1e3 * cpu)
            cached, cpu = cpu_seconds(lambda: cross_validate(learner, config, X, y, seed=seed, cache=plan))
            cached_ms.append(1e3 * cpu)
            if cached != plain:
                raise SystemExit(f"fold cache changed the CV result of {name} at {config}: {cached} != {plain}")
        out[name] = {"ms_per_cv_pipeline": float(np.mean(plain_ms)), "ms_per_cv_cached": float(np.mean(cached_ms)),
                     "first_cached_cv_ms_including_preprocessing": 1e3 * first_cpu,
                     "n_configs": len(configs), "identical_results": True}
        print(f"fold cache {name:13s} pipeline {out[name]['ms_per_cv_pipeline']:7.1f} ms  "
              f"cached {out[name]['ms_per_cv_cached']:7.1f} ms", flush=True)
    return out


def projection(forest: dict, cache: dict) -> dict:
    ratio = float(np.mean([d["summary"]["ours"]["ms_per_tree_mean"] / d["summary"]["sklearn"]["ms_per_tree_mean"]
                           for d in forest.values()]))
    other_saving = float(np.mean([cache[n]["ms_per_cv_cached"] / cache[n]["ms_per_cv_pipeline"]
                                  for n in ("elastic_net", "svm")]))
    forest_hours = GRID_CPU_HOURS_SKLEARN * GRID_FOREST_SHARE * ratio
    other_hours = GRID_CPU_HOURS_SKLEARN * (1 - GRID_FOREST_SHARE) * other_saving
    total = forest_hours + other_hours
    n_forest_units = N_UNITS["pairs"] * N_UNITS["replications"]
    return {"inputs": {"grid_cpu_hours_sklearn": GRID_CPU_HOURS_SKLEARN, "forest_share": GRID_FOREST_SHARE,
                       "units": N_UNITS},
            "forest_cost_ratio_ours_over_sklearn": ratio, "other_cost_ratio_cached_over_pipeline": other_saving,
            "forest_cpu_hours": forest_hours, "other_cpu_hours": other_hours, "grid_cpu_hours": total,
            "forest_unit_cpu_hours": forest_hours / n_forest_units,
            "grid_wall_hours_ideal": {str(c): total / c for c in (2, 16, 64)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=8, help="forest configurations per data set")
    parser.add_argument("--max-trees", type=int, default=None, help="cap num_trees (default: the paper's 5000)")
    parser.add_argument("--cache-configs", type=int, default=10, help="configurations per learner for the fold cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 configurations, at most 200 trees")
    parser.add_argument("--out", default="results/bench_forest.json")
    args = parser.parse_args()
    out = Path(args.out)
    with Benchmark("bench_forest", out) as bench:
        if args.quick:
            args.configs, args.max_trees, args.cache_configs = 2, 200, 3

        _, compile_cpu = cpu_seconds(lambda: (forest_warm_up(), elastic_net_warm_up()))
        data = datasets(args.seed)
        configs = forest_configs(args.configs, args.max_trees, args.seed)
        cache = bench_fold_cache(*data["geo5_sim/GSE16446_sim"], args.cache_configs, args.seed)
        forest = bench_forest(data, configs, args.seed)
        result = {
            "settings": {"n_folds": 10, "configs": args.configs, "max_trees": args.max_trees, "seed": args.seed,
                         "cache_configs": args.cache_configs, "quick": args.quick},
            "environment": {"versions": {p: importlib.metadata.version(p) for p in ("numpy", "numba", "scikit-learn")}},
            "warm_up_cpu_seconds": compile_cpu,
            "forest": forest,
            "fold_cache": cache,
            "projection": projection(forest, cache),
        }
        bench.figures.update(result)
        bench.headline.update({"grid_cpu_hours": result["projection"]["grid_cpu_hours"]})
    for name, d in forest.items():
        s = d["summary"]
        print(f"{name:26s} ms/tree ours {s['ours']['ms_per_tree_mean']:.3f} sklearn "
              f"{s['sklearn']['ms_per_tree_mean']:.3f} (x{s['per_tree_speedup']:.1f}); marginal "
              f"{s['ours']['ms_per_tree_marginal']:.3f} / {s['sklearn']['ms_per_tree_marginal']:.3f}; "
              f"mean CV error {s['ours']['mean_cv_error']:.3f} / {s['sklearn']['mean_cv_error']:.3f}")
    p = result["projection"]
    print(f"projected grid: {p['grid_cpu_hours']:.1f} CPU-hours ({p['grid_wall_hours_ideal']['64']:.2f} h on 64 cores)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
