"""NSGA2Search in real Tune runs (concurrent generations, constraints, restore) and its bad input.

The shared searcher contract (lifecycle, concurrency, dropped trials, reproducibility,
checkpoints, bad input) runs in ``tests/test_contracts.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from ray import tune

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import hypervolume
from raytune_fed.search import NSGA2Search

SPACE = {"x": tune.uniform(0.0, 1.0), "y": tune.uniform(0.0, 1.0), "n": tune.randint(1, 5), "fixed": "z"}
POPULATION = 4


def make_problem(marker=None):
    # defined inside a function so cloudpickle ships it by value: tests/ is not importable on workers
    def problem(config: dict) -> dict:
        import time

        if marker is not None and _take(marker):
            raise RuntimeError("interrupted on purpose")
        start = time.time()
        time.sleep(0.3)
        x, g = config["x"], 1.0 + config["y"]
        return {"f1": x, "f2": g * (1.0 - (x / g) ** 0.5) + 0.1 * config["n"], "cost": float(config["n"]),
                "start": start, "end": time.time()}

    def _take(path):  # the first trial to see the marker removes it and fails; the others run
        import os

        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False
    return problem


def tuner(searcher, path, name, trainable, num_samples):
    return tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.5}), param_space=SPACE,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=num_samples,
                                    max_concurrent_trials=POPULATION),
        run_config=tune.RunConfig(storage_path=str(path), name=name, verbose=0))


@pytest.mark.parametrize("handling", ["domination", "penalty"])
def test_generations_run_as_concurrent_trials_with_constraints(ray_session, tmp_path, handling):
    # two generations: the second is bred from the first, and survives with it, under the constraint (every
    # trial starts an actor of about 2.5 CPU-seconds; a third generation repeated both steps with 4 more)
    searcher = NSGA2Search(metric=["f1", "f2"], mode=["min", "min"], seed=0, population_size=POPULATION,
                           n_generations=2, constraints={"cost": ("<=", 3.0)}, constraint_handling=handling)
    results = tuner(searcher, tmp_path, "run", make_problem(), num_samples=100).fit()
    assert len(results) == 2 * POPULATION and not results.errors  # n_generations ended the run
    df = results.get_dataframe()
    assert df["config/n"].between(1, 4).all() and (df["config/fixed"] == "z").all()
    core = searcher.core
    assert core.generation == 2 and core.is_finished and core.n_told == 2 * POPULATION
    # the constraint reached the core as cost - bound, the objectives unchanged
    told = {(round(c["x"], 12), round(c["y"], 12), c["n"]): (v, g)
            for c, v, g in zip(core.configs, core.values, core.constraint_values)}
    for x, y, n, f1, f2, cost in df[["config/x", "config/y", "config/n", "f1", "f2", "cost"]].itertuples(index=False):
        values, constraint = told[round(x, 12), round(y, 12), n]
        np.testing.assert_allclose(values, [f1, f2])
        np.testing.assert_allclose(constraint, [cost - 3.0])
    assert all(c["n"] <= 3 for c in core.pareto_configs())
    # that a generation's members run at the same time is a timing claim: measured by
    # experiments/bench_nsga2_concurrency.py, not asserted here (the suite must pass under load)


def test_a_tuner_run_evaluates_what_the_core_proposes_when_driven_directly(ray_session, tmp_path):
    """Through tune.Tuner (a generation as concurrent trials, finishing in whatever order) the search evaluates
    exactly the configurations the ask/tell core proposes at the same seed, so its hypervolume is the core's."""
    searcher = NSGA2Search(metric=["f1", "f2"], mode=["min", "min"], seed=7, population_size=POPULATION,
                           n_generations=3)
    df = tuner(searcher, tmp_path, "same", make_problem(), num_samples=100).fit().get_dataframe()
    core, problem = NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=7, population_size=POPULATION).core, \
        make_problem()
    for _ in range(3):
        configs = core.ask(100)
        core.tell(configs, [[problem(c)["f1"], problem(c)["f2"]] for c in configs])
    through_tune = sorted((round(x, 12), round(y, 12), int(n)) for x, y, n in df[["config/x", "config/y", "config/n"]]
                          .itertuples(index=False))
    direct = sorted((round(c["x"], 12), round(c["y"], 12), c["n"]) for c in core.configs)
    assert len(direct) == 3 * POPULATION and through_tune == direct
    assert hypervolume(df[["f1", "f2"]].to_numpy(), [1.1, 3.0]) == pytest.approx(hypervolume(core.values, [1.1, 3.0]))


def test_tuner_restore_continues_an_interrupted_run(ray_session, tmp_path):
    marker = tmp_path / "fail-once"
    marker.write_text("")
    searcher = NSGA2Search(metric=["f1", "f2"], mode=["min", "min"], seed=1, population_size=POPULATION,
                           n_generations=2)
    first = tuner(searcher, tmp_path, "exp", make_problem(str(marker)), num_samples=100)
    results = first.fit()
    assert len(results.errors) == 1
    assert not marker.exists()
    path = results.experiment_path
    assert tune.Tuner.can_restore(path)
    restored = tune.Tuner.restore(path, trainable=tune.with_resources(make_problem(), {"cpu": 0.5}),
                                  resume_errored=True)
    again = restored.fit()
    assert not again.errors and len(again) == 2 * POPULATION
    state = json.loads(json.dumps(_saved_searcher_state(path)))
    assert state["kind"] == "NSGA2Search" and state["core"]["core"]["generation"] == 2


