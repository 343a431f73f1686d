"""Benchmark: Table IV and Figures 10-11 of the CMOSB paper at several seeds, as a resumable grid.

A cell is one ``raytune-fed cmosb`` workflow run (:func:`run_cmosb`) of one dataset,
variant and seed, on the grid engine (:mod:`raytune_fed.grid`): a finished cell is stored
under ``--work/store`` and never run again, an interrupted one resumes from its own Tune
runs under ``--work/<dataset>/<variant>/seed<k>``, so rerunning the same command continues a
long run where it stopped.  Variants:

* ``table4`` - CMOSB against ES, GS and BO without constraints (its CMOSB run is also MOSB,
  the unconstrained search of Figures 10-11: the same seed gives the same search);
* ``leakage_penalty`` / ``leakage_domination`` - CMOSB with privacy leakage <= ``--max-leakage``
  (the paper: 0.6) under the paper's penalty (alpha 20) or pymoo's constraint domination;
* ``cost_penalty`` / ``cost_domination`` - the same with training cost <= ``--max-cost``.

Every run prices eps_c with the reference seconds per BFV operation, so costs compare across
cells, seeds and machines.  Scoring:

* Table IV: per seed, each method's hypervolume (reference point (1, 1, 1)) under three
  normalisations of the objectives: ``all_rows`` - min-max over every configuration any
  method evaluated in that seed's run (our reading of "we normalize the three objectives
  for each dataset", the workflow's summary.json); ``natural`` - utility loss and privacy
  leakage on their own [0, 1] scale, training cost divided by its largest value in the run;
  ``own_rows`` - each method min-max scaled over its own rows.  Mean and spread over seeds.
* Figure 10: for each constraint, MOSB and both constrained searches scored on the
  constrained problem: objectives min-max scaled over every row of the three searches and
  all seeds, hypervolume (reference (1, 1, 1)) of the feasible rows after each generation,
  both of all evaluations so far and of the current population; mean and standard deviation
  over seeds per generation, and per seed the final values.
* Figure 11: per seed, the 2-D front (utility loss against the constrained objective) of
  the feasible rows after the last generation, for each search.

    python experiments/bench_cmosb_seeds.py --datasets synthetic1                  # 3 seeds, 20 x 40
    python experiments/bench_cmosb_seeds.py --datasets synthetic2 --variants table4,cost_penalty,cost_domination

The report's ``mosb_meets_bound`` says how much of MOSB's search each bound cuts away.  On
Synthetic2 every MOSB evaluation meets leakage <= 0.6, so its leakage cells would make MOSB's
search again: the second command leaves them out.
"""

from __future__ import annotations

import argparse
import sys
import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.crypto import REFERENCE_OP_TIMES
from raytune_fed.grid import Cell, CellResult, GridIncompleteError, InProcessExecutor, make_progress, run_cells
from raytune_fed.metrics import hypervolume, pareto_mask
from raytune_fed.store import ResultStore
from raytune_fed.workflows.cmosb import (OBJECTIVES, PARAMETERS, CMOSBSettings, feasible, hypervolume_by_generation,
                                        load_task, run_cmosb)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _revisions  # noqa: E402

VARIANTS = ("table4", "leakage_penalty", "leakage_domination", "cost_penalty", "cost_domination")
CONSTRAINED = {"privacy_leakage": ("leakage_penalty", "leakage_domination"),
               "training_cost": ("cost_penalty", "cost_domination")}
TIMING = ("trial_id", "finished_at", "fit_seconds", "attack_seconds")
METHOD_ORDER = ("cmosb", "es", "gs", "bo")
PAPER_TABLE4 = {"synthetic1": {"cmosb": 0.920, "es": 0.516, "gs": 0.826, "bo": 0.902},
                "default_credit": {"cmosb": 0.920, "es": 0.094, "gs": 0.746, "bo": 0.900},
                "synthetic2": {"cmosb": 0.879, "es": 0.368, "gs": 0.706, "bo": 0.805},
                "sensorless": {"cmosb": 0.968, "es": 0.134, "gs": 0.822, "bo": 0.964}}
PAPER_FIGURES = {"privacy_leakage": "CMOSB grows faster in the first generations and ends above MOSB; its front has "
                                    "about 3 % lower leakage at the same utility loss (Fig. 11a)",
                 "training_cost": "CMOSB passes MOSB after generation 10 and stays ahead; its front is better, most "
                                  "at low utility loss (Fig. 11b)"}
