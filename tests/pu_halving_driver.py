"""A Tune driver for the PUHalvingScheduler restore test: ``start`` runs an experiment, ``restore`` resumes it.

Run as a script in its own interpreter so that the test can send it SIGINT (Ctrl-C) mid-rung:
``python pu_halving_driver.py start|restore ADDRESS STORAGE LEDGER STATE [--asynchronous]``.
The trainable appends one line to ``LEDGER`` *before* each fit (so a fit cut short by the
interrupt is counted) and then takes ``DELAY`` seconds; ``restore`` writes the scheduler's
final state to ``STATE`` when the experiment ends.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from ray.tune import Callback

XS = [i / 10 for i in range(10)]
SETTINGS = dict(n_configs=10, n_rows=200, budget_samples=300, schedule="sh", seed=4)
DELAY = 0.6


def make_trainable(ledger: str, rows: list[int]):
    def train(config):
        from ray import tune

        checkpoint = tune.get_checkpoint()
        start = 0
        if checkpoint is not None:
            with checkpoint.as_directory() as d, open(os.path.join(d, "rung.json")) as f:
                start = json.load(f)["rung"] + 1
        for rung in range(start, len(rows)):
            with open(ledger, "a") as f:
                f.write(json.dumps({"x": config["x"], "rung": rung, "rows": rows[rung]}) + "\n")
            time.sleep(DELAY)
            value = -(config["x"] - 0.37) ** 2 - 1.0 / rows[rung]
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "rung.json"), "w") as f:
                    json.dump({"rung": rung}, f)
                tune.report({"score": value, "n_rows": rows[rung]}, checkpoint=tune.Checkpoint.from_directory(d))
    return train


class SaveAtEnd(Callback):
    """Writes the scheduler's state when the experiment ends (the callback travels in the tuner's state, so
    after ``Tuner.restore`` it holds the restored scheduler)."""

    def __init__(self, scheduler, path: str) -> None:
        self.scheduler, self.path = scheduler, path

    def on_experiment_end(self, trials, **info):
        with open(self.path, "w") as f:
            json.dump(self.scheduler.get_state(), f)


def main(argv: list[str]) -> None:
    import ray
    from ray import tune

    from raytune_fed.schedulers import PUHalvingScheduler

    mode, address, storage, ledger, state_path = argv[:5]
    asynchronous = "--asynchronous" in argv
    ray.init(address=address, log_to_driver=False)
    rows = PUHalvingScheduler(**SETTINGS, asynchronous=asynchronous).rung_rows
    trainable = make_trainable(ledger, rows)
    name = "async" if asynchronous else "sync"
    if mode == "start":
        scheduler = PUHalvingScheduler(**SETTINGS, asynchronous=asynchronous)
        tune.Tuner(trainable, param_space={"x": tune.grid_search(XS)},
                   tune_config=tune.TuneConfig(scheduler=scheduler, metric="score", mode="max", reuse_actors=True),
                   run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0,
                                             callbacks=[scheduler.state_callback(),
                                                        SaveAtEnd(scheduler, state_path)])).fit()
        return
    tune.Tuner.restore(os.path.join(storage, name), trainable=trainable, resume_unfinished=True).fit()


if __name__ == "__main__":
    main(sys.argv[1:])
