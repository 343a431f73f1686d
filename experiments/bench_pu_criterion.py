"""How well ODE's selection criterion ranks configurations, with and without the control variate (section 3.5).

For every dataset x c x replication (the PU grid's splits: the same ``derive(seed, dataset,
"c=<c>", rep)`` streams, so the same rows and the same TIcE prior as ``raytune-fed pu``), the
100 uPU configurations of Table 3 are fitted on the whole training split and scored on the
validation split by IPM_PU and AUC_PU in five ways:

* ``plain`` - the evaluator alone;
* ``shipped`` - what ODE uses: the normalised density ratio, ``eta`` shrunk by its standard
  error, and the variate only where validation and training hold at least ``CV_MIN_ROWS``
  labelled rows and the ratio's normaliser has a relative standard error of at most
  ``CV_MAX_NORMALISER_SE`` (else ``plain``); it is ``forced`` or ``plain`` of the same split,
  chosen in the summary by that rule from the recorded counts and standard error;
* ``forced`` - the shipped variate without the two conditions;
* ``paper`` - the normalised density ratio with the plain regression ``eta`` of the paper
  (``-Cov / Var`` over the labelled validation rows), no threshold;
* ``unnormalised`` - the regression ``eta`` with the classifier's own odds (not normalised
  to mean 1 over positives: the reading that shipped before).

Per split it records the Spearman correlation of each criterion with the configurations'
test AUC, the test AUC of the configuration each would select, the best test AUC of the 100
(the ceiling of any selection among them), the mean of the density ratio over the labelled
validation rows and over the test positives (eq. 13 says 1), and the criterion's variance
with and without the variate: ``--draws`` validation sets of the split's own size (its
labelled and unlabelled row counts) are drawn from the test part and every configuration is
scored on each; the ratio of the variances over draws, averaged over configurations, is below
1 where the variate reduces the criterion's variance (for ``shipped``, 1 on the splits where
its conditions turn it off).

``python experiments/bench_pu_criterion.py`` writes ``--out`` (default
``experiments/measured/bench_pu_criterion.json``); the grid is resumable under ``--root``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from raytune_fed.grid import Cell, CellResult, InProcessExecutor, RayExecutor, make_progress, run_cells
from raytune_fed.store import ResultStore

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

DATASETS = ("twonorm", "spambase", "chess", "sat", "texture", "titanic")
CS = (0.01, 0.05, 0.1, 0.2)
CRITERIA = ("plain", "forced", "paper", "unnormalised")
SUMMARY_CRITERIA = ("plain", "shipped", "forced", "paper", "unnormalised")
EVALUATORS = ("ipm", "auc")


@dataclass(frozen=True)
class CriterionCell(Cell):
    dataset: str
    c: float
    rep: int
    seed_root: int
    draws: int
    prior: str

    def config(self) -> dict[str, Any]:
        return {"bench": "pu_criterion", "dataset": self.dataset, "c": self.c, "rep": self.rep,
                "seed": self.seed_root, "draws": self.draws, "prior": self.prior}

    @property
    def coordinates(self) -> tuple[int | str, ...]:
        return (self.dataset, f"c={self.c}", self.rep)      # the PU grid's coordinates: the same split

    @property
    def root_seed(self) -> int:
        return self.seed_root

    @property
    def label(self) -> str:
        return f"{self.dataset} c={self.c} rep={self.rep}"


def _criteria(a: np.ndarray, w: np.ndarray, w_raw: np.ndarray) -> dict[str, float]:
    from raytune_fed.metrics.pu import control_variate

    return {"plain": float(a.mean()), "forced": control_variate(a, w, shrink=True)[0],
            "paper": control_variate(a, w)[0], "unnormalised": control_variate(a, w_raw)[0]}


def shipped_on(row: dict) -> bool:
    """Whether ODE uses the variate on this split (the rule of ``ValidationCriterion``)."""
    from raytune_fed.workflows.pu._ode import CV_MAX_NORMALISER_SE, CV_MIN_ROWS

    return min(row["n_labelled_val"], row["n_labelled_train"]) >= CV_MIN_ROWS and \
        row["normaliser_se"] <= CV_MAX_NORMALISER_SE


def run_cell(cell: CriterionCell) -> CellResult:
    from raytune_fed.metrics import DensityRatio, auc, bounded_scores, pu_contributions
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu import PUGridSettings, estimate_prior
    from raytune_fed.workflows.pu._grid import PUCell, cell_split
    from raytune_fed.workflows.pu._ode import FIT_FAILURES, build_model, configuration_set

    probe = PUCell(cell.dataset, cell.c, cell.rep, "ode", "ipm", "selfpaced", True,
                   settings=PUGridSettings(datasets=(cell.dataset,), cs=(cell.c,), seed=cell.seed_root))
    split, seed = cell_split(probe), probe.seed()
    prior = estimate_prior(split, seed) if cell.prior == "tice" else split.unlabelled_prior()
    model_seed = seed_int(derive(seed, "ode", "models"))
    f_val, f_test, test_auc = [], [], []
    for config in configuration_set(["upu"]):
        try:
            model = build_model(config, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
            fv, ft = model.decision_function(split.X_val), model.decision_function(split.X_test)
        except FIT_FAILURES:
            continue
        f_val.append(fv)
        f_test.append(ft)
        test_auc.append(auc(split.y_test, ft))
    f_val, f_test, test_auc = np.array(f_val), np.array(f_test), np.array(test_auc)
    n_val, n_train = int(split.s_val.sum()), int(split.s_train.sum())
    ratio = DensityRatio(seed=seed_int(derive(seed, "ode", "ntc"))).fit(split.X_train, split.s_train)
    lab_val = split.X_val[split.s_val == 1]
    w_val, w_val_raw = ratio.ratio(lab_val), ratio.raw_ratio(lab_val)
    test_pos = np.flatnonzero(split.y_test == 1)
    w_test = ratio.ratio(split.X_test)
    w_test_raw = ratio.raw_ratio(split.X_test)
    row: dict[str, Any] = {
        "dataset": cell.dataset, "c": cell.c, "rep": cell.rep, "n_labelled_train": n_train, "n_labelled_val": n_val,
        "n_unlabelled_val": int(split.n_val - n_val), "prior": float(prior),
        "true_prior": float(split.unlabelled_prior()), "n_configs": int(test_auc.size),
        "best_test_auc": float(test_auc.max()), "mean_w_val": float(w_val.mean()),
        "mean_w_test_positives": float(w_test[test_pos].mean()),
        "mean_raw_w_test_positives": float(w_test_raw[test_pos].mean()),
        "normaliser_se": ratio.normaliser_se_ / ratio.normaliser_}
    for evaluator in EVALUATORS:
        a = np.array([pu_contributions(split.s_val, bounded_scores(f), evaluator) for f in f_val])
        values = {k: np.array([_criteria(ai, w_val, w_val_raw)[k] for ai in a]) for k in CRITERIA}
        for k, v in values.items():
            rho = spearmanr(v, test_auc)[0]
            row[f"{evaluator}_{k}_spearman"] = None if not np.isfinite(rho) else float(rho)
            row[f"{evaluator}_{k}_pick"] = float(test_auc[int(np.argmax(v))])
    # the criterion's variance over validation sets of this split's size, drawn from the test part
    rng = np.random.default_rng(derive(seed, "criterion", "draws"))
    n_lab = min(n_val, test_pos.size // 2)
    others = np.arange(split.y_test.size)
    n_unl = min(int(split.n_val - n_val), split.y_test.size - n_lab)
    if n_lab >= 3:
        draws = {e: {k: [] for k in ("plain", "forced", "paper")} for e in EVALUATORS}
        for _ in range(cell.draws):
            pos = rng.choice(test_pos, n_lab, replace=False)
            unl = rng.choice(np.setdiff1d(others, pos), n_unl, replace=False)
            rows = np.r_[pos, unl]
            s = np.r_[np.ones(n_lab, dtype=int), np.zeros(n_unl, dtype=int)]
            w, w_raw = w_test[pos], w_test_raw[pos]
            for evaluator in EVALUATORS:
                per = [_criteria(pu_contributions(s, bounded_scores(f[rows]), evaluator), w, w_raw)
                       for f in f_test]
                for k in ("plain", "forced", "paper"):
                    draws[evaluator][k].append([p[k] for p in per])
        for evaluator in EVALUATORS:
            base = np.var(np.array(draws[evaluator]["plain"]), axis=0)
            keep = base > 0
            for k in ("forced", "paper"):
                var = np.var(np.array(draws[evaluator][k]), axis=0)
                row[f"{evaluator}_{k}_variance_ratio"] = float(np.mean(var[keep] / base[keep])) if keep.any() \
                    else None
    return CellResult([row], [{}])


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(rows: list[dict]) -> list[dict]:
    """Per dataset x c: means over replications."""
    out = []
    rows = [{**r, "control_variate_on": shipped_on(r),
             **{f"{e}_shipped_{m}": r[f"{e}_{'forced' if shipped_on(r) else 'plain'}_{m}"]
                for e in EVALUATORS for m in ("spearman", "pick")},
             **{f"{e}_shipped_variance_ratio": (r.get(f"{e}_forced_variance_ratio") if shipped_on(r) else 1.0)
                for e in EVALUATORS}} for r in rows]
    keys = list(dict.fromkeys((r["dataset"], r["c"]) for r in rows))
    for dataset, c in keys:
        group = [r for r in rows if (r["dataset"], r["c"]) == (dataset, c)]
        entry: dict[str, Any] = {"dataset": dataset, "c": c, "n": len(group),
                                 "n_labelled_val": _mean([r["n_labelled_val"] for r in group]),
                                 "n_labelled_train": _mean([r["n_labelled_train"] for r in group]),
                                 "control_variate_on": sum(r["control_variate_on"] for r in group),
                                 "best_test_auc": _mean([r["best_test_auc"] for r in group]),
                                 "mean_w_val": _mean([r["mean_w_val"] for r in group]),
                                 "mean_w_test_positives": _mean([r["mean_w_test_positives"] for r in group]),
                                 "mean_raw_w_test_positives": _mean([r["mean_raw_w_test_positives"] for r in group])}
        for evaluator in EVALUATORS:
            for k in SUMMARY_CRITERIA:
                entry[f"{evaluator}_{k}_spearman"] = _mean([r[f"{evaluator}_{k}_spearman"] for r in group])
                entry[f"{evaluator}_{k}_pick"] = _mean([r[f"{evaluator}_{k}_pick"] for r in group])
            for k in ("shipped", "forced", "paper"):
                entry[f"{evaluator}_{k}_variance_ratio"] = _mean([r.get(f"{evaluator}_{k}_variance_ratio")
                                                                  for r in group])
        out.append(entry)
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--c", type=lambda t: [float(x) for x in csv(t)], default=list(CS))
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--prior", default="tice", choices=("tice", "true"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-cpus", type=int, default=None)
    p.add_argument("--in-process", action="store_true")
    p.add_argument("--root", default="results/bench_pu_criterion")
    p.add_argument("--out", default="experiments/measured/bench_pu_criterion.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    with Benchmark("bench_pu_criterion", out, argv) as bench:
        cells = [CriterionCell(d, c, rep, args.seed, args.draws, args.prior)
                 for d in args.datasets for c in args.c for rep in range(args.reps)]
        if args.in_process:
            executor = InProcessExecutor()
        else:
            from raytune_fed.runtime import connect

            connect(None, args.num_cpus)
            executor = RayExecutor()
        result = run_cells(cells, run_cell, ResultStore(args.root), executor, progress=make_progress(),
                           name="pu_criterion")
        rows = [r for rec in result.records for r in rec.rows]
        order = {(c.dataset, c.c, c.rep): i for i, c in enumerate(cells)}
        rows.sort(key=lambda r: order[(r["dataset"], r["c"], r["rep"])])
        report = {"settings": vars(args), "tables": summarize(rows),
                  "rows": [{k: v for k, v in r.items() if "_shipped_" not in k and k != "control_variate_on"}
                           for r in rows]}
        bench.figures.update(report)
    for entry in report["tables"]:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in entry.items()
                          if k.startswith(("dataset", "c", "n_", "control", "ipm_plain", "ipm_shipped",
                                           "ipm_forced_var", "best"))}))


if __name__ == "__main__":
    main()