REFERENCE = (1.0, 1.0, 1.0)
COUNTS = ("encryptions", "decryptions", "additions", "products")
PAPER_BOUNDS = {"privacy_leakage": 0.6, "training_cost": 100.0}  # Section VII-D, on Synthetic1


def mosb_meets_bound(mosb: dict[int, pd.DataFrame], bounds: dict[str, float]) -> dict[str, Any]:
    """How much of the unconstrained search each bound cuts away, per seed: the share of MOSB's evaluations that
    meet it.  A bound every evaluation meets binds nothing: the constrained search sees no violation, so with the
    same seed it makes MOSB's search again, evaluation for evaluation."""
    out: dict[str, Any] = {}
    for objective, bound in bounds.items():
        shares = {str(s): float(feasible(f, {objective: ("<=", bound)}).mean()) for s, f in mosb.items()}
        out[f"{objective} <= {bound:g}"] = {
            "share_per_seed": shares, "largest_value_per_seed": {str(s): float(f[objective].max())
                                                                  for s, f in mosb.items()},
            "binds": any(v < 1.0 for v in shares.values())}
    return out


def flood_share(frame: pd.DataFrame) -> dict[str, float]:
    """The share of eps_c that the passive party's flooding adds: one addition per result ciphertext, and the
    active party decrypts each result once, so floods = decryptions (plain and BFV count alike)."""
    cost = frame["training_cost"].to_numpy(dtype=float)
    priced = cost > 0  # a configuration without federated trees encrypts nothing: eps_c = 0, no share to take
    share = frame["decryptions"].to_numpy(dtype=float)[priced] * REFERENCE_OP_TIMES.addition / cost[priced]
    return {"n_rows": int(priced.sum()), "n_rows_without_cost": int((~priced).sum()),
            "median": float(np.median(share)), "min": float(share.min()), "max": float(share.max())}


@dataclass(frozen=True)
class SeedCell(Cell):
    """One workflow run: ``dataset`` x ``variant`` x ``seed`` with the grid's shared settings."""

    dataset: str
    variant: str
    run_seed: int
    population: int
    generations: int
    bo_trials: int | None
    attack_sample: int
    max_leakage: float
    max_cost: float
    he: str = "plain"

    def config(self) -> dict[str, Any]:
        return {**asdict(self), "op_times": REFERENCE_OP_TIMES.as_dict(), "kind": "cmosb_seed_cell"}

    @property
    def coordinates(self) -> tuple[int | str, ...]:
        return (self.dataset, self.variant, self.run_seed)

    @property
    def root_seed(self) -> int:
        return self.run_seed

    @property
    def label(self) -> str:
        return f"{self.dataset} {self.variant} seed {self.run_seed}"

    @property
    def cost(self) -> float:  # Table IV's cells also run the baselines: about twice the trainings
        return 2.0 if self.variant == "table4" else 1.0

    def settings(self) -> CMOSBSettings:
        common = dict(dataset=self.dataset, population=self.population, generations=self.generations,
                      seed=self.run_seed, n_sample=self.attack_sample, he=self.he, op_times="reference")
        if self.variant == "table4":
            return CMOSBSettings(**common, bo_trials=self.bo_trials)
        bound, handling = self.variant.split("_")
        limit = {"max_leakage": self.max_leakage} if bound == "leakage" else {"max_cost": self.max_cost}
        return CMOSBSettings(**common, baselines=(), constraint_handling=handling, **limit)

    def work_dir(self, work: Path) -> Path:
        return work / self.dataset / self.variant / f"seed{self.run_seed}"


