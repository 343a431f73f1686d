"""PUHalvingScheduler: a real TrialScheduler in real Tuner runs (sync order, budget, restore, async)."""

from __future__ import annotations

import json
import os

import pytest
from ray import tune

from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.errors import ConfigError
from raytune_fed.schedulers import PUHalvingScheduler

XS = [i / 10 for i in range(10)]
SETTINGS = dict(n_configs=10, n_rows=200, budget_samples=300, schedule="sh", seed=4)


def score(x: float, rows: int) -> float:
    """A deterministic metric (maximised): best near x = 0.37, better with more rows."""
    return -(x - 0.37) ** 2 - 1.0 / rows


def make_trainable(log_path: str, rows: list[int]):
    """A trainable that trains rung by rung, logs each rung it trains and resumes from a checkpoint."""
    def train(config):
        import json as _json
        import os as _os
        import tempfile
        import time

        checkpoint = tune.get_checkpoint()
        start = 0
        if checkpoint is not None:
            with checkpoint.as_directory() as d, open(_os.path.join(d, "rung.json")) as f:
                start = _json.load(f)["rung"] + 1
        for rung in range(start, len(rows)):
            began = time.time()
            value = -(config["x"] - 0.37) ** 2 - 1.0 / rows[rung]
            with open(log_path, "a") as f:
                f.write(_json.dumps({"x": config["x"], "rung": rung, "rows": rows[rung], "began": began}) + "\n")
            with tempfile.TemporaryDirectory() as d:
                with open(_os.path.join(d, "rung.json"), "w") as f:
                    _json.dump({"rung": rung}, f)
                tune.report({"score": value, "n_rows": rows[rung], "reported": time.time()},
                            checkpoint=tune.Checkpoint.from_directory(d))
    return train


def _tuner(trainable, scheduler, path, name, callbacks=()):
    return tune.Tuner(trainable, param_space={"x": tune.grid_search(XS)},
                      tune_config=tune.TuneConfig(scheduler=scheduler, metric="score", mode="max", reuse_actors=True),
                      run_config=tune.RunConfig(storage_path=str(path), name=name, verbose=0,
                                                callbacks=[scheduler.state_callback(), *callbacks]))


def _log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def _core_choice(asynchronous=False):
    core = SuccessiveHalving([{"x": x} for x in XS], n_rows=200, budget_samples=300, schedule="sh",
                             seed=4, asynchronous=asynchronous)
    while not core.is_finished:
        jobs = core.ask(100)
        core.tell(jobs, [[-score(j["x"], j["n_rows"])] for j in jobs])
    return core.best_id()[0], core.rows_used


# ------------------------------------------------------------------ real Tuner runs

def test_synchronous_rungs_budget_and_the_same_choice_as_the_core(ray_session, tmp_path):
    scheduler = PUHalvingScheduler(**SETTINGS)
    log = str(tmp_path / "log.jsonl")
    _tuner(make_trainable(log, scheduler.rung_rows), scheduler, tmp_path, "sync").fit()
    lines = _log(log)
    # every rung t + 1 training started after every rung-t report was made
    for rung in range(1, len(scheduler.rung_rows)):
        before = [line["began"] for line in lines if line["rung"] == rung - 1]
        after = [line["began"] for line in lines if line["rung"] == rung]
        assert len(before) == scheduler.table.rungs[rung - 1].n_configs
        assert min(after) > max(before)
    rows = sum(line["rows"] for line in lines)
    assert rows == scheduler.rows_used == scheduler.table.total_rows <= 300
    assert scheduler.is_finished
    assert (scheduler.best_config_id, scheduler.rows_used) == _core_choice()
    assert XS[scheduler.best_config_id] == 0.4


def test_asynchronous_mode_promotes_early_within_the_budget(ray_session, tmp_path):
    scheduler = PUHalvingScheduler(**SETTINGS, asynchronous=True)
    log = str(tmp_path / "log.jsonl")
    _tuner(make_trainable(log, scheduler.rung_rows), scheduler, tmp_path, "async").fit()
    lines = _log(log)
    assert sum(line["rows"] for line in lines) == scheduler.rows_used == scheduler.table.total_rows <= 300
    assert [sum(1 for line in lines if line["rung"] == r.index) for r in scheduler.table.rungs] == \
        [r.n_configs for r in scheduler.table.rungs]
    assert scheduler.is_finished and XS[scheduler.best_config_id] in (0.3, 0.4)


class _CrashOnce(tune.Callback):
    """Raises in the driver at the ``after``-th result, once (a marker file remembers it)."""

    def __init__(self, after: int, marker: str) -> None:
        self.after, self.marker, self.seen = after, marker, 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen += 1
        if self.seen == self.after and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("simulated driver failure")


