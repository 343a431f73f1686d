"""Why the paper's penalty keeps infeasible settings: NSGA-II's survival replayed with and without it.

Reads the finished searches of ``experiments/bench_cmosb_seeds.py`` (``--work``): for every
penalty-constrained search (``leakage_penalty``, ``cost_penalty``) and every generation
``g >= 1`` it rebuilds the pool NSGA-II chose the next parents from - the population after
generation ``g - 1`` and the offspring of ``g``, as the search's own record (``generation``,
``in_population_until``) gives them - and runs pymoo's survival (``RankAndCrowding``, the
survival of :class:`raytune_fed.algorithms.nsga2.NSGA2`) on that pool twice: on the
objectives the search ranked (its own searcher's ``survival_objectives``: the bounded
objective plus alpha x the violation, alpha 20) and on the raw objectives.  Each cell's bound
and population come from its own ``settings.json``.  It reports, summed over the generations of each seed:

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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.operators.survival.rank_and_crowding import RankAndCrowding
from pymoo.operators.survival.rank_and_crowding.metrics import get_crowding_function
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from raytune_fed.workflows.cmosb import OBJECTIVES, CMOSBSettings, feasible, load_task
from raytune_fed.workflows.cmosb._run import plan

VARIANTS = {"privacy_leakage": ("leakage_penalty", "leakage_domination"),
            "training_cost": ("cost_penalty", "cost_domination")}


@dataclass
class Search:
    """One stored CMOSB search of the multi-seed run: its rows and the settings it ran with."""

    frame: pd.DataFrame
    settings: CMOSBSettings

    @cached_property
    def searcher(self) -> Any:
        """A fresh NSGA2Search as this search's own run builds it (its constraints, penalty and bounded objectives)."""
        run = next(r for r in plan(self.settings, binary=load_task(self.settings.dataset).binary)
                   if r.method == "cmosb")
        return run.make_searcher()

    @property
    def core(self) -> Any:
        return self.searcher.core

    def survival_objectives(self, raw: np.ndarray) -> np.ndarray:
        """The objectives this search's NSGA-II ranked for rows ``raw`` (penalised if it penalises), with the
        constraint values its searcher reads from each trial's result."""
        G = np.array([self.searcher._constraint_row(dict(zip(OBJECTIVES, row))) for row in raw], dtype=float)
        return self.core.survival_objectives(raw, G.reshape(len(raw), -1))


def load(work: Path, dataset: str, variant: str, seed: int) -> Search | None:
    out = work / dataset / variant / f"seed{seed}"
    if not (out / "runs" / "cmosb.parquet").exists():
        return None
    record = json.loads((out / "settings.json").read_text())["settings"]
    settings = CMOSBSettings(**{**record, "baselines": tuple(record["baselines"]), "points": tuple(record["points"])})
    return Search(pd.read_parquet(out / "runs" / "cmosb.parquet"), settings.check())


def replay(search: Search, objective: str, bound: float, seed: int) -> dict:
    frame, population = search.frame, search.settings.population
    survival, problem = RankAndCrowding(), Problem(n_var=1, n_obj=len(OBJECTIVES))
    crowding, nds = get_crowding_function("cd"), NonDominatedSorting()
    kept = {"penalised": [], "raw": []}
    crowd = {w: {"feasible": [], "infeasible": []} for w in kept}
    front1, agree = [], []
    rng = np.random.default_rng(seed)
    for g in range(1, int(frame.generation.max()) + 1):
        pool = frame[((frame.generation <= g - 1) & (frame.in_population_until >= g - 1)) | (frame.generation == g)]
        raw = pool[list(OBJECTIVES)].to_numpy(dtype=float)
        infeasible = ~feasible(pool, {objective: ("<=", bound)})
        for way, F in (("penalised", search.survival_objectives(raw)), ("raw", raw)):
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
        out[str(g)] = float((~feasible(members, {objective: ("<=", bound)})).mean())
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="results/bench_cmosb_seeds")
    ap.add_argument("--dataset", default="synthetic1")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default="experiments/measured/cmosb_penalty_survival.json")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    work = Path(args.work)
    report: dict = {"benchmark": "cmosb_penalty_survival", "dataset": args.dataset, "variants": {},
                    "population_infeasible_share": {}}
    for objective, (penalty, domination) in VARIANTS.items():
        searches = {(v, s): found for v in ("table4", penalty, domination) for s in seeds
                    if (found := load(work, args.dataset, v, s)) is not None}
        bounds = {s.settings.constraints[objective][1] for s in searches.values() if objective in s.settings.constraints}
        if not bounds:
            continue
        if len(bounds) > 1:
            ap.error(f"the {objective} searches under {work / args.dataset} ran with different bounds {sorted(bounds)}")
        bound = bounds.pop()
        per_seed = {str(s): replay(found, objective, bound, s) for (v, s), found in searches.items() if v == penalty}
        if per_seed:
            ran = [found for (v, _), found in searches.items() if v == penalty]
            report["variants"][penalty] = {"objective": objective, "bound": bound,
                                           "alpha": sorted({f.core.penalty for f in ran}),
                                           "population": sorted({f.settings.population for f in ran}),
                                           "per_seed": per_seed}
            for seed, r in per_seed.items():
                k = r["kept_infeasible_share"]
                print(f"{penalty} seed {seed}: infeasible among survivors {k['penalised']:.2f} with the penalty, "
                      f"{k['raw']:.2f} without; front 1 holds {r['front1_share']:.2f} of the pool; "
                      f"median crowding feasible/infeasible {r['median_finite_crowding_on_front1']['penalised']} "
                      f"(raw {r['median_finite_crowding_on_front1']['raw']}); replay keeps "
                      f"{r['replay_agrees']:.2f} of the recorded survivors")
        for variant in ("table4", penalty, domination):
            found = {str(s): population_infeasible(searches[v, s].frame, objective, bound)
                     for v, s in searches if v == variant}
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
