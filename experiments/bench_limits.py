"""Memory of the structures the search budgets grow, for the bounds in ``raytune_fed/_limits.py``.

Each structure is built at a size small enough to run in seconds and its peak memory
(``tracemalloc``: numpy's allocations are traced) divided by the size's square (pairs) or by
the size (trials):

* ``gp`` - one fit of the Gaussian process (``fit_gp``) on ``n`` points of a ``d``-parameter space;
* ``nsga2`` - two generations of the NSGA-II core (ask, tell, pymoo's survival) with population ``N``;
* ``attack`` - the label-inference attack's similarity matrices and clustering over ``n`` sampled rows;
* ``optuna`` - an Optuna TPE study, memory kept per finished trial;
* ``tune`` - a Ray Tune run of trivial trials, the driver's memory kept per trial;
* ``worker`` - the resident memory of one Ray worker process that imported the package.

Writes ``results/bench_limits.json`` (with the load average and ``_limits``' constants beside the
measurements, so the two can be compared).

    python experiments/bench_limits.py            # a few minutes on 2 cores
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc

import numpy as np

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)


def _peak(build) -> int:
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    kept = build()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return peak - start


def _kept(build) -> int:
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    kept = build()
    gc.collect()
    now, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return now - start


def gp(n: int, d: int) -> dict:
    from raytune_fed.algorithms.gp import fit_gp

    rng = np.random.default_rng(0)
    X, y = rng.random((n, d)), rng.random(n)
    started = time.process_time()
    peak = _peak(lambda: fit_gp(X, y, noise=True))
    return {"n": n, "d": d, "peak_bytes": peak, "bytes_per_pair": peak / n ** 2,
            "cpu_seconds": time.process_time() - started}


def nsga2(population: int) -> dict:
    from raytune_fed.algorithms.nsga2 import NSGA2
    from raytune_fed.space import Float, SearchSpace

    space = SearchSpace(tuple(Float(name, 0.0, 1.0) for name in "abcdef"))

    def run():
        core = NSGA2(space, 3, seed=0, population_size=population)
        rng = np.random.default_rng(1)
        for _ in range(2):
            configs = core.ask(population)
            core.tell(configs, rng.random((len(configs), 3)))
        return core

    started = time.process_time()
    peak = _peak(run)
    return {"population": population, "peak_bytes": peak, "bytes_per_pair": peak / population ** 2,
            "cpu_seconds": time.process_time() - started}


def attack(n: int) -> dict:
    from raytune_fed.attacks._ica import cluster_and_label, cooccurrence

    rng = np.random.default_rng(2)
    sample = np.arange(n)
    truth = rng.integers(0, 2, n)

    def run():
        sim = np.zeros((n, n))
        for _ in range(4):  # four trees, each a partition of the rows into 8 leaves
            leaves = rng.integers(0, 8, n)
            sim += cooccurrence([sample[leaves == k] for k in range(8)], sample)
        affinity = sim / 4 + np.eye(n)
        return cluster_and_label(affinity, truth, 2, 1, 0)

    started = time.process_time()
    peak = _peak(run)
    return {"n": n, "peak_bytes": peak, "bytes_per_pair": peak / n ** 2, "cpu_seconds": time.process_time() - started}


def optuna_trials(n: int) -> dict:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def objective(trial):
        return trial.suggest_float("a", 0, 1) + trial.suggest_int("b", 1, 100) + \
            trial.suggest_float("c", 1e-3, 1, log=True)

    def run():
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
        study.optimize(objective, n_trials=n)
        return study

    kept = _kept(run)
    return {"n_trials": n, "kept_bytes": kept, "bytes_per_trial": kept / n}


def _trivial(config):
    return {"x": config["a"]}


def tune_trials(n: int, storage: str) -> dict:
    from ray import tune

    def run():
        tuner = tune.Tuner(_trivial, param_space={"a": tune.uniform(0, 1)},
                           tune_config=tune.TuneConfig(num_samples=n),
                           run_config=tune.RunConfig(storage_path=storage, verbose=0))
        return tuner.fit()

    run_small = _kept(lambda: tune.Tuner(_trivial, param_space={"a": tune.uniform(0, 1)},
                                         tune_config=tune.TuneConfig(num_samples=2),
                                         run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit())
    kept = _kept(run)
    return {"n_trials": n, "kept_bytes": kept, "bytes_per_trial": kept / n, "warm_up_run_bytes": run_small}


def worker_rss() -> dict:
    import ray

    @ray.remote(num_cpus=1)
    def rss() -> int:
        import raytune_fed.workflows.rfms  # noqa: F401  what a cell imports
        import sklearn.ensemble  # noqa: F401

        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    return {"worker_rss_bytes": ray.get(rss.remote())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench_limits.json")
    args = parser.parse_args()
    with Benchmark("bench_limits", args.out) as bench:
        import tempfile

        from raytune_fed import _limits
        from raytune_fed.runtime import connect

        result = {"gp": [gp(500, 3), gp(1000, 3), gp(1000, 6)],
                  "nsga2": [nsga2(500), nsga2(1000)],
                  "attack": [attack(1000), attack(2000)],
                  "optuna": optuna_trials(300)}
        connect(num_cpus=1)
        with tempfile.TemporaryDirectory() as storage:
            result["tune"] = tune_trials(100, storage)
        result.update(worker_rss())
        result["constants"] = {name: getattr(_limits, name) for name in (
            "GP_BYTES_PER_PAIR", "NSGA2_BYTES_PER_PAIR", "ATTACK_BYTES_PER_PAIR", "TUNE_BYTES_PER_TRIAL",
            "OPTUNA_BYTES_PER_TRIAL", "WORKER_BYTES", "MEMORY_SHARE")}
        result["limits_here"] = _limits.limits().__dict__
        bench.figures.update(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