class RunCell:
    """``run_cell`` of the grid: the workflow run of a cell, its rows without the timing columns."""

    def __init__(self, work: Path, num_cpus: int | None) -> None:
        self.work, self.num_cpus = work, num_cpus

    def __call__(self, cell: SeedCell) -> CellResult:
        print(f"{cell.label}: starting ({cell.work_dir(self.work)})", flush=True)
        frame = run_cmosb(cell.settings().check(), cell.work_dir(self.work), num_cpus=self.num_cpus)
        rows = frame.drop(columns=list(TIMING)).to_dict("records")
        return CellResult([{k: _plain(v) for k, v in r.items()} for r in rows],
                          [{k: _plain(r[k]) for k in TIMING} for r in frame.to_dict("records")])


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def search_rows(cell: SeedCell, work: Path) -> tuple[pd.DataFrame, int] | None:
    """The CMOSB search of a cell that is not in the store (yet): its rows and its complete generations.

    A finished search is ``runs/cmosb.parquet`` in the cell's directory (a ``table4`` cell
    writes it before its baselines run).  A search still running (or interrupted) is read from
    its Tune experiment: each finished trial's metrics from Tune's records, its generation and
    slot from NSGA2Search's own record (the searcher checkpoint Tune keeps beside it), and only
    the generations whose every member finished and whose survivors the record holds.
    """
    from raytune_fed.workflows.cmosb._run import plan

    out = cell.work_dir(work)
    if (out / "runs" / "cmosb.parquet").exists():
        frame = pd.read_parquet(out / "runs" / "cmosb.parquet")
        return frame, int(frame.generation.max()) + 1
    path = out / "tune" / "cmosb"
    if not path.is_dir():
        return None
    from ray.tune import ExperimentAnalysis

    run = next(r for r in plan(cell.settings(), binary=load_task(cell.dataset).binary) if r.method == "cmosb")
    searcher = run.make_searcher()
    try:
        searcher.restore_from_dir(str(path))
        trials = ExperimentAnalysis(str(path.resolve())).trials
    except Exception:  # noqa: BLE001 - a run that has not written its first checkpoint yet
        return None
    members = searcher.members()
    rows = []
    for trial in trials:
        m = trial.last_result or {}
        if "utility_loss" not in m or trial.trial_id not in members:
            continue
        rows.append({"method": "cmosb", "run": "cmosb", "generation": members[trial.trial_id][0],
                     "slot": members[trial.trial_id][1], **{k: m[f"x_{k}"] for k in PARAMETERS},
                     **{k: m[k] for k in OBJECTIVES}, **{k: m[k] for k in COUNTS}})
    history = searcher.core.population_history()
    frame = pd.DataFrame(rows)
    if not len(frame):
        return None
    sizes = frame.groupby("generation").size()
    complete = 0
    while complete < len(history) and sizes.get(complete, 0) == cell.population:
        complete += 1
    frame = frame[frame.generation < complete].copy()
    last: dict[tuple[int, int], int] = {}
    for g, survivors in enumerate(history[:complete]):
        for member in survivors:
            last[member] = g
    frame["in_population_until"] = [last.get((g, i), g - 1) for g, i in zip(frame.generation, frame.slot)]
    return frame.sort_values(["generation", "slot"]).reset_index(drop=True), complete


# ---------------------------------------------------------------------------------------------- scoring
def _scaled(frame: pd.DataFrame, low: np.ndarray, span: np.ndarray) -> np.ndarray:
    span = np.where(span > 0, span, 1.0)
    return (frame[list(OBJECTIVES)].to_numpy(dtype=float) - low) / span


READINGS = {"all_rows": "min-max over every configuration any method evaluated on the dataset (the workflow's "
                         "summary.json; our reading of 'we normalize the three objectives for each dataset')",
            "natural": "utility loss and privacy leakage on their own [0, 1] scale, training cost divided by the "
                       "largest cost any method reached",
            "own_rows": "each method min-max scaled over its own rows (a check: not comparable between methods)"}


def readings(points: dict[str, np.ndarray], low: np.ndarray, high: np.ndarray) -> dict[str, dict[str, float]]:
    """Each method's hypervolume (reference (1, 1, 1)) under every normalisation of :data:`READINGS`.

    ``points`` are a method's objective rows (all of them, or its non-dominated ones: every
    reading scales each objective by an increasing map, so the front and its hypervolume are
    the same); ``low`` / ``high`` the objectives' range over every method's rows.
    """
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    out: dict[str, dict[str, float]] = {r: {} for r in READINGS}
    for method, rows in points.items():
        rows = np.asarray(rows, dtype=float).reshape(-1, len(OBJECTIVES))
        own_low, own_high = rows.min(axis=0), rows.max(axis=0)
        scaled = {"all_rows": (low, high - low), "natural": (np.zeros(3), np.array([1.0, high[1], 1.0])),
                  "own_rows": (own_low, own_high - own_low)}
        for reading, (lo, span) in scaled.items():
            out[reading][method] = hypervolume((rows - lo) / np.where(span > 0, span, 1.0), REFERENCE)
    return out