class _SaveAtEnd(tune.Callback):
    """Writes the scheduler's state when the experiment ends (the restored run's scheduler is Tune's copy)."""

    def __init__(self, scheduler: PUHalvingScheduler, path: str) -> None:
        self.scheduler, self.path = scheduler, path

    def on_experiment_end(self, trials, **info):
        with open(self.path, "w") as f:
            json.dump(self.scheduler.get_state(), f)


def test_the_scheduler_survives_a_tuner_restore(ray_session, tmp_path):
    scheduler = PUHalvingScheduler(**SETTINGS)
    log = str(tmp_path / "log.jsonl")
    trainable = make_trainable(log, scheduler.rung_rows)
    callbacks = [_CrashOnce(13, str(tmp_path / "crashed")), _SaveAtEnd(scheduler, str(tmp_path / "end.json"))]
    with pytest.raises(Exception, match="simulated driver failure"):
        _tuner(trainable, scheduler, tmp_path, "restore", callbacks).fit()
    assert not scheduler.is_finished
    tune.Tuner.restore(str(tmp_path / "restore"), trainable=trainable, resume_unfinished=True).fit()
    again = PUHalvingScheduler(**SETTINGS)
    again.restore(str(tmp_path / "end.json"))
    assert again.is_finished
    assert (again.best_config_id, again.rows_used) == _core_choice()
    # every (configuration, rung) of the uninterrupted run was trained; replays after the restore are not told
    trained = {(line["x"], line["rung"]) for line in _log(log)}
    expected = {(XS[i], t) for i, t, _, _ in again.results()}
    assert trained == expected and len(again.results()) == sum(r.n_configs for r in again.table.rungs)


# ------------------------------------------------------------------ pure (no Tuner)

def test_state_is_explicit_versioned_and_json_safe(tmp_path):
    scheduler = PUHalvingScheduler(**SETTINGS, metric="score", mode="max")
    state = json.loads(json.dumps(scheduler.get_state()))
    assert state["version"] == 3 and state["kind"] == "PUHalvingScheduler" and state["core"]["kind"] == \
        "SuccessiveHalving"
    other = PUHalvingScheduler(**SETTINGS)
    other.set_state(state)
    assert other.get_state() == scheduler.get_state()
    assert scheduler.rung_rows == [7, 15, 25, 37]
    scheduler.save(str(tmp_path / "state.json"))
    third = PUHalvingScheduler(**SETTINGS)
    third.restore(str(tmp_path / "state.json"))
    assert third.get_state() == scheduler.get_state()


def test_search_properties_follow_tune_conventions():
    scheduler = PUHalvingScheduler(**SETTINGS, metric="score", mode="max")
    assert scheduler.set_search_properties("other", None) is False
    fresh = PUHalvingScheduler(**SETTINGS)
    assert fresh.set_search_properties("score", "max") is True
    assert fresh.get_state()["metric"] == "score"


BAD_INPUT = [
    (lambda: PUHalvingScheduler(**{**SETTINGS, "n_configs": 1}), r"n_configs must be an integer >= 2, got 1"),
    (lambda: PUHalvingScheduler(**SETTINGS, mode="maximise"), r"mode must be 'min' or 'max', got 'maximise'"),
    (lambda: PUHalvingScheduler(**SETTINGS, resource_attr=""), r"resource_attr must be a non-empty string"),
    (lambda: PUHalvingScheduler(**{**SETTINGS, "budget_samples": 30}), r"budget_samples=30 gives 0 rows"),
    (lambda: PUHalvingScheduler(**SETTINGS, budget_seconds=-5), r"budget_seconds must be a finite number >= 0.0"),
    (lambda: PUHalvingScheduler(**{**SETTINGS, "schedule": "halving"}), r"unknown schedule 'halving'"),
    (lambda: PUHalvingScheduler(**SETTINGS).set_state({"version": 2, "kind": "PUHalvingScheduler"}),
     r"cannot restore state version 2"),
    (lambda: PUHalvingScheduler(**SETTINGS).set_state({"version": 1}), r"malformed PUHalvingScheduler state"),
    (lambda: PUHalvingScheduler(**SETTINGS).restore("/nonexistent/state.json"), r"no scheduler state at"),
]


