"""What ODE's rungs decide: on the PU grid's splits, which rung settles the uPU basis, and with how many rows.

The uPU grid of Table 3 is 50 ridge penalties x two bases (``lm``: the features; ``gauss``:
Gaussian kernels on unlabelled rows).  A halving search chooses the basis in the rung whose
ranking drops the last configuration of the other basis, and the penalty within the surviving
basis in the rungs after it.  Per dataset x c x replication (the same
``derive(seed, dataset, "c=<c>", rep)`` streams as ``raytune-fed pu`` and
``experiments/bench_pu.py``, so the same split and TIcE prior as the grid's cells) this runs
ODE-IPM (self-paced, ``B = N``, balanced rungs: Table 2's variant) in process and records per
rung its rows, the configurations of each basis told in it and the rung's leader, the rows of
the rung that settles the basis (the last rung in which both bases were told), the pick and
its test AUC, whether the control variate was on and the prior.  Beside it, with the split's 100 configurations fitted on *all* training rows (no
halving), the configuration the same criterion ranks first (overall and among the ``gauss``
ones), the last rung that configuration reached in the search, and the best test AUC of each
basis.  The same is run under other readings (``--variants``): ``nocv`` (no control
variate), ``true_prior`` (uPU trained with the split's true prior), ``budget_4n``
(``B = 4 N``).

``python experiments/bench_pu_rungs.py --datasets spambase --c 0.2`` writes ``--out``
(default ``experiments/measured/bench_pu_rungs.json``); in process, a few CPU seconds a split.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

VARIANTS = {"shipped": {}, "nocv": {"control_variate": False}, "true_prior": {"prior": "true"},
            "budget_4n": {"budget_factor": 4.0}}


def _rungs(trace: list, configs: list) -> list[dict]:
    """Per rung: rows, configurations told per basis, the best criterion value per basis, and how many
    configurations tie with the rung's best (to 1e-9) and their penalties (``lambda``)."""
    out = []
    for t in sorted({rung for _, rung, _, _ in trace}):
        told = [(i, n, v) for i, rung, n, v in trace if rung == t]
        entry: dict[str, Any] = {"rung": t, "n_rows": told[0][1]}
        for basis in ("lm", "gauss"):
            values = [-v for i, _, v in told if configs[i]["basis"] == basis and np.isfinite(v)]
            entry[f"n_{basis}"] = sum(configs[i]["basis"] == basis for i, _, _ in told)
            entry[f"best_{basis}"] = max(values) if values else None
        top = max(-v for _, _, v in told if np.isfinite(v)) if any(np.isfinite(v) for _, _, v in told) else None
        tied = [i for i, _, v in told if top is not None and np.isfinite(v) and abs(-v - top) <= 1e-9]
        entry["n_tied_best"] = len(tied)
        entry["tied_best"] = sorted(f"{configs[i]['basis']} {configs[i]['lambda']:.3g}" for i in tied)
        out.append(entry)
    return out


