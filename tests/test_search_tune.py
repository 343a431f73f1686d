"""The Tune adapters GPSearch and ParEGOSearch: conversion, bad input, and real Tuner runs.

The shared searcher contract (lifecycle, concurrency, dropped trials, reproducibility,
checkpoints, bad input) is in ``tests/test_contracts.py``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from ray import tune

from raytune_fed.errors import ConfigError
from raytune_fed.search import GPSearch, ParEGOSearch, TuneSpace
from raytune_fed.space import Categorical, Float, Int, SearchSpace

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


def make_edge_seeker():
    # best at the upper edge of lr's log range, so the searchers propose lr = 0.1 itself
    def edge_seeker(config: dict) -> dict:
        lr = config["lr"]
        return {"loss": -math.log10(lr) + 0.1 * config["x"] ** 2, "cost": math.log10(lr) + config["x"]}
    return edge_seeker


GP_SPACE = {"x": tune.uniform(-1.0, 1.0), "lr": tune.loguniform(1e-3, 1.0), "n": tune.randint(1, 5),
            "k": tune.choice(["a", "b"]), "const": 7}
PAREGO_SPACE = {"x": tune.uniform(0.0, 1.0), "inner": {"y": tune.qrandint(0, 10, 2), "fixed": "z"},
                "k": tune.choice(["a", "b"]), "const": 3}
EDGE_SPACE = {"lr": tune.loguniform(1e-4, 1e-1), "x": tune.uniform(-1.0, 1.0)}


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
    assert TuneSpace.from_state(json.loads(json.dumps(ts.to_state()))) == ts


BAD_INPUT = [
    (lambda: GPSearch(metric="loss", mode="maximize", seed=0), r"mode must be 'min' or 'max', got 'maximize'"),
    (lambda: GPSearch(metric=3, mode="min", seed=0), r"metric and mode must both be a single name"),
    (lambda: GPSearch(metric="loss", seed=0), r"need both metric and mode, got metric='loss', mode=None"),
    (lambda: GPSearch(GP_SPACE, seed=None), r"seed must be an integer >= 0, got None"),
    (lambda: GPSearch(GP_SPACE), r"missing 1 required keyword-only argument: 'seed'"),
    (lambda: GPSearch(GP_SPACE, seed=0, n_initial_points=0), r"n_initial_points must be an integer >= 1, got 0"),
    (lambda: GPSearch(GP_SPACE, seed=0, gp="fast"), r"gp must be a GPSettings, got 'fast'"),
    (lambda: GPSearch(["loss", "acc"], seed=0), r"space must be a SearchSpace or a dict of Tune domains"),
    (lambda: GPSearch({"x": tune.randn()}, seed=0), r"parameter 'x': unsupported Tune domain Float with sampler"),
    (lambda: GPSearch({"x": tune.grid_search([1, 2])}, seed=0), r"grid search is not supported"),
    (lambda: GPSearch({"x": [tune.uniform(0, 1)]}, seed=0), r"only nested dicts are supported"),
    (lambda: GPSearch({"c": 1}, seed=0), r"space has no Tune domains"),
    (lambda: GPSearch(GP_SPACE, ["a", "b"], ["min", "min"], seed=0), r"GPSearch needs exactly 1 metric"),
    (lambda: GPSearch(metric="loss", mode="min", seed=0).suggest("t"), r"GPSearch has no search space"),
    (lambda: GPSearch(GP_SPACE, seed=0).suggest("t"), r"needs metric and mode"),
    (lambda: GPSearch(GP_SPACE, "loss", "min", seed=0).set_search_properties("acc", None, {}),
     r"metric=\['loss'\] but the Tuner passed 'acc'"),
    (lambda: GPSearch(GP_SPACE, "loss", "min", seed=0).set_search_properties("loss", "max", {}),
     r"mode='min' but the Tuner passed 'max'"),
    (lambda: GPSearch(GP_SPACE, "loss", "min", seed=0, points_to_evaluate=[{"x": 5.0, "lr": 0.1, "n": 1, "k": "a"}])
     .suggest("t"), r"parameter 'x'=5.0 is outside"),
    (lambda: ParEGOSearch(metric=["a"], mode=["min"], seed=0), r"ParEGOSearch needs at least 2 metric"),
    (lambda: ParEGOSearch(metric="a", mode="min", seed=0), r"ParEGOSearch needs at least 2 metric"),
    (lambda: ParEGOSearch(seed=0), r"ParEGOSearch needs metric=\[...\] and mode=\[...\]"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min"], seed=0), r"one 'min'/'max' per metric \(2\)"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min", "up"], seed=0), r"mode must be 'min' or 'max', got 'up'"),
    (lambda: ParEGOSearch(metric=["a", "a"], mode=["min", "min"], seed=0), r"metric names must be distinct"),
    (lambda: ParEGOSearch(metric=["a", "b"], mode=["min", "min"], seed=0, rho=-1), r"rho must be a finite number"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"], seed=0).set_search_properties(
        ["a", "b"], ["min", "min"], {}), r"not to TuneConfig"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"], seed=0).add_evaluated_point(
        {"x": 0.5, "inner": {"y": 2}, "k": "a"}, [1.0]), r"expected 2 values"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"], seed=0).add_evaluated_point(
        {"x": 0.5, "inner": {"y": 3}, "k": "a"}, [1.0, 2.0]), r"parameter 'inner/y'=3 is not a multiple of 2"),
    (lambda: ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "min"], seed=0).add_evaluated_point(
        {"x": 0.5, "inner": {"y": 2}, "k": "a"}, {"a": 1.0}), r"no entry for metric\(s\) \['b'\]"),
]


@pytest.mark.parametrize("make, message", BAD_INPUT)
def test_bad_input_raises_config_error(make, message):
    with pytest.raises((ConfigError, TypeError), match=message):
        make()


def test_add_evaluated_points_flip_max_once():
    s = ParEGOSearch(PAREGO_SPACE, ["a", "b"], ["min", "max"], n_initial_points=3, seed=0)
    s.add_evaluated_point({"x": 0.5, "inner": {"y": 4}, "k": "a"}, {"a": 1.0, "b": 2.0})
    s.add_evaluated_point({"x": 0.2, "inner": {"y": 0}, "k": "b"}, [3.0, 4.0])
    s.add_evaluated_point({"x": 0.1, "inner": {"y": 0}, "k": "b"}, [3.0, 4.0], error=True)
    s.add_evaluated_points([{"x": 0.3, "inner/y": 10, "k": "a"}], [[5.0, 6.0]])
    np.testing.assert_allclose(s.core.values, [[1.0, -2.0], [3.0, -4.0], [5.0, -6.0]])
    assert s.core.configs[0] == {"x": 0.5, "inner/y": 2, "k": "a"}


def test_points_to_evaluate_come_first_in_tune_form():
    first = {"x": 0.25, "lr": 0.01, "n": 3, "k": "b", "const": 7}
    s = GPSearch(GP_SPACE, "loss", "min", points_to_evaluate=[first], n_initial_points=3, seed=0)
    assert s.suggest("t0") == first
    assert s.suggest("t1") != first


def test_metric_and_space_can_come_from_the_tuner():
    s = GPSearch(seed=0, n_initial_points=2)
    assert s.set_search_properties("loss", "max", GP_SPACE) is True
    config = s.suggest("t0")
    s.on_trial_complete("t0", {"loss": 2.0})
    assert s.core.space.names == ["x", "lr", "n", "k"] and config["const"] == 7
    np.testing.assert_allclose(s.core.values, [[-2.0]])
    assert s.set_search_properties(None, None, {"y": tune.uniform(0, 1)}) is False  # another space: Tune reports it


def test_concurrent_trials_are_asked_in_one_batch():
    s = ParEGOSearch(SearchSpace((Float("x", 0.0, 1.0), Float("y", 0.0, 1.0))), ["a", "b"], ["min", "min"],
                     n_initial_points=4, seed=2)
    for i in range(5):
        c = s.suggest(f"t{i}")
        s.on_trial_complete(f"t{i}", {"a": c["x"], "b": 1 - c["x"] + c["y"]})
    assert s.set_max_concurrency(3) is True
    batch = [s.suggest(f"p{i}") for i in range(3)]
    assert s.core.last_weights_.shape == (3, 2)  # one ask for the three free slots, spread weights
    assert s.suggest("p3") is None and len({tuple(c.values()) for c in batch}) == 3


# ------------------------------------------------------------------ through tune.Tuner

@pytest.mark.parametrize("make_searcher", [
    lambda: GPSearch(metric="loss", mode="min", n_initial_points=2, seed=0),
    lambda: ParEGOSearch(metric=["loss", "cost"], mode=["min", "min"], n_initial_points=2, seed=0),
], ids=["GPSearch", "ParEGOSearch"])
def test_loguniform_upper_edge_does_not_abort_the_tuner(ray_session, tmp_path, make_searcher):
    """The optimum sits at lr = 0.1, tune.loguniform's upper bound: proposals reach it exactly."""
    searcher = make_searcher()
    results = fit(make_edge_seeker(), searcher, EDGE_SPACE, tmp_path, num_samples=8)
    assert len(results) == 8 and not results.errors
    lrs = results.get_dataframe()["config/lr"]
    assert lrs.between(1e-4, 1e-1).all() and searcher.core.n_told == 8


