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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.crypto import REFERENCE_OP_TIMES
from raytune_fed.grid import Cell, CellResult, GridIncompleteError, InProcessExecutor, make_progress, run_cells
from raytune_fed.store import ResultStore
from raytune_fed.workflows.cmosb import OBJECTIVES, PARAMETERS, CMOSBSettings, load_task, run_cmosb
from raytune_fed.workflows.cmosb._scoring import (PAPER_BOUNDS, REFERENCE, figures, flood_share, mosb_meets_bound,
                                                  table4)

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

VARIANTS = ("table4", "leakage_penalty", "leakage_domination", "cost_penalty", "cost_domination")
CONSTRAINED = {"privacy_leakage": ("leakage_penalty", "leakage_domination"),
               "training_cost": ("cost_penalty", "cost_domination")}
TIMING = ("trial_id", "finished_at", "fit_seconds", "attack_seconds")
PAPER_TABLE4 = {"synthetic1": {"cmosb": 0.920, "es": 0.516, "gs": 0.826, "bo": 0.902},
                "default_credit": {"cmosb": 0.920, "es": 0.094, "gs": 0.746, "bo": 0.900},
                "synthetic2": {"cmosb": 0.879, "es": 0.368, "gs": 0.706, "bo": 0.805},
                "sensorless": {"cmosb": 0.968, "es": 0.134, "gs": 0.822, "bo": 0.964}}
PAPER_FIGURES = {"privacy_leakage": "CMOSB grows faster in the first generations and ends above MOSB; its front has "
                                    "about 3 % lower leakage at the same utility loss (Fig. 11a)",
                 "training_cost": "CMOSB passes MOSB after generation 10 and stays ahead; its front is better, most "
                                  "at low utility loss (Fig. 11b)"}
COUNTS = ("encryptions", "decryptions", "additions", "products")


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
    written = []
    with Benchmark("bench_cmosb_seeds", None, argv) as bench:
        _run(args, p, cells, datasets, work, store, bench, written)
    for path in written:
        print(f"wrote {path}")


def _run(args: argparse.Namespace, p: argparse.ArgumentParser, cells: list[SeedCell], datasets: list[str],
         work: Path, store: ResultStore, bench: Benchmark, written: list[Path]) -> None:
    """Run the cells still missing and score every dataset; each dataset's report is a record of ``bench``."""
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
            "dataset": dataset,
            "settings": {k: v for k, v in vars(args).items() if k not in ("work", "out_dir", "score_only")},
            "op_times": REFERENCE_OP_TIMES.as_dict(), "reference_point": list(REFERENCE),
            "cells_done": sorted(f"{v} seed {s}" for v, s in frames),
            "cells_missing": sorted(c.label for c in cells if c.dataset == dataset
                                    and (c.variant, c.run_seed) not in frames),
            "incomplete": incomplete,
            "trial_seconds_note": "fit and attack seconds are per trial wall time inside Ray workers, in the store's "
                                  "timing records"}
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
        headline = {f"table4_{m}_hv_mean": round(v["mean"], 3)
                    for m, v in report.get("table4", {}).get("readings", {}).get("all_rows", {}).items()}
        bench.also_write(path, f"bench_cmosb_seeds_{dataset}", report, headline)
        written.append(path)
        _print(report)
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
