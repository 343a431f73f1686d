"""Why the paper's penalty keeps infeasible settings: NSGA-II's survival replayed with and without it.

Reads the finished searches of ``experiments/bench_cmosb_seeds.py`` (``--work``): for every
penalty-constrained search (``leakage_penalty``, ``cost_penalty``) and every generation
``g >= 1`` it rebuilds the pool NSGA-II chose the next parents from - the population after
generation ``g - 1`` and the offspring of ``g``, as the search's own record (``generation``,
``in_population_until``) gives them - and runs pymoo's survival (``RankAndCrowding``, the
survival of :class:`raytune_fed.algorithms.nsga2.NSGA2`) on that pool twice: on the
objectives the search saw (the constrained objective plus alpha x the violation, alpha 20)
and on the raw objectives.  It reports, summed over the generations of each seed:

* ``kept_infeasible_share``: the share of infeasible members among the survivors, each way;
* ``front1_share``: the share of the pool on the first non-dominated front (when it holds more
  than a population, survival is decided by crowding distance alone);
* ``crowding``: the median crowding distance of the feasible and of the infeasible members of
  the first front, each way (pymoo's, objectives scaled by their range on the front);
* ``replay_agrees``: the share of recorded survivors the penalised replay also keeps (ties
  between infinite crowding distances are broken at random by pymoo, so not all of them).

Beside it, for every search of the run (MOSB, i.e. ``table4``'s search, and both handlings of
each bound), ``population_infeasible_share``: the infeasible share of the recorded population
after generations 10, 20, 30 and the last.

    python experiments/cmosb_penalty_survival.py     # -> experiments/measured/cmosb_penalty_survival.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.operators.survival.rank_and_crowding import RankAndCrowding
from pymoo.operators.survival.rank_and_crowding.metrics import get_crowding_function
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from raytune_fed.workflows.cmosb import OBJECTIVES

BOUNDS = {"leakage_penalty": ("privacy_leakage", "max_leakage"), "cost_penalty": ("training_cost", "max_cost")}
ALPHA = 20.0


def replay(frame: pd.DataFrame, objective: str, bound: float, population: int, seed: int) -> dict:
    column = OBJECTIVES.index(objective)
    survival, problem = RankAndCrowding(), Problem(n_var=1, n_obj=len(OBJECTIVES))
    crowding, nds = get_crowding_function("cd"), NonDominatedSorting()
    kept = {"penalised": [], "raw": []}
    crowd = {w: {"feasible": [], "infeasible": []} for w in kept}
    front1, agree = [], []
    rng = np.random.default_rng(seed)
    for g in range(1, int(frame.generation.max()) + 1):
        pool = frame[((frame.generation <= g - 1) & (frame.in_population_until >= g - 1)) | (frame.generation == g)]
        raw = pool[list(OBJECTIVES)].to_numpy(dtype=float)
        infeasible = raw[:, column] > bound
        penalised = raw.copy()
        penalised[:, column] += ALPHA * np.maximum(0.0, raw[:, column] - bound)
        for way, F in (("penalised", penalised), ("raw", raw)):
            chosen = survival.do(problem, Population.new("F", F), n_survive=population, return_indices=True,
                                 random_state=rng)
            kept[way].append(infeasible[chosen].mean())
            first = nds.do(F, only_non_dominated_front=True)
            d = crowding.do(F[first], n_remove=0)
            for flag, name in ((False, "feasible"), (True, "infeasible")):
                crowd[way][name].extend(d[infeasible[first] == flag].tolist())
            if way == "penalised":
                front1.append(len(first) / len(pool))
                recorded = pool.in_population_until.to_numpy() >= g
                agree.append(recorded[chosen].mean())
    finite = {w: {k: float(np.median([x for x in v if np.isfinite(x)])) if any(np.isfinite(v)) else None
                  for k, v in c.items()} for w, c in crowd.items()}
    return {"generations": len(front1),
            "kept_infeasible_share": {w: float(np.mean(v)) for w, v in kept.items()},
            "front1_share": float(np.mean(front1)),
            "median_finite_crowding_on_front1": finite,
            "replay_agrees": float(np.mean(agree))}


def population_infeasible(frame: pd.DataFrame, objective: str, bound: float) -> dict[str, float]:
    last = int(frame.generation.max())
    out = {}
    for g in (10, 20, 30, last):
        members = frame[(frame.generation <= g) & (frame.in_population_until >= g)]
        out[str(g)] = float((members[objective] > bound).mean())
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="results/bench_cmosb_seeds")
    ap.add_argument("--dataset", default="synthetic1")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--population", type=int, default=20)
    ap.add_argument("--max-leakage", type=float, default=0.6)
    ap.add_argument("--max-cost", type=float, default=0.5)
    ap.add_argument("--out", default="experiments/measured/cmosb_penalty_survival.json")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    report: dict = {"benchmark": "cmosb_penalty_survival", "dataset": args.dataset, "alpha": ALPHA,
                    "population": args.population, "variants": {}}
    for variant, (objective, option) in BOUNDS.items():
        bound = getattr(args, option)
        per_seed = {}
        for seed in seeds:
            path = Path(args.work) / args.dataset / variant / f"seed{seed}" / "runs" / "cmosb.parquet"
            if path.exists():
                per_seed[str(seed)] = replay(pd.read_parquet(path), objective, bound, args.population, seed)
        if per_seed:
            report["variants"][variant] = {"objective": objective, "bound": bound, "per_seed": per_seed}
            for seed, r in per_seed.items():
                k = r["kept_infeasible_share"]
                print(f"{variant} seed {seed}: infeasible among survivors {k['penalised']:.2f} with the penalty, "
                      f"{k['raw']:.2f} without; front 1 holds {r['front1_share']:.2f} of the pool; "
                      f"median crowding feasible/infeasible {r['median_finite_crowding_on_front1']['penalised']} "
                      f"(raw {r['median_finite_crowding_on_front1']['raw']}); replay keeps "
                      f"{r['replay_agrees']:.2f} of the recorded survivors")
    report["population_infeasible_share"] = {}
    for objective, option in (("privacy_leakage", "max_leakage"), ("training_cost", "max_cost")):
        bound = getattr(args, option)
        prefix = "leakage" if objective == "privacy_leakage" else "cost"
        for variant in ("table4", f"{prefix}_penalty", f"{prefix}_domination"):
            found = {}
            for seed in seeds:
                path = Path(args.work) / args.dataset / variant / f"seed{seed}" / "runs" / "cmosb.parquet"
                if path.exists():
                    found[str(seed)] = population_infeasible(pd.read_parquet(path), objective, bound)
            if found:
                name = "mosb" if variant == "table4" else variant
                report["population_infeasible_share"].setdefault(objective, {})[name] = found
                print(f"{objective} <= {bound:g}, {name}: infeasible share of the population after generations "
                      "10/20/30/last, per seed: " + "; ".join(" ".join(f"{v:.2f}" for v in r.values())
                                                              for r in found.values()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