def table4(frames: dict[int, pd.DataFrame]) -> dict[str, Any]:
    """Each method's hypervolume per seed under the three normalisations, and their mean and spread."""
    per_seed: dict[str, dict[str, dict[int, float]]] = {r: {} for r in READINGS}
    counts: dict[str, dict[int, int]] = {}
    out_es: dict[str, list[dict[str, float]]] = {}
    for seed, frame in frames.items():
        values = frame[list(OBJECTIVES)].to_numpy(dtype=float)
        points = {m: frame.loc[frame.method == m, list(OBJECTIVES)].to_numpy(dtype=float) for m in METHOD_ORDER
                  if (frame.method == m).any()}
        for method, rows in points.items():
            counts.setdefault(method, {})[seed] = len(rows)
        if "es" in points:  # ES's few fixed settings: their objectives explain its swing between seeds
            out_es[str(seed)] = [dict(zip(OBJECTIVES, map(float, r))) for r in points["es"]]
        for reading, hv in readings(points, values.min(axis=0), values.max(axis=0)).items():
            for method, value in hv.items():
                per_seed[reading].setdefault(method, {})[seed] = value
    out: dict[str, Any] = {"n_evaluated": counts, "readings": {}, "reading_definitions": READINGS,
                           "cmosb_minus_paired": {}, "es_objectives": out_es}
    for reading, methods in per_seed.items():
        out["readings"][reading] = {m: _spread(hv) for m, hv in methods.items()}
        # CMOSB minus each baseline, paired by seed (the same trainings' seeds and normalisation)
        cmosb = methods.get("cmosb", {})
        out["cmosb_minus_paired"][reading] = {m: _spread({s: cmosb[s] - v for s, v in hv.items() if s in cmosb},
                                                         paired=True)
                                              for m, hv in methods.items() if m != "cmosb" and set(hv) & set(cmosb)}
    return out


