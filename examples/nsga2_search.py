"""NSGA2Search in a Ray Tune run: two objectives and a constraint, a generation as concurrent trials.

(No ``reuse_actors=True`` here: with it, Tune ran the generations after the first one trial
at a time in experiments/bench_nsga2_concurrency.py.)

Run: python examples/nsga2_search.py  (under a minute; starts a local Ray session)
"""

import math
import tempfile

from ray import tune

from raytune_fed.search import NSGA2Search


def trainable(config):
    """Two competing objectives and a memory use that must stay below a budget."""
    x, width = config["x"], config["width"]
    return {"error": x**2 + 0.01 * width, "latency": (x - 2) ** 2 + 0.1 * math.log(width),
            "memory": width * (1 + x)}


def main(population: int = 4, generations: int = 3):
    searcher = NSGA2Search(metric=["error", "latency"], mode=["min", "min"], seed=0,
                           population_size=population, n_generations=generations,
                           constraints={"memory": ("<=", 40.0)}, constraint_handling="domination")
    with tempfile.TemporaryDirectory() as storage:
        tune.Tuner(
            trainable,
            param_space={"x": tune.uniform(-1.0, 3.0), "width": tune.randint(1, 33)},
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, max_concurrent_trials=population),
            run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    print("feasible Pareto front (error, latency):")
    for row, config in zip(searcher.core.pareto_front(), searcher.core.pareto_configs()):
        print(f"  {row[0]:.4f}  {row[1]:.4f}   x={config['x']:.3f} width={config['width']}")
    return searcher


if __name__ == "__main__":
    main()
