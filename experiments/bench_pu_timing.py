"""Table 6 of the ODE paper like for like: CPU seconds of one fit and of each method's whole selection.

The paper's Table 6 times WSVM, uPU, nnPU and ODE at c = 0.6 with the sample budget B = N and
no time budget, averaged over 10 replications.  It does not say whether a baseline's time is one
fit or its hyperparameter search (its nnPU takes 7-30 s, which cannot be 500 networks), so both
are measured and reported apart, per replication, in CPU seconds of this process (one thread:
``OMP_NUM_THREADS=1`` is set before numpy loads):

* ``wsvm`` - one fit (the NTC, the label frequency, the weighted retraining); it has no grid;
* ``upu_fit`` / ``upu_grid`` - the mean of the 100 Table-3 fits on all training rows / the
  whole grid: every fit plus its validation risk (the ``upu`` baseline's selection);
* ``nnpu_fit`` / ``nnpu_grid`` - one network with the reference defaults (gamma 1, beta 0) / the
  500-network grid, *estimated* as 500 x the mean of ``--nnpu-sample`` fits spread over the grid
  (training all 500 takes about 17 CPU minutes per split; the fits differ only in gamma and beta,
  which leave the arithmetic per epoch unchanged);
* ``ode_search`` - ODE's search at B = N (the density ratio of the control variate, every rung's
  fits and scores) and ``ode_fit`` - its final refit (one uPU fit on all training rows);
* ``tice`` - the class-prior estimate that uPU, nnPU and ODE need to train, reported apart.

``python experiments/bench_pu_timing.py`` writes ``--out`` (default
``experiments/measured/bench_pu_timing.json``); replications are cells of the grid engine under
``--root`` (resumable) and run one after another in this process.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from raytune_fed.grid import Cell, CellResult, InProcessExecutor, make_progress, run_cells  # noqa: E402
from raytune_fed.store import ResultStore  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

DATASETS = ("sat", "spambase", "texture", "titanic", "twonorm")
PAPER = {"sat": {"wsvm": 101.3, "upu": 13.5, "nnpu": 7.4, "ode": 6.4},
         "spambase": {"wsvm": 683.8, "upu": 36.7, "nnpu": 16.9, "ode": 15.1},
         "texture": {"wsvm": 29.7, "upu": 7.4, "nnpu": 7.1, "ode": 1.1},
         "titanic": {"wsvm": 22.6, "upu": 1.4, "nnpu": 7.7, "ode": 0.3},
         "twonorm": {"wsvm": 1182.4, "upu": 15.2, "nnpu": 20.6, "ode": 4.3}}
PAPER_MEAN_RATIO = {"wsvm": 72.0, "upu": 5.0, "nnpu": 6.2}
C = 0.6


@dataclass(frozen=True)
class TimingCell(Cell):
    dataset: str
    rep: int
    seed_root: int
    nnpu_sample: int

    def config(self) -> dict[str, Any]:
        return {"bench": "pu_timing", "dataset": self.dataset, "c": C, "rep": self.rep, "seed": self.seed_root,
                "nnpu_sample": self.nnpu_sample}

    @property
    def coordinates(self) -> tuple[int | str, ...]:
        return (self.dataset, f"c={C}", self.rep)           # the PU grid's coordinates: the same split

    @property
    def root_seed(self) -> int:
        return self.seed_root

    @property
    def label(self) -> str:
        return f"{self.dataset} c={C} rep={self.rep}"


def _cpu(call):
    start = time.process_time()
    value = call()
    return value, time.process_time() - start


def run_cell(cell: TimingCell) -> CellResult:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from raytune_fed.metrics import upu_risk
    from raytune_fed.models.pu import WSVM
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu import PUGridSettings, estimate_prior, run_ode
    from raytune_fed.workflows.pu._grid import PUCell, cell_split
    from raytune_fed.workflows.pu._ode import ODESettings, build_model, configuration_set

    probe = PUCell(cell.dataset, C, cell.rep, "ode", "ipm", "selfpaced", True,
                   settings=PUGridSettings(datasets=(cell.dataset,), cs=(C,), seed=cell.seed_root))
    split, seed = cell_split(probe), probe.seed()
    prior, tice = _cpu(lambda: estimate_prior(split, seed))
    row: dict[str, Any] = {"dataset": cell.dataset, "c": C, "rep": cell.rep, "n_train": split.n_train,
                           "n_labelled": int(split.s_train.sum()), "prior": float(prior)}
    times: dict[str, float] = {"tice": tice}
    wsvm = make_pipeline(StandardScaler(), WSVM(random_state=seed_int(derive(seed, "wsvm"))))
    _, times["wsvm"] = _cpu(lambda: wsvm.fit(split.X_train, split.s_train))
    model_seed = seed_int(derive(seed, "upu", "models"))
    fits, risks = [], []
    for config in configuration_set(["upu"]):
        model, spent = _cpu(lambda: build_model(config, prior=prior, seed=model_seed).fit(split.X_train,
                                                                                           split.s_train))
        _, scored = _cpu(lambda: upu_risk(split.s_val, model.decision_function(split.X_val), prior))
        fits.append(spent)
        risks.append(scored)
    times["upu_fit"], times["upu_grid"] = float(np.mean(fits)), float(np.sum(fits) + np.sum(risks))
    nnpu_configs = configuration_set(["nnpu"])
    default = next(c for c in nnpu_configs if c["gamma"] == 1.0 and c["beta"] == 0.0)
    nnpu_seed = seed_int(derive(seed, "nnpu", "models"))
    _, times["nnpu_fit"] = _cpu(lambda: build_model(default, prior=prior, seed=nnpu_seed).fit(split.X_train,
                                                                                               split.s_train))
    picks = [nnpu_configs[i] for i in np.linspace(0, len(nnpu_configs) - 1, cell.nnpu_sample).round().astype(int)]
    sample = [_cpu(lambda: build_model(c, prior=prior, seed=nnpu_seed).fit(split.X_train, split.s_train))[1]
              for c in picks]
    times["nnpu_grid"] = float(len(nnpu_configs) * np.mean(sample))
    result, times["ode_search_and_fit"] = _cpu(lambda: run_ode(split, ODESettings(), prior=prior, seed=seed))
    best = result.config
    ode_seed = seed_int(derive(seed, "ode", "models"))
    _, times["ode_fit"] = _cpu(lambda: build_model(best, prior=prior, seed=ode_seed).fit(split.X_train,
                                                                                       split.s_train))
    times["ode_search"] = times["ode_search_and_fit"] - times["ode_fit"]
    row["ode_rows_used"] = int(result.rows_used)
    return CellResult([row], [{f"cpu_{k}": v for k, v in times.items()}])


def _table(rows: list[dict]) -> dict:
    """Per dataset: mean and sd over replications of every timing, and the ratios to ODE both ways."""
    out: dict[str, Any] = {}
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        group = [r for r in rows if r["dataset"] == dataset]
        keys = [k for k in group[0] if k.startswith("cpu_")]
        stats = {k[4:]: {"mean": float(np.mean([r[k] for r in group])),
                         "sd": float(np.std([r[k] for r in group], ddof=1)) if len(group) > 1 else None}
                 for k in keys}
        ode = stats["ode_search_and_fit"]["mean"]
        out[dataset] = {"n": len(group), "cpu_seconds": stats,
                        "ratio_to_ode_single_fits": {m: stats[k]["mean"] / ode for m, k in
                                                     (("wsvm", "wsvm"), ("upu", "upu_fit"), ("nnpu", "nnpu_fit"))},
                        "ratio_to_ode_grids": {m: stats[k]["mean"] / ode for m, k in
                                               (("wsvm", "wsvm"), ("upu", "upu_grid"), ("nnpu", "nnpu_grid"))},
                        "paper_seconds": PAPER.get(dataset)}
    for reading in ("single_fits", "grids"):
        out[f"mean_ratio_to_ode_{reading}"] = {
            m: float(np.mean([v[f"ratio_to_ode_{reading}"][m] for k, v in out.items() if isinstance(v, dict)
                              and f"ratio_to_ode_{reading}" in v])) for m in ("wsvm", "upu", "nnpu")}
    out["paper_mean_ratio_to_ode"] = PAPER_MEAN_RATIO
    return out


def main(argv=None) -> None:
    csv = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=csv, default=list(DATASETS))
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--nnpu-sample", type=int, default=5, help="nnPU fits timed per split for the grid estimate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--root", default="results/bench_pu_timing")
    p.add_argument("--out", default="experiments/measured/bench_pu_timing.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    with Benchmark("bench_pu_timing", out, argv) as bench:
        cells = [TimingCell(d, rep, args.seed, args.nnpu_sample) for d in args.datasets for rep in range(args.reps)]
        result = run_cells(cells, run_cell, ResultStore(args.root), InProcessExecutor(), progress=make_progress(),
                           name="pu_timing")
        rows = [{**row, **timing} for rec in result.records for row, timing in zip(rec.rows, rec.timing)]
        threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
        report = {"settings": vars(args), "threads": threads, "table6": _table(rows), "rows": rows}
        bench.figures.update(report)
        bench.headline.update({k: v for k, v in report["table6"].items()
                               if k.startswith("mean") and isinstance(v, (int, float))})
    print(json.dumps({k: v for k, v in report["table6"].items() if k.startswith(("mean", "paper"))}, indent=1))


if __name__ == "__main__":
    main()