def _saved_searcher_state(path):
    fresh = NSGA2Search(seed=5)
    fresh.restore_from_dir(path)
    return fresh.get_state()


@pytest.mark.parametrize("make, message", [
    (lambda: NSGA2Search(seed=0, population_size=1), r"population_size must be an integer >= 2, got 1"),
    (lambda: NSGA2Search(seed=0, n_generations=0), r"n_generations must be an integer >= 1, got 0"),
    (lambda: NSGA2Search(seed=0, constraints=["cost"]), r"constraints must be a dict \{metric: "),
    (lambda: NSGA2Search(seed=0, constraints={"cost": ("<", 5.0)}),
     r"constraint 'cost' operator must be one of \['<=', '>='\], got '<'"),
    (lambda: NSGA2Search(seed=0, constraints={"cost": 5.0}), r"constraint 'cost' must be \(operator, bound\)"),
    (lambda: NSGA2Search(seed=0, constraints={"cost": ("<=", float("nan"))}),
     r"constraint 'cost' bound must be a finite number, got nan"),
    (lambda: NSGA2Search(seed=0, constraints={"cost": ("<=", "5")}), r"bound must be a finite number, got '5'"),
    (lambda: NSGA2Search(seed=0, constraint_handling="ignore"),
     r"constraint_handling must be one of \['domination', 'penalty'\], got 'ignore'"),
    (lambda: NSGA2Search(seed=0, penalty=-1.0), r"penalty must be a finite number >= 0.0, got -1.0"),
    (lambda: NSGA2Search(seed=0, mutation_prob=2.0), r"mutation_prob must be in \[0, 1\], got 2.0"),
    (lambda: NSGA2Search(seed=0, crossover="blend"), r"crossover must be one of \['uniform', 'sbx'\], got 'blend'"),
    (lambda: NSGA2Search(seed=0, crossover_eta=2.0), r"crossover_eta applies to crossover='sbx' only"),
    (lambda: NSGA2Search(SPACE, ["f1", "f2"], ["min"], seed=0), r"mode"),
    (lambda: NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=0, points_to_evaluate=[{"x": 0.5}] * 5,
                         population_size=4).core, r"missing parameter"),
    (lambda: NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=0, population_size=2,
                         points_to_evaluate=[{"x": 0.5, "y": 0.5, "n": 1, "fixed": "z"}] * 3).core,
     r"points_to_evaluate has 3 configurations, more than population_size=2"),
])
def test_bad_input_raises_config_error(make, message):
    with pytest.raises(ConfigError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_a_trial_without_its_constraint_metric_is_dropped_and_counts_as_failed():
    searcher = NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=0, population_size=2,
                           constraints={"cost": ("<=", 3.0)})
    problem = make_problem()
    a, b = searcher.suggest("a"), searcher.suggest("b")
    searcher.on_trial_complete("a", problem(a))
    searcher.on_trial_complete("b", {k: v for k, v in problem(b).items() if k != "cost"})
    core = searcher.core
    assert core.n_told == 1 and core.generation == 1  # b closed the generation as a failure


def test_penalty_goes_to_the_objective_of_the_same_name_or_to_all():
    both = NSGA2Search(SPACE, ["f1", "cost"], ["min", "min"], seed=0,
                       constraints={"cost": ("<=", 3.0), "other": (">=", 1.0)}, constraint_handling="penalty")
    assert both.core.constrained_objectives == [1, None]


def test_the_proposal_record_names_each_trials_generation_whatever_order_trials_finish_in():
    def run(reverse):
        searcher = NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=3, population_size=POPULATION)
        searcher.set_max_concurrency(POPULATION)
        problem, n = make_problem(), 0
        for _ in range(3):
            ids = [f"t{n + i}" for i in range(POPULATION)]
            n += POPULATION
            configs = {t: searcher.suggest(t) for t in ids}
            assert searcher.suggest("extra") is None  # the next generation waits for this one
            for t in (ids[::-1] if reverse else ids):
                searcher.on_trial_complete(t, {k: v for k, v in problem(configs[t]).items() if k in ("f1", "f2")})
        return searcher, configs

    forward, last = run(False)
    backward, last_reversed = run(True)
    assert last == last_reversed  # finishing order changes nothing the searcher proposes
    assert forward.proposals == backward.proposals
    assert forward.proposals["t5"] == {"index": 5, "generation": 1}
    assert forward.members()["t5"] == (1, 1) and forward.members()["t11"] == (2, 3)
    # the record is part of the checkpoint
    restored = NSGA2Search(SPACE, ["f1", "f2"], ["min", "min"], seed=3, population_size=POPULATION)
    restored.set_state(json.loads(json.dumps(forward.get_state())))
    assert restored.members() == forward.members()
    assert restored.core.population_history() == forward.core.population_history()
    broken = json.loads(json.dumps(forward.get_state()))
    broken["proposals"]["t5"]["index"] = 0
    with pytest.raises(ConfigError, match="proposal indices are not 0..n-1"):
        restored.set_state(broken)
