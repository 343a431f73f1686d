"""The passive party's defences measured: what a deviating active party still reads, and what honest training pays.

    python experiments/bench_party_defences.py --out experiments/measured/bench_party_defences.json
    python experiments/bench_party_defences.py --parts flood --before 2bacd8e \
        --out experiments/measured/bench_party_flood.json

Parts (``--parts``, comma-separated):

* ``attacks`` - a :class:`PassiveParty` holding the passive columns of each dataset (every
  aligned row), for each ``bin_privacy`` epsilon: the attacks of ``tests/party_attacker.py``
  (``crafted_powers``: one ``histograms`` request of powers of two, plain backend;
  ``split_masks``; ``decrypted_noise``, BFV, Synthetic1 only): rows whose masks the attacker
  read, share of the values' bins it gets right and rows with every bin right, per request;
* ``utility`` - the active and the passive party in this process (plain backend), the CMOSB
  paper's three empirical settings (FATE, VF2Boost, their average) x ``--seeds`` seeds, per
  epsilon: test AUC and CPU seconds per training (both parties: they share this process);
* ``flood`` - BFV trainings (Synthetic1, FATE and average settings, mechanism off): CPU seconds
  per training with the flooded results, and with ``--before REV`` the same on that revision.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from pathlib import Path

import numpy as np

from _harness import Benchmark, figures_of  # this folder's harness (the script's own folder is on sys.path)

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "tests"))  # the attacker's tools

DATASETS = ("synthetic1", "default_credit")
PARTS = ("attacks", "utility", "flood")
OFF = "off"
OWNER = "bench-owner-" + "o" * 20
TIMES = {"encryption": 3.447e-3, "decryption": 1.390e-3, "addition": 1.044e-4, "product": 4.357e-4}


def _party_kwargs(epsilon: str) -> dict:
    """``bin_privacy`` for this revision's PassiveParty (a revision without the mechanism takes none)."""
    from raytune_fed.federation.parties import PassiveParty

    if "bin_privacy" not in inspect.signature(PassiveParty).parameters:
        if epsilon != OFF:
            raise SystemExit(f"this revision has no bin_privacy; measure only {OFF!r} on it")
        return {}
    return {"bin_privacy": None if epsilon == OFF else float(epsilon)}


def _passive_columns(name: str) -> tuple[np.ndarray, object]:
    from raytune_fed.workflows.cmosb._tasks import load_task

    task = load_task(name)
    return np.ascontiguousarray(task.X[:, task.passive_features[0]]), task


def attacks(datasets: list[str], epsilons: list[str]) -> dict:
    import party_attacker as kit

    out: dict = {}
    for name in datasets:
        X, _ = _passive_columns(name)
        for eps in epsilons:
            row = {}
            for attack, kwargs in (("crafted_powers", {"scheme": "plain"}), ("split_masks", {}),
                                   ("decrypted_noise", {})):
                if attack == "decrypted_noise" and name != "synthetic1":
                    continue
                start = time.process_time()
                with kit.deployed("local", X, **_party_kwargs(eps)) as dep:
                    result = getattr(kit, attack)(dep, **kwargs)
                result.pop("guess", None)
                result["cpu_seconds"] = time.process_time() - start
                row[attack] = result
            out.setdefault(name, {})[eps] = row
            print(name, eps, json.dumps(row), flush=True)
    return out


def _train(task: object, X_passive: np.ndarray, params: dict, party_kwargs: dict, seed: int, unit: str) -> dict:
    from raytune_fed.federation.parties import ActiveParty, PassiveClient, PassiveParty

    active = ActiveParty(task.X[:, task.active_features], task.y, train_rows=task.train_rows,
                         test_rows=task.test_rows)
    passive = PassiveParty(X_passive, owner_secret=OWNER, seed=seed, **party_kwargs)
    client = PassiveClient.admit(passive, owner=OWNER, unit=unit)
    start = time.process_time()
    report = active.train(unit, {**params, "random_state": seed, "op_times": TIMES}, [client])
    return {"auc": 1.0 - report.utility_loss, "cpu_seconds": time.process_time() - start,
            "training_cost": report.training_cost, **report.op_counts.as_dict()}


