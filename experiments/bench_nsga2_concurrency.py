"""Do a generation's members run as concurrent Tune trials?  Measured from Tune's own records.

(Moved out of the test suite: how many trials overlap is a timing claim, which a loaded
machine can break.)  Everything here is read back from the experiment directory Tune wrote,
through ``tune.ExperimentAnalysis``: each trial's start (``run_metadata.start_time``, set by
Tune's controller when the trial starts on an actor), its run time (``time_total_s``), the
process of the actor that ran it (``pid``) and its creation index (the number at the start
of ``experiment_tag``; ``NSGA2Search`` proposes a generation's members one after the other,
so trial ``k`` (from 1) belongs to generation ``(k - 1) // population``).  Per generation:
the most trials running at once, the actors (processes) that ran them, the span from the
first start to the last end and the sum of the trials' run times (span ~ sum: one at a time).

Two uses:

* a Tune run of :class:`raytune_fed.search.NSGA2Search` (population ``--population``,
  ``--generations`` generations, ``max_concurrent_trials = population``) whose trials each
  sleep ``--sleep`` seconds on a local Ray session of ``--num-cpus`` CPUs with trials of
  ``num_cpus / population`` CPU, with or without ``--reuse-actors``;
* ``--from-run DIR`` reads an existing Tune experiment directory (e.g. a CMOSB run's
  ``OUT/tune/cmosb``) instead of running anything.

    python experiments/bench_nsga2_concurrency.py [--reuse-actors] [--sleep 1.0]
    python experiments/bench_nsga2_concurrency.py --from-run OUT/tune/cmosb --population 20 --out F.json

JSON to ``experiments/measured/bench_nsga2_concurrency.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)


def trainable(config):
    time.sleep(config["sleep"])
    return {"f1": config["x"] ** 2, "f2": (config["x"] - 2) ** 2}


def tune_records(path: str | Path) -> list[dict[str, Any]]:
    """Every finished trial of the Tune experiment at ``path``: creation index, start, run time, actor pid."""
    from ray.tune import ExperimentAnalysis

    analysis = ExperimentAnalysis(str(Path(path).resolve()))
    rows = []
    for trial in analysis.trials:
        result = trial.last_result or {}
        if "time_total_s" not in result or trial.run_metadata.start_time is None:
            continue
        start = float(trial.run_metadata.start_time)
        rows.append({"index": int(str(result["experiment_tag"]).split("_")[0]), "trial_id": trial.trial_id,
                     "start": start, "end": start + float(result["time_total_s"]), "pid": int(result["pid"])})
    return sorted(rows, key=lambda r: r["index"])


def concurrency(rows: list[dict[str, Any]], population: int) -> dict[str, Any]:
    """Per generation: most trials running at once, actors used, span and summed run time (seconds)."""
    generations: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        generations.setdefault((r["index"] - 1) // population, []).append(r)
    out = []
    for g in sorted(generations):
        members = generations[g]
        most = max(sum(m["start"] <= r["start"] < m["end"] for m in members) for r in members)
        span = max(m["end"] for m in members) - min(m["start"] for m in members)
        out.append({"generation": g, "n_trials": len(members), "most_running_at_once": int(most),
                    "actors": len({m["pid"] for m in members}), "span_s": round(span, 3),
                    "sum_of_run_times_s": round(sum(m["end"] - m["start"] for m in members), 3)})
    complete = [o for o in out if o["n_trials"] == population]
    return {"n_trials": len(rows), "per_generation": out,
            "most_running_at_once_per_generation": [o["most_running_at_once"] for o in out],
            "generations_after_the_first_with_one_trial_at_a_time": sum(
                o["most_running_at_once"] == 1 for o in complete[1:]),
            "complete_generations_after_the_first": max(0, len(complete) - 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--reuse-actors", action="store_true", help="TuneConfig(reuse_actors=True)")
    parser.add_argument("--from-run", default=None, help="read this Tune experiment directory; run nothing")
    parser.add_argument("--out", default="experiments/measured/bench_nsga2_concurrency.json")
    args = parser.parse_args()
    if args.population < 2 or args.generations < 1 or args.sleep < 0 or args.num_cpus < 1:
        parser.error("need --population >= 2, --generations >= 1, --sleep >= 0, --num-cpus >= 1")
    if args.from_run and not Path(args.from_run).is_dir():
        parser.error(f"--from-run: no such directory: {args.from_run}")
    with Benchmark("bench_nsga2_concurrency", args.out) as bench:
        if args.from_run:
            record: dict[str, Any] = {
                "source": "Tune's records of an existing run (ExperimentAnalysis)", "population": args.population,
                **concurrency(tune_records(args.from_run), args.population)}
        else:
            from ray import tune

            from raytune_fed.runtime import connect
            from raytune_fed.search import NSGA2Search

            connect(num_cpus=args.num_cpus)
            searcher = NSGA2Search(metric=["f1", "f2"], mode=["min", "min"], seed=0, population_size=args.population,
                                   n_generations=args.generations)
            with tempfile.TemporaryDirectory() as storage:
                tune.Tuner(
                    tune.with_resources(trainable, {"cpu": args.num_cpus / args.population}),
                    param_space={"x": tune.uniform(-1.0, 3.0), "sleep": args.sleep},
                    tune_config=tune.TuneConfig(search_alg=searcher, num_samples=-1,
                                                max_concurrent_trials=args.population, reuse_actors=args.reuse_actors),
                    run_config=tune.RunConfig(storage_path=storage, name="run", verbose=0)).fit()
                measured = concurrency(tune_records(Path(storage) / "run"), args.population)
            record = {
                "source": "Tune's records of this run (ExperimentAnalysis)",
                "population": args.population, "generations": args.generations, "sleep_s": args.sleep,
                "num_cpus": args.num_cpus, "reuse_actors": args.reuse_actors, **measured,
            }
        bench.figures.update(record)
    print(json.dumps({k: v for k, v in record.items() if k != "per_generation"}, indent=2))


if __name__ == "__main__":
    main()
