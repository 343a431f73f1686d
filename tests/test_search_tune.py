"""The Tune adapters GPSearch and ParEGOSearch: conversion, bad input, and real Tuner runs."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from ray import tune

from raytune_fed.errors import ConfigError
from raytune_fed.search import GPSearch, ParEGOSearch
from raytune_fed.space import Categorical, Float, Int, SearchSpace
from raytune_fed.search._tune import TuneSpace

N_TRIALS = 10


def make_single_objective():
    # defined inside a function so cloudpickle ships it by value: tests/ is not importable on workers
    def single_objective(config: dict) -> dict:
        return {"loss": (config["x"] - 0.3) ** 2 + 0.1 * (config["k"] == "b") + 0.01 * config["n"]}
    return single_objective


def make_two_objectives():
    def two_objectives(config: dict) -> dict:
        x, y = config["x"], config["inner"]["y"]
        return {"a": x**2 + y / 100, "b": -((x - 1.0) ** 2) - 0.05 * (config["k"] == "b"), "other": 1.0}
    return two_objectives


GP_SPACE = {"x": tune.uniform(-1.0, 1.0), "lr": tune.loguniform(1e-3, 1.0), "n": tune.randint(1, 5),
            "k": tune.choice(["a", "b"]), "const": 7}
PAREGO_SPACE = {"x": tune.uniform(0.0, 1.0), "inner": {"y": tune.qrandint(0, 10, 2), "fixed": "z"},
                "k": tune.choice(["a", "b"]), "const": 3}


def fit(trainable, searcher, param_space, tmp_path, num_samples=N_TRIALS, name=None):
    tuner = tune.Tuner(
        trainable, param_space=param_space,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=num_samples, max_concurrent_trials=2,
                                    reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0))
    return tuner.fit()


# ------------------------------------------------------------------ no Ray session needed

def test_tune_domains_translate_to_search_space():
    ts = TuneSpace.build({
        "u": tune.uniform(-1, 2), "lu": tune.loguniform(1e-4, 1e-1), "ri": tune.randint(1, 5),
        "lri": tune.lograndint(1, 100), "qri": tune.qrandint(1, 10, 3), "qu": tune.quniform(0.0, 1.0, 0.25),
        "c": tune.choice(["x", "y", 3]), "nest": {"v": tune.uniform(0, 1), "const": [1, 2]}, "k": "keep"})
    assert ts.space.params == (
        Float("u", -1.0, 2.0), Float("lu", 1e-4, 1e-1, log=True), Int("ri", 1, 4), Int("lri", 1, 99, log=True),
        Int("qri", 1, 3), Int("qu", 0, 4), Categorical("c", ("x", "y", 3)), Float("nest/v", 0.0, 1.0))
    assert ts.quanta == {"qri": 3, "qu": 0.25}
    core = {"u": 0.5, "lu": 0.01, "ri": 4, "lri": 10, "qri": 2, "qu": 3, "c": 3, "nest/v": 0.2}
    out = ts.to_tune(core)
    assert out == {"u": 0.5, "lu": 0.01, "ri": 4, "lri": 10, "qri": 6, "qu": 0.75, "c": 3,
                   "nest": {"v": 0.2, "const": [1, 2]}, "k": "keep"}
    assert ts.from_tune(out) == core
    assert TuneSpace.from_state(ts.to_state()) == ts


BAD_INPUT = [
    (lambda: GPSearch(metric="loss", mode="maximize"), r"mode must be 'min' or 'max', got 'maximize'"),
    (lambda: GPSearch(metric=3, mode="min"), r"metric must be a non-empty string, got 3"),
    (lambda: GPSearch(GP_SPACE, n_initial_points=0), r"n_initial_points must be an integer >= 1, got 0"),
    (lambda: GPSearch({"x": tune.randn()}), r"parameter 'x': unsupported Tune domain Float with sampler _?Normal"),
    (lambda: GPSearch({"x": tune.grid_search([1, 2])}), r"grid search is not supported"),
    (lambda: GPSearch({"x": [tune.uniform(0, 1)]}), r"only nested dicts are supported"),
    (lambda: GPSearch({"c": 1}), r"space has no Tune domains"),
    (lambda: GPSearch(metric="loss", mode="min").suggest("t"), r"GPSearch has no search space"),
    (lambda: GPSearch(GP_SPACE).suggest("t"), r"needs metric and mode"),
    (lambda: GPSearch(GP_SPACE, "loss", "min").set_search_properties("acc", None, {}), r"metric='loss'.*'acc'"),
    (lambda: ParEGOSearch(metric=["a"], mode=["min"]), r"list of at least 2 metric names"),
    (lambda: ParEGOSearch(metric="a", mode="min"), r"list of at least 2 metric names, got 'a'"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min"]), r"one 'min'/'max' per metric \(2\)"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min", "up"]), r"mode must be 'min' or 'max', got 'up'"),
    (lambda: ParEGOSearch(metric=["a", "a"], mode=["min", "min"]), r"metric names must be distinct"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min", "min"], rho=-1), r"rho must be a finite number >= 0"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"]).set_search_properties(
        ["a", "b"], ["min", "min"], {}), r"not to TuneConfig"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"]).add_evaluated_point(
        {"x": 0.5, "inner": {"y": 2}, "k": "a"}, [1.0]), r"expected 2 values"),
]


@pytest.mark.parametrize("make, message", BAD_INPUT)
def test_bad_input_raises_config_error(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_add_evaluated_point_flips_max_and_ignores_errors():
    s = ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "max"], n_initial_points=3, seed=0)
    s.add_evaluated_point({"x": 0.5, "inner": {"y": 4}, "k": "a"}, {"a": 1.0, "b": 2.0})
    s.add_evaluated_point({"x": 0.2, "inner": {"y": 0}, "k": "b"}, [3.0, 4.0])
    s.add_evaluated_point({"x": 0.1, "inner": {"y": 0}, "k": "b"}, [3.0, 4.0], error=True)
    np.testing.assert_allclose(s.core.values, [[1.0, -2.0], [3.0, -4.0]])
    assert s.core.configs[0] == {"x": 0.5, "inner/y": 2, "k": "a"}


def test_points_to_evaluate_come_first_in_tune_form():
    first = {"x": 0.25, "lr": 0.01, "n": 3, "k": "b", "const": 7}
    s = GPSearch(GP_SPACE, "loss", "min", points_to_evaluate=[first], n_initial_points=3, seed=0)
    assert s.suggest("t0") == first
    assert s.suggest("t1") != first


def test_trial_without_metric_or_with_error_is_dropped():
    s = GPSearch(SearchSpace((Float("x", 0.0, 1.0),)), "loss", "max", n_initial_points=2, seed=0)
    for tid, result, error in [("t1", {"loss": 1.0}, False), ("t2", {"acc": 1.0}, False),
                               ("t3", {"loss": math.nan}, False), ("t4", None, True), ("t5", {"loss": 2.0}, False)]:
        assert s.suggest(tid) is not None
        s.on_trial_complete(tid, result, error=error)
    assert s.core.n_told == 2
    np.testing.assert_allclose(s.core.values, [-1.0, -2.0])


# ------------------------------------------------------------------ through tune.Tuner

def test_gpsearch_through_tuner(ray_session, tmp_path):
    searcher = GPSearch(metric="loss", mode="min", n_initial_points=4, seed=0)
    results = fit(make_single_objective(), searcher, GP_SPACE, tmp_path)
    assert len(results) == N_TRIALS and not results.errors
    df = results.get_dataframe()
    assert df["loss"].notna().all() and (df["config/const"] == 7).all()
    assert df["config/n"].between(1, 4).all() and set(df["config/k"]) <= {"a", "b"}
    assert searcher.core.n_told == N_TRIALS and not searcher._live
    np.testing.assert_allclose(np.sort(searcher.core.values), np.sort(df["loss"].to_numpy()))
    # Tune's own searcher checkpoint (written at the end of fit) restores the same state
    restored = GPSearch()
    restored.restore_from_dir(results.experiment_path)
    assert restored.core.n_told == N_TRIALS
    assert restored.suggest("next") == searcher.suggest("next")


def test_parego_search_through_tuner_and_restore(ray_session, tmp_path):
    searcher = ParEGOSearch(metric=["a", "b"], mode=["min", "max"], n_initial_points=4, seed=1)
    results = fit(make_two_objectives(), searcher, PAREGO_SPACE, tmp_path / "first")
    assert len(results) == N_TRIALS and not results.errors
    df = results.get_dataframe()
    assert df[["a", "b"]].notna().all().all()
    assert (df["config/inner/y"] % 2 == 0).all() and (df["config/inner/fixed"] == "z").all()
    core = searcher.core
    assert core.n_told == N_TRIALS
    # internals minimise: the maximised metric "b" is stored negated
    by_x = {round(c["x"], 12): v for c, v in zip(core.configs, core.values)}
    for x, a, b in df[["config/x", "a", "b"]].itertuples(index=False):
        np.testing.assert_allclose(by_x[round(x, 12)], [a, -b])

    path = str(tmp_path / "parego.pkl")
    searcher.save(path)
    with open(path, "rb") as fh:
        saved = pickle.load(fh)
    assert isinstance(saved, dict) and saved["kind"] == "ParEGOSearch" and saved["core"]["kind"] == "ParEGO"

    fresh = ParEGOSearch(metric=["a", "b"], mode=["min", "max"])
    fresh.restore(path)
    assert fresh.core.n_told == N_TRIALS
    twin = ParEGOSearch(metric=["a", "b"], mode=["min", "max"])
    twin.restore(path)
    assert [fresh.suggest(f"n{i}") for i in range(2)] == [searcher.suggest(f"n{i}") for i in range(2)]

    # the restored searcher continues in a new Tuner run and keeps its observations
    more = fit(make_two_objectives(), twin, PAREGO_SPACE, tmp_path / "second", num_samples=4)
    assert len(more) == 4 and not more.errors
    assert twin.core.n_told == N_TRIALS + 4


def test_parego_search_batches_for_pending_trials():
    s = ParEGOSearch(SearchSpace((Float("x", 0.0, 1.0), Float("y", 0.0, 1.0))), ["a", "b"], ["min", "min"],
                     n_initial_points=4, seed=2)
    assert s.set_max_concurrency(3) is True
    for i in range(5):
        c = s.suggest(f"t{i}")
        s.on_trial_complete(f"t{i}", {"a": c["x"], "b": 1 - c["x"] + c["y"]})
    assert s.core.n_told == 5
    first = s.suggest("p0")         # nothing pending: a batch of 1
    assert not s._buffer
    second = s.suggest("p1")        # one pending: a batch of 2 from spread weights, one buffered
    assert len(s._buffer) == 1 and s.core.last_weights_.shape == (2, 2)
    third = s.suggest("p2")         # served from the buffer
    assert s.suggest("p3") is None  # max_concurrent=3 reached
    assert len({tuple(c.values()) for c in (first, second, third)}) == 3