def utility(datasets: list[str], epsilons: list[str], seeds: int) -> dict:
    from raytune_fed.workflows.cmosb._methods import ES_PRESETS, es_config

    out: dict = {}
    for name in datasets:
        X, task = _passive_columns(name)
        for preset in ES_PRESETS:
            for eps in epsilons:
                runs = [_train(task, X, {**es_config(preset), "he": "plain"}, _party_kwargs(eps), seed,
                               f"{preset}-{eps}-{seed}") for seed in range(seeds)]
                aucs = np.array([r["auc"] for r in runs])
                cpu = np.array([r["cpu_seconds"] for r in runs])
                row = {"auc_mean": float(aucs.mean()), "auc_std": float(aucs.std(ddof=1)) if seeds > 1 else 0.0,
                       "auc": aucs.tolist(), "cpu_seconds_median": float(np.median(cpu)), "runs": runs}
                out.setdefault(name, {}).setdefault(preset, {})[eps] = row
                print(name, preset, eps, f"AUC {row['auc_mean']:.4f} +- {row['auc_std']:.4f}",
                      f"CPU {row['cpu_seconds_median']:.2f} s", flush=True)
    return out


def flood(trainings: int) -> dict:
    from raytune_fed.workflows.cmosb._methods import es_config

    X, task = _passive_columns("synthetic1")
    out: dict = {}
    for preset in ("fate", "average"):
        runs = [_train(task, X, {**es_config(preset), "he": "bfv"}, _party_kwargs(OFF), seed, f"flood-{preset}-{seed}")
                for seed in range(trainings)]
        out[preset] = {"cpu_seconds_median": float(np.median([r["cpu_seconds"] for r in runs])), "runs": runs}
        print("flood", preset, f"CPU {out[preset]['cpu_seconds_median']:.2f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="attacks,utility", help="parts to run (default: %(default)s)")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="default: %(default)s")
    parser.add_argument("--epsilons", default="off,4,2,1,0.5,0.25", help="bin_privacy values (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per setting for utility (default: %(default)s)")
    parser.add_argument("--trainings", type=int, default=3, help="BFV trainings per setting (default: %(default)s)")
    parser.add_argument("--before", default=None, help="also run the flood part on this git revision")
    parser.add_argument("--out", default="results/bench_party_defences.json", help="default: %(default)s")
    args = parser.parse_args()
    parts, datasets, epsilons = args.parts.split(","), args.datasets.split(","), args.epsilons.split(",")
    bad = sorted(set(parts) - set(PARTS)) + sorted(set(datasets) - set(DATASETS))
    bad += [e for e in epsilons if e != OFF and not e.replace(".", "", 1).isdigit()]
    if bad or args.seeds < 1 or args.trainings < 1:
        parser.exit(2, f"{parser.prog}: error: unknown parts, datasets or epsilons {bad} (parts {list(PARTS)}, "
                       f"datasets {list(DATASETS)}, epsilons {OFF!r} or numbers), or --seeds/--trainings < 1\n")
    with Benchmark("bench_party_defences", args.out) as bench:
        results: dict = {}
        if "attacks" in parts:
            results["attacks"] = attacks(datasets, epsilons)
        if "utility" in parts:
            results["utility"] = utility(datasets, epsilons, args.seeds)
        if "flood" in parts:
            results["flood"] = flood(args.trainings)
            if args.before:
                from _revisions import checkout, run_script

                with checkout(args.before) as tree:
                    before = run_script(tree, __file__, ["--parts", "flood", "--trainings", str(args.trainings)])
                results["flood_before"] = {"revision": args.before, **figures_of(before)["flood"]}
        bench.figures.update(results)


if __name__ == "__main__":
    main()