@pytest.mark.parametrize("call, message", BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


class _Controller:
    """Stands in for Tune's controller in a unit test of the scheduler's decisions (no Ray session)."""

    def __init__(self, trials):
        self.trials, self.stopped = trials, []

    def get_trials(self):
        return self.trials

    def stop_trial(self, trial):
        self.stopped.append(trial.trial_id)


def _trial(i):
    from types import SimpleNamespace

    from ray.tune.experiment import Trial

    return SimpleNamespace(trial_id=f"t{i}", status=Trial.PENDING, last_result={}, is_saving=False)


def test_a_non_finite_report_ranks_last_and_the_trial_stops_once_its_rung_is_ranked():
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    scheduler = PUHalvingScheduler(**{**SETTINGS, "n_configs": 4}, metric="score", mode="max")
    trials = [_trial(i) for i in range(4)]
    controller = _Controller(trials)
    for t in trials:
        scheduler.on_trial_add(controller, t)
    # PENDING trials are Tune's to start (their actors are requested); choosing one would move a cached
    # actor onto it and cancel its own, which ran every trial on one actor (bench_pu_tune)
    assert scheduler.choose_trial_to_run(controller) is None
    for t in trials:                                  # Tune starts every trial of rung 0
        t.status = Trial.RUNNING
    rows = scheduler.rung_rows[0]
    scores = {"t0": float("nan"), "t1": -0.3, "t2": -0.1, "t3": -0.2}
    decisions = {}
    for t in trials:
        decisions[t.trial_id] = scheduler.on_trial_result(controller, t, {"score": scores[t.trial_id], "n_rows": rows})
        t.status = Trial.PAUSED if decisions[t.trial_id] == TrialScheduler.PAUSE else t.status
    assert decisions == {"t0": TrialScheduler.PAUSE, "t1": TrialScheduler.PAUSE, "t2": TrialScheduler.PAUSE,
                         "t3": TrialScheduler.CONTINUE}
    assert sorted(controller.stopped) == ["t0", "t1"]    # once rung 0 is ranked: t2 and t3 go on (sh keeps 2)
    assert scheduler.choose_trial_to_run(controller) is trials[2]   # paused and promoted: the scheduler's to start
    assert sorted(r for r in scheduler.results() if r[1] == 0) == [(0, 0, rows, float("inf")), (1, 0, rows, 0.3),
                                                                   (2, 0, rows, 0.1), (3, 0, rows, 0.2)]


# ------------------------------------------------------------------ Ctrl-C to a real driver, then Tuner.restore

def _ledger_rows(path) -> list[dict]:
    return _log(path) if os.path.exists(path) else []


@pytest.mark.process
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_sigint_mid_rung_then_tuner_restore_keeps_the_rung_order_and_the_row_budget(ray_session, tmp_path,
                                                                                    asynchronous):
    """SIGINT reaches the driver while rung 1 trains; the restored run finishes without granting any trial a rung
    the scheduler did not give it, and the rows of every fit started (the trainable's ledger, written before each
    fit) stay within budget_samples."""
    import signal
    import subprocess
    import sys
    import time

    driver = os.path.join(os.path.dirname(__file__), "pu_halving_driver.py")
    storage, ledger, state = str(tmp_path / "runs"), str(tmp_path / "ledger.jsonl"), str(tmp_path / "end.json")
    argv = [ray_session.get_runtime_context().gcs_address, storage, ledger, state] + \
        (["--asynchronous"] if asynchronous else [])
    proc = subprocess.Popen([sys.executable, driver, "start", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not any(line["rung"] == 1 for line in _ledger_rows(ledger)) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the driver ended before rung 1 began"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=180)
    before = _ledger_rows(ledger)
    assert any(line["rung"] == 1 for line in before)

    restored = subprocess.run([sys.executable, driver, "restore", *argv], capture_output=True, text=True,
                              timeout=600)
    assert restored.returncode == 0, restored.stderr[-3000:]
    scheduler = PUHalvingScheduler(**SETTINGS, asynchronous=asynchronous)
    scheduler.restore(state)
    assert scheduler.is_finished
    # every rung of the table was ranked in full (a job that could not be trained again ranks last)
    told = [sum(1 for _, t, _, _ in scheduler.results() if t == r.index) for r in scheduler.table.rungs]
    assert told == [r.n_configs for r in scheduler.table.rungs]
    # the budget holds for the rows actually trained, before and after the interrupt
    lines = _ledger_rows(ledger)
    assert sum(line["rows"] for line in lines) <= SETTINGS["budget_samples"]
    # no trial trained a rung it was not given: every fit is a (configuration, rung) the scheduler ranked
    ranked = {(XS[i], t) for i, t, _, _ in scheduler.results()}
    assert {(line["x"], line["rung"]) for line in lines} <= ranked
