"""Benchmark: Figures 10 and 11 of the CMOSB paper - constrained CMOSB against unconstrained MOSB.

On Synthetic1 the workflow (:func:`run_cmosb`, NSGA2Search as a Tune searcher, no
baselines) runs three times with the same seed: without constraints (MOSB), with a
privacy-leakage bound and with a training-cost bound (the paper: leakage <= 0.6, cost <=
100 s, penalty 20; our cost bound is given in the same seconds of calibrated BFV
operations as eps_c, so pick it from the cost range of this machine, ``--max-cost``).
For each constraint, both runs are scored on the constrained problem: objectives
normalised over the rows of both runs, hypervolume against (1, 1, 1) of the feasible
rows only, after every generation (Figure 10), and the 2-D fronts of feasible rows,
utility loss against the constrained objective (Figure 11).  Writes the JSON to
``--out`` and the PNGs next to it.

    python experiments/bench_cmosb_constrained.py                       # the paper's 20 x 40
    python experiments/bench_cmosb_constrained.py --population 10 --generations 8

MOSB is the same search as Table IV's CMOSB run: ``--mosb-from`` takes it from a finished
``bench_cmosb_table4.py`` run instead of running it again.  All variants price operations
with one calibration (that run's, or one made at the start), so their costs compare.  The
Tune runs go to ``--work``; rerunning the same command resumes them.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from raytune_fed.metrics import pareto_mask
from raytune_fed.workflows.cmosb import (
    CMOSBSettings, feasible, hypervolume_by_generation, normalise, run_cmosb)

PAPER = {"privacy_leakage": "CMOSB grows faster in the first generations and ends above MOSB; its front has "
                            "about 3 % lower leakage at the same utility loss (Fig. 11a)",
         "training_cost": "CMOSB passes MOSB after generation 10 and stays ahead; its front is better, most "
                          "at low utility loss (Fig. 11b)"}


VARIANT_OF = {"max_leakage": "privacy_leakage", "max_cost": "training_cost"}


def _compare(mosb: pd.DataFrame, cmosb: pd.DataFrame, objective: str, bound: float) -> dict:
    both = pd.concat([mosb.assign(variant="mosb"), cmosb.assign(variant="cmosb")], ignore_index=True)
    scaled = normalise(both)
    ok = feasible(both, {objective: ("<=", bound)})
    out: dict = {"bound": bound, "variants": {}}
    for variant in ("mosb", "cmosb"):
        mine = (both["variant"] == variant).to_numpy()
        curve = hypervolume_by_generation(scaled[mine], ok[mine])
        pts = both.loc[mine & ok, ["utility_loss", objective]].to_numpy(dtype=float)
        front = pts[pareto_mask(pts)] if len(pts) else pts
        front = front[np.argsort(front[:, 0])]
        out["variants"][variant] = {"n_evaluated": int(mine.sum()), "n_feasible": int((mine & ok).sum()),
                                    "hypervolume_by_generation": curve,
                                    "final_hypervolume": curve[-1] if curve else 0.0,
                                    "front_utility_loss_vs_" + objective: front.tolist()}
    return out


def _plot(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"mosb": "tab:blue", "cmosb": "tab:red"}
    names = []
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, (objective, r) in zip(axes[0], results.items()):
        for variant, v in r["variants"].items():
            curve = v["hypervolume_by_generation"]
            ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, c=colours[variant], label=variant.upper())
        ax.set_xlabel("generation")
        ax.set_ylabel("hypervolume of feasible rows")
        ax.set_title(f"{objective.replace('_', ' ')} <= {r['bound']:g}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "figure10_hypervolume_by_generation.png", dpi=110)
    plt.close(fig)
    names.append("figure10_hypervolume_by_generation.png")
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, (objective, r) in zip(axes[0], results.items()):
        for variant, v in r["variants"].items():
            front = np.asarray(v["front_utility_loss_vs_" + objective]).reshape(-1, 2)
            if len(front):
                ax.step(front[:, 0], front[:, 1], where="post", c=colours[variant], marker="o", ms=3,
                        label=variant.upper())
        ax.axhline(r["bound"], c="grey", ls="--", lw=0.8)
        ax.set_xlabel("utility loss")
        ax.set_ylabel(objective.replace("_", " "))
        ax.set_title(f"feasible fronts, {objective.replace('_', ' ')} <= {r['bound']:g}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "figure11_fronts.png", dpi=110)
    plt.close(fig)
    names.append("figure11_fronts.png")
    return names


def _finished_mosb(work: Path, common: dict, parser: argparse.ArgumentParser) -> tuple[pd.DataFrame, dict]:
    """The unconstrained CMOSB run of a finished Table IV benchmark, if it asked for the same search."""
    try:
        recorded = json.loads((work / "settings.json").read_text())
        frame = pd.read_parquet(work / "runs" / "cmosb.parquet")
    except (OSError, ValueError) as exc:
        parser.error(f"--mosb-from {work}: no finished CMOSB run there ({exc})")
    theirs = recorded["settings"]
    differ = sorted(k for k in ("dataset", "population", "generations", "seed", "he", "n_sample")
                    if theirs.get(k) != common[k])
    if theirs.get("max_cost") is not None or theirs.get("max_leakage") is not None:
        differ.append("constraints")
    if differ:
        parser.error(f"--mosb-from {work}: that run differs in {', '.join(differ)}")
    frame.insert(0, "dataset", common["dataset"])
    return frame, recorded["op_times"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="synthetic1")
    p.add_argument("--population", type=int, default=20)
    p.add_argument("--generations", type=int, default=40)
    p.add_argument("--max-leakage", type=float, default=0.6)
    p.add_argument("--max-cost", type=float, default=5.0, help="seconds of calibrated BFV operations (eps_c)")
    p.add_argument("--attack-sample", type=int, default=1000)
    p.add_argument("--he", default="plain")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--constraints", default="privacy_leakage,training_cost",
                   help="which constrained runs (Figure 10a/11a: privacy_leakage, 10b/11b: training_cost)")
    p.add_argument("--mosb-from", default=None, metavar="DIR",
                   help="take MOSB from a finished run of bench_cmosb_table4 (its --work/<dataset>) with the same "
                        "dataset, population, generations, seed, backend and attack sample, and price every "
                        "variant's operations with that run's calibrated seconds")
    p.add_argument("--work", default="results/bench_cmosb_constrained")
    p.add_argument("--out", default="results/bench_cmosb_constrained.json")
    args = p.parse_args()
    wanted = [c.strip() for c in args.constraints.split(",")]
    if not wanted or set(wanted) - set(VARIANT_OF.values()):
        p.error(f"--constraints takes privacy_leakage and/or training_cost, got {args.constraints!r}")

    common = dict(dataset=args.dataset, population=args.population, generations=args.generations, baselines=(),
                  he=args.he, seed=args.seed, n_sample=args.attack_sample)
    frames, seconds = {}, {}
    if args.mosb_from:
        frames["mosb"], op_times = _finished_mosb(Path(args.mosb_from), common, p)
        seconds["mosb"] = 0.0
    else:  # calibrate once: every variant's training cost in the same seconds per operation
        from raytune_fed.crypto import calibrate

        op_times = calibrate().as_dict()
    variants = {"max_leakage": CMOSBSettings(**common, max_leakage=args.max_leakage, op_times=op_times),
                "max_cost": CMOSBSettings(**common, max_cost=args.max_cost, op_times=op_times)}
    variants = {k: v for k, v in variants.items() if VARIANT_OF[k] in wanted}
    if "mosb" not in frames:
        variants = {"mosb": CMOSBSettings(**common, op_times=op_times), **variants}
    for name, settings in variants.items():
        settings.check()
        start = time.perf_counter()
        frames[name] = run_cmosb(settings, Path(args.work) / name, num_cpus=args.num_cpus)
        seconds[name] = time.perf_counter() - start
    bounds = {"privacy_leakage": args.max_leakage, "training_cost": args.max_cost}
    results = {VARIANT_OF[v]: _compare(frames["mosb"], frames[v], VARIANT_OF[v], bounds[VARIANT_OF[v]])
               for v in variants if v != "mosb"}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "cmosb_constrained", "machine": platform.machine(), "python": platform.python_version(),
              "command": "python experiments/bench_cmosb_constrained.py" + "".join(
                  f" --{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                  if k not in ("work", "out") and v != p.get_default(k)),
              "settings": vars(args), "paper": PAPER, "wall_seconds_this_invocation": seconds,
              "cost_range": [float(frames["mosb"].training_cost.min()), float(frames["mosb"].training_cost.max())],
              "leakage_range": [float(frames["mosb"].privacy_leakage.min()),
                                float(frames["mosb"].privacy_leakage.max())],
              "results": results}
    report["figures"] = _plot(results, out.parent)
    out.write_text(json.dumps(report, indent=2))
    for objective, r in results.items():
        print(f"{objective} <= {r['bound']:g}: " + "  ".join(
            f"{v.upper()} final HV {x['final_hypervolume']:.3f} ({x['n_feasible']}/{x['n_evaluated']} feasible)"
            for v, x in r["variants"].items()))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