def test_gpsearch_through_tuner(ray_session, tmp_path):
    searcher = GPSearch(metric="loss", mode="min", n_initial_points=4, seed=0)
    results = fit(make_single_objective(), searcher, GP_SPACE, tmp_path)
    assert len(results) == N_TRIALS and not results.errors
    df = results.get_dataframe()
    assert df["loss"].notna().all() and (df["config/const"] == 7).all()
    assert df["config/n"].between(1, 4).all() and set(df["config/k"]) <= {"a", "b"}
    assert searcher.core.n_told == N_TRIALS
    np.testing.assert_allclose(np.sort(searcher.core.values[:, 0]), np.sort(df["loss"].to_numpy()))
    # Tune's own searcher checkpoint (written at the end of fit) restores the same state
    restored = GPSearch(seed=1)
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
    # proposals may share x (at the box's edges, exactly): each result matches one of its x's rows
    for x, a, b in df[["config/x", "a", "b"]].itertuples(index=False):
        rows = [v for c, v in zip(core.configs, core.values) if round(c["x"], 12) == round(x, 12)]
        assert any(np.allclose(v, [a, -b]) for v in rows), (x, a, b, rows)

    path = tmp_path / "parego.json"
    searcher.save(str(path))
    saved = json.loads(path.read_text())
    assert saved["kind"] == "ParEGOSearch" and saved["core"]["kind"] == "ParEGO"

    fresh = ParEGOSearch(metric=["a", "b"], mode=["min", "max"], seed=9)
    fresh.restore(str(path))
    assert fresh.core.n_told == N_TRIALS
    twin = ParEGOSearch(metric=["a", "b"], mode=["min", "max"], seed=9)
    twin.restore(str(path))
    assert [fresh.suggest(f"n{i}") for i in range(2)] == [searcher.suggest(f"n{i}") for i in range(2)]

    # the restored searcher continues in a new Tuner run and keeps its observations
    more = fit(make_two_objectives(), twin, PAREGO_SPACE, tmp_path / "second", num_samples=4)
    assert len(more) == 4 and not more.errors
    assert twin.core.n_told == N_TRIALS + 4