def _spread(by_seed: dict[int, float], paired: bool = False) -> dict[str, Any]:
    """Values per seed with their mean and standard deviation (and, for differences, how many are > 0)."""
    values = np.array(list(by_seed.values()), dtype=float)
    out = {"per_seed": {str(s): float(v) for s, v in by_seed.items()}, "mean": float(values.mean()),
           "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0}
    return {**out, "seeds_ahead": int((values > 0).sum()), "seeds": len(values)} if paired else out


def figures(mosb: dict[int, pd.DataFrame], constrained: dict[str, dict[int, pd.DataFrame]], objective: str,
            bound: float) -> dict[str, Any]:
    """Figure 10 (hypervolume by generation, two ways) and Figure 11 (final 2-D fronts) for one constraint."""
    searches = {name: runs for name, runs in {"mosb": mosb, **constrained}.items() if runs}
    pooled = pd.concat([f for runs in searches.values() for f in runs.values()], ignore_index=True)
    values = pooled[list(OBJECTIVES)].to_numpy(dtype=float)
    low, span = values.min(axis=0), values.max(axis=0) - values.min(axis=0)
    out: dict[str, Any] = {"bound": bound, "normalised_over": {n: [float(lo), float(lo + s)] for n, lo, s in
                                                              zip(OBJECTIVES, low, span)}, "searches": {}}
    for name, runs in searches.items():
        curves = {"so_far": {}, "population": {}}
        fronts, n_feasible = {}, {}
        for seed, frame in runs.items():
            scaled = frame.copy()
            scaled[list(OBJECTIVES)] = _scaled(frame, low, span)
            ok = feasible(frame, {objective: ("<=", bound)})
            curves["so_far"][seed] = hypervolume_by_generation(scaled, ok)
            curves["population"][seed] = hypervolume_by_generation(scaled, ok, population=True)
            pts = frame.loc[ok, ["utility_loss", objective]].to_numpy(dtype=float)
            front = pts[pareto_mask(pts)] if len(pts) else pts
            fronts[str(seed)] = front[np.argsort(front[:, 0])].tolist() if len(front) else []
            n_feasible[str(seed)] = int(ok.sum())
        entry: dict[str, Any] = {"n_evaluated": {str(s): len(f) for s, f in runs.items()}, "n_feasible": n_feasible,
                                 "fronts": fronts}
        entry["generations_reached"] = {str(s): len(c) for s, c in curves["so_far"].items()}
        for kind, by_seed in curves.items():
            # a search still running has fewer generations: each generation's mean is over the seeds that reached it
            depth = max(len(c) for c in by_seed.values())
            matrix = np.full((len(by_seed), depth), np.nan)
            for i, c in enumerate(by_seed.values()):
                matrix[i, :len(c)] = c
            n = (~np.isnan(matrix)).sum(axis=0)
            finals = np.array([c[-1] for c in by_seed.values()])
            entry[kind] = {"per_seed": {str(s): c for s, c in by_seed.items()},
                           "mean": np.nanmean(matrix, axis=0).tolist(), "n_seeds": n.tolist(),
                           "std": [float(np.nanstd(matrix[:, g], ddof=1)) if n[g] > 1 else 0.0 for g in range(depth)],
                           "final_mean": float(finals.mean()),
                           "final_std": float(finals.std(ddof=1)) if len(finals) > 1 else 0.0}
        out["searches"][name] = entry
    # paired by seed: each constrained search minus MOSB, at the last generation both searches of that seed
    # reached, and after every generation (mean and sd over the seeds where both reached it)
    for name in constrained:
        if name not in out["searches"] or "mosb" not in out["searches"]:
            continue
        for kind in ("so_far", "population"):
            mine, base = out["searches"][name][kind]["per_seed"], out["searches"]["mosb"][kind]["per_seed"]
            pairs = {s: (mine[s], base[s]) for s in mine if s in base}
            d = np.array([a[min(len(a), len(b)) - 1] - b[min(len(a), len(b)) - 1] for a, b in pairs.values()])
            if not len(d):
                continue
            out["searches"][name][f"{kind}_final_minus_mosb"] = {
                "seeds_compared": list(pairs), "at_generation": {s: min(len(a), len(b)) for s, (a, b) in pairs.items()},
                "per_seed": d.tolist(), "mean": float(d.mean()), "std": float(d.std(ddof=1)) if len(d) > 1 else 0.0,
                "seeds_ahead": int((d > 0).sum()), "seeds": len(d)}
            depth = max(min(len(a), len(b)) for a, b in pairs.values())
            by_generation = []
            for g in range(depth):
                dg = np.array([a[g] - b[g] for a, b in pairs.values() if min(len(a), len(b)) > g])
                by_generation.append({"n_seeds": len(dg), "mean": float(dg.mean()),
                                      "std": float(dg.std(ddof=1)) if len(dg) > 1 else 0.0,
                                      "seeds_ahead": int((dg > 0).sum())})
            out["searches"][name][f"{kind}_minus_mosb_by_generation"] = by_generation
    return out


# ---------------------------------------------------------------------------------------------- plots
COLOURS = {"mosb": "tab:blue", "leakage_penalty": "tab:red", "cost_penalty": "tab:red",
           "leakage_domination": "tab:green", "cost_domination": "tab:green"}


def _label(name: str) -> str:
    return "MOSB" if name == "mosb" else f"CMOSB ({name.split('_')[1]})"


def plot(results: dict[str, Any], dataset: str, out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = []
    if not results:
        return names
    fig, axes = plt.subplots(2, len(results), figsize=(5.2 * len(results), 7), squeeze=False)
    for col, (objective, r) in enumerate(results.items()):
        for row, kind in enumerate(("so_far", "population")):
            ax = axes[row][col]
            for name, s in r["searches"].items():
                mean, std = np.array(s[kind]["mean"]), np.array(s[kind]["std"])
                x = np.arange(1, len(mean) + 1)
                ax.plot(x, mean, c=COLOURS[name], label=f"{_label(name)}, {len(s['n_evaluated'])} seed(s)")
                ax.fill_between(x, mean - std, mean + std, color=COLOURS[name], alpha=0.15, lw=0)
            ax.set_xlabel("generation")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel("hypervolume of feasible rows")
            what = "all evaluations so far" if kind == "so_far" else "current population"
            ax.set_title(f"{objective.replace('_', ' ')} <= {r['bound']:g}: {what}", fontsize=9)
            ax.legend(fontsize=8)
    fig.suptitle(f"{dataset}: mean ± sd over the seeds\nthat reached each generation", fontsize=9)
    fig.tight_layout()
    name = f"cmosb_seeds_{dataset}_figure10.png"
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    names.append(name)
    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.8), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, (objective, r) in zip(axes[0], results.items()):
        for name, s in r["searches"].items():
            for i, (seed, front) in enumerate(s["fronts"].items()):
                f = np.asarray(front).reshape(-1, 2)
                if len(f):
                    ax.step(f[:, 0], f[:, 1], where="post", c=COLOURS[name], ls=styles[i % len(styles)], lw=1,
                            label=f"{_label(name)} seed {seed}")
        ax.axhline(r["bound"], c="grey", lw=0.8, ls="--")
        ax.set_xlabel("utility loss")
        ax.set_ylabel(objective.replace("_", " "))
        ax.set_title(f"feasible fronts after the last generation, {objective.replace('_', ' ')} <= {r['bound']:g}",
                     fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    name = f"cmosb_seeds_{dataset}_figure11.png"
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    names.append(name)
    return names


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="synthetic1")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--population", type=int, default=20)
    p.add_argument("--generations", type=int, default=40)
    p.add_argument("--bo-trials", type=int, default=None, help="per objective (default: population x generations / 3)")
    p.add_argument("--attack-sample", type=int, default=1000)
    p.add_argument("--max-leakage", type=float, default=PAPER_BOUNDS["privacy_leakage"])
    p.add_argument("--max-cost", type=float, default=0.5, help="seconds of reference-priced BFV operations")
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--score-only", action="store_true", help="score the cells stored so far; run nothing")
    p.add_argument("--finished-only", action="store_true",
                   help="score only searches that ran every generation (leave out a search still running)")
    p.add_argument("--work", default="results/bench_cmosb_seeds")
    p.add_argument("--out-dir", default="results/bench_cmosb_seeds_out",
                   help="where bench_cmosb_seeds_<dataset>.json and the figures go")
    args = p.parse_args(argv)
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        p.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    if not datasets or not variants or set(variants) - set(VARIANTS) or not seeds or min(seeds) < 0:
        p.error(f"--variants takes some of {','.join(VARIANTS)}; --datasets and --seeds (>= 0) at least one each")
    if len(set(seeds)) < len(seeds):
        p.error(f"--seeds lists a seed twice: {args.seeds!r}")
    if args.population < 2 or args.generations < 1 or args.attack_sample < 2 or not 0 < args.max_leakage <= 1 \
            or not args.max_cost > 0:
        p.error("need --population >= 2, --generations >= 1, --attack-sample >= 2, --max-leakage in (0, 1], "
                "--max-cost > 0")
    cells = [SeedCell(d, v, s, args.population, args.generations, args.bo_trials, args.attack_sample,
                      args.max_leakage, args.max_cost) for d in datasets for v in variants for s in seeds]
    # variant by variant, every seed of one before the next: an interrupted run has whole variants
    for cell in cells:
        cell.settings().check()
    work = Path(args.work).resolve()
    store = ResultStore(work / "store")
    start, cpu0 = time.perf_counter(), os.times()
    incomplete = None
    if not args.score_only:
        try:
            run_cells(cells, RunCell(work, args.num_cpus), store, InProcessExecutor(), progress=make_progress(),
                      name="cmosb seeds")
        except GridIncompleteError as exc:
            incomplete = str(exc)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for dataset in datasets:
        frames: dict[tuple[str, int], pd.DataFrame] = {}
        for cell in (c for c in cells if c.dataset == dataset):
            if store.inspect(cell.key).state == "done":
                frames[cell.variant, cell.run_seed] = pd.DataFrame(list(store.load(cell.key).rows))
        report: dict[str, Any] = {
            "benchmark": "cmosb_seeds", "dataset": dataset, "revision": _revisions.current(),
            "command": "python experiments/bench_cmosb_seeds.py" + "".join(
                f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                if k not in ("work", "out_dir", "score_only", "finished_only", "num_cpus") and v != p.get_default(k)),
            "settings": {k: v for k, v in vars(args).items() if k not in ("work", "out_dir", "score_only")},
            "op_times": REFERENCE_OP_TIMES.as_dict(), "reference_point": list(REFERENCE),
            "cells_done": sorted(f"{v} seed {s}" for v, s in frames),
            "cells_missing": sorted(c.label for c in cells if c.dataset == dataset
                                    and (c.variant, c.run_seed) not in frames),
            "incomplete": incomplete, "wall_seconds_this_invocation": time.perf_counter() - start,
            "cpu_seconds_this_invocation": sum(os.times()[:4]) - sum(cpu0[:4]), "load_average": os.getloadavg(),
            "trial_seconds_note": "fit and attack seconds are per trial wall time inside Ray workers, in the store's "
                                  "timing records", "machine": platform.machine(), "python": platform.python_version()}
        table = {s: f for (v, s), f in frames.items() if v == "table4"}
        if table:
            report["table4"] = {**table4(table), "paper": PAPER_TABLE4.get(dataset)}
        # every CMOSB search there is, finished or not: a cell in the store, a table4 cell whose search finished
        # before its baselines, a search still running (its complete generations)
        searches: dict[str, dict[int, pd.DataFrame]] = {}
        partial: dict[str, int] = {}
        for cell in (c for c in cells if c.dataset == dataset):
            if (cell.variant, cell.run_seed) in frames:
                frame = frames[cell.variant, cell.run_seed]
                frame = frame[frame.method == "cmosb"].reset_index(drop=True)
            else:
                found = search_rows(cell, work)
                if found is None:
                    continue
                frame, reached = found
                if reached < cell.generations:
                    partial[cell.label] = reached
                    if args.finished_only:
                        continue
            searches.setdefault("mosb" if cell.variant == "table4" else cell.variant, {})[cell.run_seed] = frame
        report["searches_partial_generations"] = partial
        report["partial_searches_scored"] = bool(partial) and not args.finished_only
        every = [f for runs in searches.values() for f in runs.values()] + [f[f.method != "cmosb"]
                                                                            for f in table.values()]
        if every:
            report["flood_share_of_training_cost"] = flood_share(pd.concat(every, ignore_index=True))
        if searches.get("mosb"):
            report["mosb_meets_bound"] = mosb_meets_bound(searches["mosb"], {
                "privacy_leakage": args.max_leakage, "training_cost": args.max_cost})
            report["mosb_meets_paper_bound"] = mosb_meets_bound(searches["mosb"], PAPER_BOUNDS)
        results = {}
        for objective, (penalty, domination) in CONSTRAINED.items():
            if searches.get("mosb") and (searches.get(penalty) or searches.get(domination)):
                bound = args.max_leakage if objective == "privacy_leakage" else args.max_cost
                results[objective] = figures(searches["mosb"], {penalty: searches.get(penalty, {}),
                                                                domination: searches.get(domination, {})},
                                             objective, bound)
                results[objective]["paper"] = PAPER_FIGURES[objective]
        report["figures_10_11"] = results
        report["figure_files"] = plot(results, dataset, out_dir)
        path = out_dir / f"bench_cmosb_seeds_{dataset}.json"
        path.write_text(json.dumps(report, indent=1))
        _print(report)
        print(f"wrote {path}")
    if incomplete:
        print(f"incomplete: {incomplete}")


def _print(report: dict[str, Any]) -> None:
    t = report.get("table4")
    if t:
        for reading, methods in t["readings"].items():
            print(f"{report['dataset']} Table IV ({reading}): " + "  ".join(
                f"{m} {v['mean']:.3f}±{v['std']:.3f}" for m, v in methods.items()) + "; CMOSB minus, paired: " + "  ".join(
                f"{m} {d['mean']:+.3f}±{d['std']:.3f} ({d['seeds_ahead']} of {d['seeds']})"
                for m, d in t["cmosb_minus_paired"].get(reading, {}).items()))
    for objective, r in report["figures_10_11"].items():
        print(f"{objective} <= {r['bound']:g}: " + "  ".join(
            f"{n} final {s['so_far']['final_mean']:.3f}±{s['so_far']['final_std']:.3f} "
            f"(population {s['population']['final_mean']:.3f})" for n, s in r["searches"].items()))
    for key in ("mosb_meets_bound", "mosb_meets_paper_bound"):
        for bound, m in report.get(key, {}).items():
            print(f"MOSB evaluations meeting {bound}: " + " ".join(
                f"{v:.1%}" for v in m["share_per_seed"].values()) + ("" if m["binds"] else " (binds nothing)"))


if __name__ == "__main__":
    main()
