"""ODE's halving against the peer a user would otherwise pick: Optuna's SuccessiveHalvingPruner, same inputs.

For every dataset x c x replication (the PU grid's split and TIcE prior: the same
``derive(seed, dataset, "c=<c>", rep)`` streams as ``raytune-fed pu``) both searches get the
same 100 uPU configurations of Table 3, the same nested row order (each configuration's
training rows grow by inclusion), the same criterion (IPM_PU with the shipped control variate,
:class:`~raytune_fed.workflows.pu._ode.ValidationCriterion`) and the same sample budget
``B = N`` (rows fed to learners over the whole search):

* ``ode`` - :func:`~raytune_fed.workflows.pu.run_ode`, self-paced schedule (the shipped search);
* ``optuna_sh`` - an Optuna study, ``GridSampler`` over the 100 configurations (each tried once,
  in a seeded order) and ``SuccessiveHalvingPruner(min_resource=r0, reduction_factor=2)``
  (``r0`` = ODE's first-rung rows, 2 the integer nearest ODE's ``1 / mu``); a trial reports the
  criterion after ``r0, 2 r0, 4 r0, ...`` rows and after all training rows, and is pruned when
  the pruner says so; a fit that fails (a prefix too small to fit on) reports nothing and the
  trial goes on to its next step.  Optuna has no sample budget, so the study counts rows before each fit and
  stops a trial whose next fit would exceed ``B`` (later trials then train nothing);
* ``optuna_sh_uncapped`` - the same study without the cap, as a user would run it (its rows are
  reported: what Optuna's halving spends on these inputs).  In both, the
  selection is the configuration with the best value among those that reached the highest
  step any trial reached (Optuna's ``best_trial`` covers completed trials only, which need every
  training row).

Both selections are refitted on all training rows and scored on the test rows.  Per split the
benchmark records test AUC, rows fed, the number of fits and CPU seconds (this process,
one thread).  ``python experiments/bench_pu_peers.py`` writes ``--out`` (default
``experiments/measured/bench_pu_peers.json``); finished splits are kept in ``--rows`` (JSON
lines), so an interrupted run resumes.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

DATASETS = ("twonorm", "spambase", "chess", "sat", "texture", "titanic")
METHODS = ("ode", "optuna_sh", "optuna_sh_uncapped")


def _optuna_sh(split, settings, *, prior: float, seed, configs: list, budget: int | None, r0: int) -> dict:
    import optuna

    from raytune_fed.metrics import auc
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu._ode import (
        FIT_FAILURES,
        ValidationCriterion,
        build_model,
        nested_order,
    )

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    order = nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling)
    criterion = ValidationCriterion(split, settings, seed=seed)
    model_seed = seed_int(derive(seed, "ode", "models"))
    steps = []
    r = r0
    while r < split.n_train:
        steps.append(r)
        r *= 2
    steps.append(split.n_train)
    state = {"rows": 0, "fits": 0, "failed": 0}
    reached: dict[int, tuple[int, float]] = {}      # trial number -> (deepest step, its value)

    def objective(trial):
        config = configs[trial.suggest_categorical("config_id", list(range(len(configs))))]
        value = None
        for step in steps:
            if budget is not None and state["rows"] + step > budget:
                break                                   # the sample budget B: no fit beyond it
            state["rows"] += step
            state["fits"] += 1
            rows = order[:step]
            try:
                model = build_model(config, prior=prior, seed=model_seed).fit(split.X_train[rows], split.s_train[rows])
                value = criterion(model)
            except FIT_FAILURES:
                state["failed"] += 1                    # no report at this step: judged at its next one
                continue
            reached[trial.number] = (step, value)
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        if value is None:
            raise optuna.TrialPruned()
        return value

    sampler = optuna.samplers.GridSampler({"config_id": list(range(len(configs)))},
                                          seed=seed_int(derive(seed, "optuna")))
    pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=r0, reduction_factor=2, min_early_stopping_rate=0)
    study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    study.optimize(objective, n_trials=len(configs))
    if not reached:                                     # every fit failed: nothing to select
        return {"test_auc": float("nan"), "rows_fed": state["rows"], "fits": state["fits"],
                "failed_fits": state["failed"], "deepest_step": 0, "n_complete": 0, "config": None}
    deepest = max(step for step, _ in reached.values())
    number = max((n for n, (step, _) in reached.items() if step == deepest), key=lambda n: reached[n][1])
    best = configs[study.trials[number].params["config_id"]]
    final = build_model(best, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
    return {"test_auc": auc(split.y_test, final.decision_function(split.X_test)), "rows_fed": state["rows"],
            "fits": state["fits"], "failed_fits": state["failed"], "deepest_step": int(deepest),
            "n_complete": sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials), "config": best}


def run_split(dataset: str, c: float, rep: int, seed: int) -> dict:
    from raytune_fed.algorithms.schedules import rung_table
    from raytune_fed.errors import NoSelectionError
    from raytune_fed.workflows.pu import ODESettings, run_ode
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, cell_split
    from raytune_fed.workflows.pu._methods import estimate_prior
    from raytune_fed.workflows.pu._ode import ODE_MIN_ROWS, configuration_set, search_budget

    cell = PUCell(dataset, c, rep, "ode", "ipm", "selfpaced", True,
                  settings=PUGridSettings(datasets=(dataset,), cs=(c,), seed=seed))
    split = cell_split(cell)
    prior = estimate_prior(split, cell.seed())
    settings = ODESettings()
    configs = configuration_set(settings.learners)
    budget = search_budget(split, settings)
    r0 = rung_table(len(configs), n_rows=split.n_train, budget_samples=budget, schedule=settings.schedule,
                    min_rows=ODE_MIN_ROWS).rungs[0].n_rows
    t0 = time.process_time()
    try:
        ode = run_ode(split, settings, prior=prior, seed=cell.seed(), configs=configs)
        ode_row = {"test_auc": ode.test_auc, "rows_fed": ode.rows_fed, "fits": len(ode.trace) + ode.n_failed,
                   "failed_fits": ode.n_failed, "config": ode.config}
    except NoSelectionError:
        ode_row = {"test_auc": float("nan"), "rows_fed": budget, "fits": None, "failed_fits": None, "config": None}
    ode_cpu = time.process_time() - t0
    peers = {}
    for name, cap in (("optuna_sh", budget), ("optuna_sh_uncapped", None)):
        t0 = time.process_time()
        peer = _optuna_sh(split, settings, prior=prior, seed=cell.seed(), configs=configs, budget=cap, r0=r0)
        peers[name] = {**peer, "cpu_seconds": time.process_time() - t0}
    return {"dataset": dataset, "c": c, "rep": rep, "budget": budget, "r0": int(r0), "n_train": split.n_train,
            "ode": {**ode_row, "cpu_seconds": ode_cpu},
            **peers}


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    keys = list(dict.fromkeys((r["dataset"], r["c"]) for r in rows))
    for dataset, c in keys:
        part = [r for r in rows if (r["dataset"], r["c"]) == (dataset, c)]
        entry = {"dataset": dataset, "c": c, "n": len(part)}
        for method in METHODS:
            auc = np.array([r[method]["test_auc"] for r in part], dtype=float) * 100
            entry[method] = {"no_selection": int(np.isnan(auc).sum()),
                             "test_auc_mean": float(np.nanmean(auc)),
                             "test_auc_sd": float(np.nanstd(auc, ddof=1)) if auc.size > 1 else None,
                             "rows_fed_mean": float(np.mean([r[method]["rows_fed"] for r in part])),
                             "fits_mean": float(np.mean([r[method]["fits"] or 0 for r in part])),
                             "cpu_seconds_mean": float(np.mean([r[method]["cpu_seconds"] for r in part]))}
        for peer in METHODS[1:]:
            diff = np.array([r["ode"]["test_auc"] - r[peer]["test_auc"] for r in part], dtype=float) * 100
            diff = diff[np.isfinite(diff)]                  # pairs where both selected something
            entry[f"ode_minus_{peer}"] = {"n": int(diff.size), "mean": float(diff.mean()),
                                          "sd": float(diff.std(ddof=1)) if diff.size > 1 else None,
                                          "ode_better": int((diff > 0).sum()), "equal": int((diff == 0).sum())}
        entry["budget_mean"] = float(np.mean([r["budget"] for r in part]))
        out.append(entry)
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=[0.01, 0.1])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="experiments/measured/bench_pu_peers.json")
    p.add_argument("--rows", default="results/bench_pu_peers/rows.jsonl",
                   help="each split's row is appended here as it finishes; a rerun skips the stored ones")
    args = p.parse_args(argv)
    load_start = os.getloadavg()
    started = time.perf_counter()
    done = Path(args.rows)
    stored = {}
    if done.is_file():
        for line in done.read_text().splitlines():
            row = json.loads(line)
            stored[(row["dataset"], row["c"], row["rep"], row["seed"])] = row
    done.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for dataset in args.datasets:
        for c in args.c:
            for rep in range(args.reps):
                key = (dataset, c, rep, args.seed)
                if key in stored:
                    rows.append(stored[key])
                    continue
                rows.append({**run_split(dataset, c, rep, args.seed), "seed": args.seed})
                with done.open("a") as f:
                    f.write(json.dumps(rows[-1], default=str) + "\n")
                r = rows[-1]
                print(f"{dataset} c={c:g} rep={rep}: ode {r['ode']['test_auc']:.4f} ({r['ode']['rows_fed']} rows), "
                      f"optuna {r['optuna_sh']['test_auc']:.4f} ({r['optuna_sh']['rows_fed']} rows), uncapped "
                      f"{r['optuna_sh_uncapped']['test_auc']:.4f} ({r['optuna_sh_uncapped']['rows_fed']} rows)",
                      flush=True)
    report = {"settings": vars(args), "machine": {"python": platform.python_version(),
                                                  "platform": platform.platform()},
              "load_average_at_start": load_start, "load_average_at_end": os.getloadavg(),
              "seconds": time.perf_counter() - started, "table": summarize(rows), "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report["table"], indent=1))


if __name__ == "__main__":
    main()
