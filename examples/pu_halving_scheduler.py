"""PUHalvingScheduler (ODE's successive halving) in a Ray Tune run with a real PU learner.

Each trial is one uPU configuration (its ridge penalty lambda). It trains rung by rung on
``scheduler.rung_rows[t]`` rows, reports IPM_PU on the PU validation split and the rows it
trained on, and checkpoints its rung so that a paused trial resumes where it stopped.

Run: python examples/pu_halving_scheduler.py  (about 15 seconds; starts a local Ray session)
"""

import json
import tempfile
from pathlib import Path

from ray import tune

from raytune_fed.data import load_dataset
from raytune_fed.metrics import auc
from raytune_fed.metrics.pu import bounded_scores, ipm_pu
from raytune_fed.models.pu import UPU
from raytune_fed.schedulers import PUHalvingScheduler
from raytune_fed.simulation import pu_split
from raytune_fed.workflows.pu import estimate_prior, nested_order

LAMBDAS = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0]


def train(config, split, rows, order, prior):
    checkpoint = tune.get_checkpoint()
    start = 0 if checkpoint is None else json.loads(Path(checkpoint.path, "rung.json").read_text())["rung"] + 1
    for rung in range(start, len(rows)):
        take = order[:rows[rung]]
        model = UPU(prior=prior, lam=config["lam"]).fit(split.X_train[take], split.s_train[take])
        ipm = ipm_pu(split.s_val, bounded_scores(model.decision_function(split.X_val)))
        with tempfile.TemporaryDirectory() as d:
            Path(d, "rung.json").write_text(json.dumps({"rung": rung}))
            tune.report({"ipm": ipm, "n_rows": rows[rung]}, checkpoint=tune.Checkpoint.from_directory(d))


def main():
    data = load_dataset("twonorm")
    split = pu_split(data.X, data.y, c=0.2, seed=0)   # PU train / PU validation / labelled test
    prior = estimate_prior(split, seed=0)               # TIcE: the true class prior is never used
    order = nested_order(split.s_train, seed=0)         # labelled and unlabelled rows alternate (rung rows)
    scheduler = PUHalvingScheduler(n_configs=len(LAMBDAS), n_rows=split.n_train, seed=0, metric="ipm", mode="max")
    with tempfile.TemporaryDirectory() as storage:
        tune.Tuner(tune.with_parameters(train, split=split, rows=scheduler.rung_rows, order=order, prior=prior),
                   param_space={"lam": tune.grid_search(LAMBDAS)},
                   tune_config=tune.TuneConfig(scheduler=scheduler, reuse_actors=True),
                   run_config=tune.RunConfig(storage_path=storage, verbose=0,
                                             callbacks=[scheduler.state_callback()])).fit()
    chosen = LAMBDAS[scheduler.best_config_id]
    final = UPU(prior=prior, lam=chosen).fit(split.X_train, split.s_train)
    test_auc = auc(split.y_test, final.decision_function(split.X_test), positive=1)
    print(f"rung rows {scheduler.rung_rows}; rows used {scheduler.rows_used} of the budget "
          f"{scheduler.table.budget_samples}")
    print(f"selected lambda = {chosen}, test AUC {test_auc:.3f}")
    return scheduler


if __name__ == "__main__":
    main()
