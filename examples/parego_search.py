"""ParEGOSearch in a Ray Tune run: two objectives that pull one hyperparameter apart.

Run: python examples/parego_search.py  (about half a minute; starts a local Ray session)
"""

import math
import tempfile

from ray import tune

from raytune_fed.search import ParEGOSearch


def trainable(config):
    """Report both objectives once; Tune ends the trial when the function returns."""
    c, gamma = math.log10(config["C"]), math.log10(config["gamma"])
    return {"local": (c - 1) ** 2 + 0.1 * gamma**2, "remote": (c + 1) ** 2 + 0.1 * (gamma - 1) ** 2}


def main(n_samples: int = 16):
    searcher = ParEGOSearch(metric=["local", "remote"], mode=["min", "min"], n_initial_points=8, seed=0)
    with tempfile.TemporaryDirectory() as storage:
        tuner = tune.Tuner(
            trainable,
            param_space={"C": tune.loguniform(1e-3, 1e3), "gamma": tune.loguniform(1e-3, 1e3)},
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=n_samples, max_concurrent_trials=2,
                                        reuse_actors=True),
            run_config=tune.RunConfig(storage_path=storage, verbose=0))
        results = tuner.fit()
    front = searcher.core.pareto_front()
    print(f"{len(results)} trials, {sum(r.error is not None for r in results)} failed")
    print("Pareto front (local, remote):")
    for row in front:
        print(f"  {row[0]:.4f}  {row[1]:.4f}")
    print("configurations on it:", searcher.core.pareto_configs()[:3], "...")
    return searcher


if __name__ == "__main__":
    main()