def run_split(dataset: str, c: float, rep: int, seed: int, variant: str) -> dict:
    from raytune_fed.metrics import auc
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu import PUGridSettings, estimate_prior
    from raytune_fed.workflows.pu._grid import PUCell, cell_split, ode_settings
    from raytune_fed.workflows.pu._ode import (FIT_FAILURES, ValidationCriterion, build_model, configuration_set,
                                               run_ode, search_budget)

    change = dict(VARIANTS[variant])
    prior_source = change.pop("prior", "tice")
    cell = PUCell(dataset, c, rep, "ode", "ipm", "selfpaced", True,
                  settings=PUGridSettings(datasets=(dataset,), cs=(c,), seed=seed))
    split, cell_seed = cell_split(cell), cell.seed()
    settings = replace(ode_settings(cell), **change)
    prior = estimate_prior(split, cell_seed) if prior_source == "tice" else float(split.unlabelled_prior())
    configs = configuration_set(settings.learners)
    started = time.process_time()
    result = run_ode(split, settings, prior=prior, seed=cell_seed)
    cpu = time.process_time() - started
    rungs = _rungs(result.trace, configs)
    # the rung whose ranking dropped the last configuration of the other basis: the last with both told
    one = next((k for k, r in enumerate(rungs) if min(r["n_lm"], r["n_gauss"]) == 0), None)
    decided = None if not one else rungs[one - 1]
    # no halving: every configuration fitted on all training rows, ranked by the same criterion
    criterion = ValidationCriterion(split, settings, seed=cell_seed)
    model_seed = seed_int(derive(cell_seed, "ode", "models"))
    full = []
    for config in configs:
        try:
            model = build_model(config, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
            full.append((config["basis"], criterion(model), auc(split.y_test, model.decision_function(split.X_test)),
                         config["lambda"], configs.index(config)))
        except FIT_FAILURES:
            continue
    top = max(full, key=lambda f: f[1])
    top_gauss = max((f for f in full if f[0] == "gauss"), key=lambda f: f[1], default=None)
    return {"dataset": dataset, "c": c, "rep": rep, "variant": variant, "prior": prior,
            "true_prior": float(split.unlabelled_prior()), "control_variate_on": criterion.uses_control_variate,
            "n_labelled_train": int(split.s_train.sum()), "n_labelled_val": int(split.s_val.sum()),
            "n_train": split.n_train, "budget": search_budget(split, settings),
            "pick": result.config, "pick_criterion": result.value, "pick_test_auc": result.test_auc,
            "settled_basis": None if one is None else ("lm" if rungs[one]["n_lm"] else "gauss"),
            "decided_rung": None if decided is None else decided["rung"],
            "decided_rows": None if decided is None else decided["n_rows"],
            "rungs": rungs, "search_cpu_seconds": cpu,
            "full_fit_pick_basis": top[0], "full_fit_pick_lambda": top[3], "full_fit_pick_test_auc": top[2],
            "full_fit_pick_last_rung": max((t for i, t, _, _ in result.trace if i == top[4]), default=None),
            "full_fit_gauss_pick_lambda": None if top_gauss is None else top_gauss[3],
            "full_fit_gauss_pick_test_auc": None if top_gauss is None else top_gauss[2],
            "full_fit_best_lm": max((f[2] for f in full if f[0] == "lm"), default=None),
            "full_fit_best_gauss": max((f[2] for f in full if f[0] == "gauss"), default=None)}


def summarize(rows: list[dict]) -> list[dict]:
    """Per dataset x c x variant: test AUC (%) mean and sd, picks below 80, and the basis each search settled on."""
    out = []
    for key in dict.fromkeys((r["dataset"], r["c"], r["variant"]) for r in rows):
        group = [r for r in rows if (r["dataset"], r["c"], r["variant"]) == key]
        auc = np.array([r["pick_test_auc"] for r in group]) * 100
        full = np.array([r["full_fit_pick_test_auc"] for r in group]) * 100
        out.append({"dataset": key[0], "c": key[1], "variant": key[2], "n": len(group),
                    "test_auc_mean": float(auc.mean()), "test_auc_sd": float(auc.std(ddof=1)) if auc.size > 1 else None,
                    "n_below_80": int((auc < 80).sum()),
                    "settled_gauss": sum(r["settled_basis"] == "gauss" for r in group),
                    "decided_rows": sorted({r["decided_rows"] for r in group if r["decided_rows"] is not None}),
                    "below_80_settled_gauss": sum(r["settled_basis"] == "gauss" and r["pick_test_auc"] < 0.8
                                                  for r in group),
                    "control_variate_on": sum(r["control_variate_on"] for r in group),
                    "full_fit_pick_mean": float(full.mean()), "full_fit_pick_min": float(full.min())})
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=csv, default=["spambase"])
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=[0.2])
    p.add_argument("--variants", type=csv, default=list(VARIANTS))
    p.add_argument("--reps", type=int, default=10, help="replications (default: the paper's 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="experiments/measured/bench_pu_rungs.json")
    args = p.parse_args(argv)
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    out = Path(args.out)
    with Benchmark("bench_pu_rungs", out, argv) as bench:
        rows = []
        for dataset in args.datasets:
            for c in args.c:
                for variant in args.variants:
                    for rep in range(args.reps):
                        rows.append(run_split(dataset, c, rep, args.seed, variant))
                        r = rows[-1]
                        print(f"{dataset} c={c} {variant} rep={rep}: test AUC {r['pick_test_auc'] * 100:.1f}, basis "
                              f"{r['settled_basis']}, decided on {r['decided_rows']} rows, variate "
                              f"{'on' if r['control_variate_on'] else 'off'}, prior {r['prior']:.3f}", flush=True)
        report = {"settings": vars(args), "tables": summarize(rows), "rows": rows}
        bench.figures.update(report)
    for entry in report["tables"]:
        print(json.dumps(entry))


if __name__ == "__main__":
    main()
