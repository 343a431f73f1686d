"""Do a generation's members run as concurrent Tune trials?  (Moved out of the test suite:
an overlap of trial time spans is a timing claim, which a loaded machine can break.)

One Tune run of :class:`raytune_fed.search.NSGA2Search` (population ``--population``,
``--generations`` generations, ``max_concurrent_trials = population``) whose trials each
sleep ``--sleep`` seconds on a local Ray session of ``--num-cpus`` CPUs with trials of
``1 / population x num_cpus`` CPU.  Recorded per generation: the most trials running at
once (from each trial's start and end), and overall the share of trials that overlapped
another of their generation; with the load average and the CPU seconds of this process
and its children.

Run ``python experiments/bench_nsga2_concurrency.py``; JSON to
``experiments/measured/bench_nsga2_concurrency.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path


def trainable(config):
    start = time.time()
    time.sleep(config["sleep"])
    return {"f1": config["x"] ** 2, "f2": (config["x"] - 2) ** 2, "start": start, "end": time.time()}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--reuse-actors", action="store_true", help="TuneConfig(reuse_actors=True)")
    parser.add_argument("--out", default="experiments/measured/bench_nsga2_concurrency.json")
    args = parser.parse_args()

    from ray import tune

    from raytune_fed.runtime import connect
    from raytune_fed.search import NSGA2Search

    connect(num_cpus=args.num_cpus)
    load_before, cpu_before, wall_before = os.getloadavg(), cpu_seconds(), time.monotonic()
    searcher = NSGA2Search(metric=["f1", "f2"], mode=["min", "min"], seed=0, population_size=args.population,
                           n_generations=args.generations)
    with tempfile.TemporaryDirectory() as storage:
        results = tune.Tuner(
            tune.with_resources(trainable, {"cpu": args.num_cpus / args.population}),
            param_space={"x": tune.uniform(-1.0, 3.0), "sleep": args.sleep},
            tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1, max_concurrent_trials=args.population,
                                        reuse_actors=args.reuse_actors),
            run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    frame = results.get_dataframe().sort_values("start").reset_index(drop=True)
    frame["generation"] = range(len(frame))
    frame["generation"] //= args.population
    per_generation, overlapping = [], 0
    for _, g in frame.groupby("generation"):
        spans = list(zip(g["start"], g["end"]))
        most = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
        per_generation.append(int(most))
        overlapping += sum(any(s2 < e1 and s1 < e2 for j, (s2, e2) in enumerate(spans) if j != i)
                           for i, (s1, e1) in enumerate(spans))
    record = {
        "command": "python experiments/bench_nsga2_concurrency.py " + " ".join(
            f"--{k.replace('_', '-')}" + ("" if isinstance(v, bool) else f" {v}")
            for k, v in vars(args).items() if k != "out" and v is not False),
        "population": args.population, "generations": args.generations, "sleep_s": args.sleep,
        "num_cpus": args.num_cpus, "reuse_actors": args.reuse_actors, "n_trials": len(frame),
        "most_running_at_once_per_generation": per_generation,
        "share_of_trials_overlapping_another": overlapping / len(frame),
        "wall_s": time.monotonic() - wall_before, "cpu_s_process_and_children": cpu_seconds() - cpu_before,
        "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2))
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
