"""The grid's long tail: lending idle cores to the last cells, and measuring how busy the cores were.

Pure logic (grants, utilisation, the core context, CV folds on several threads) runs without
Ray; one test on the shared session shows a lone cell getting both cores and the same rows.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.pipeline import Pipeline

from raytune_fed.cores import available_cores, granted_cores
from raytune_fed.errors import ConfigError
from raytune_fed.grid import Cell, InProcessExecutor, RayExecutor, Running, Usage, run_cells, share_cores, utilisation
from raytune_fed.models import CVPlan, ElasticNetLogistic, cross_validate, get_learner
from raytune_fed.store import ResultStore

# ------------------------------------------------------------------ grants

@pytest.mark.parametrize("node_cpus, running, expected", [
    ({"a": 8}, [Running("x", "a", 1, 10), Running("y", "a", 1, 10)], {"x": 4, "y": 4}),
    ({"a": 8}, [Running("x", "a", 1, 10), Running("y", "a", 1, 10), Running("z", "a", 1, 10)],
     {"x": 3, "y": 3, "z": 2}),  # the odd core goes to the cells first in order (longest first)
    ({"a": 8}, [Running("x", "a", 1, 2), Running("y", "a", 1, 10)], {"x": 2, "y": 6}),  # capped
    ({"a": 4, "b": 4}, [Running("x", "a", 1, 10), Running("y", "b", 1, 10)], {"x": 4, "y": 4}),  # own node only
    ({"a": 2}, [Running("x", "a", 1, 10), Running("y", "a", 1, 10)], {"x": 1, "y": 1}),  # nothing free
    ({"a": 4}, [Running("x", "a", 3, 10), Running("y", "a", 1, 10)], {"x": 3, "y": 1}),  # nobody loses cores
    ({"a": 16}, [Running("x", "a", 1, 1)], {"x": 1}),  # a cell that cannot use more gets none
    ({}, [Running("x", "gone", 1, 10)], {"x": 1}),
])
def test_share_cores(node_cpus, running, expected):
    assert share_cores(node_cpus, running) == expected


# ------------------------------------------------------------------ utilisation

def test_utilisation_counts_cpu_and_granted_core_seconds_over_the_wall_time():
    usages = [Usage(0.0, 10.0, 9.0), Usage(0.0, 4.0, 4.0), Usage(4.0, 8.0, 7.0, cores=2, core_seconds=8.0)]
    u = utilisation(usages, 2)
    assert u["wall_seconds"] == 10.0
    assert u["busy_share"] == pytest.approx(20.0 / 20.0)
    assert u["granted_share"] == pytest.approx((10.0 + 4.0 + 8.0) / 20.0)
    assert (u["max_cores_per_cell"], u["n_cells_granted_more"], u["tail_seconds"]) == (2, 1, 6.0)
    assert utilisation(usages, 4, wall=20.0)["busy_share"] == pytest.approx(20.0 / 80.0)


def test_usage_grants_one_core_for_its_wall_time_by_default():
    assert Usage(3.0, 7.5, 1.0).core_seconds == 4.5


@pytest.mark.parametrize("usages, n_cores, wall, message", [
    ([], 2, None, r"at least one cell, got none"),
    ([Usage(0.0, 1.0, 1.0)], 0, None, r"n_cores must be an integer >= 1, got 0"),
    ([Usage(1.0, 1.0, 0.0)], 2, None, r"positive wall time, got 0.0"),
    ([Usage(0.0, 1.0, 1.0)], 2, -3.0, r"positive wall time, got -3.0"),
])
def test_bad_utilisation_input(usages, n_cores, wall, message):
    with pytest.raises(ConfigError, match=message):
        utilisation(usages, n_cores, wall)


# ------------------------------------------------------------------ the core context

def test_available_cores_is_one_without_a_grant_and_follows_the_innermost_grant():
    assert available_cores() == 1
    with granted_cores(3):
        assert available_cores() == 3
        grant = iter([2, 5])
        with granted_cores(lambda: next(grant)):
            assert (available_cores(), available_cores()) == (2, 5)
        assert available_cores() == 3
    assert available_cores() == 1


def test_a_grant_that_cannot_be_read_is_one_core():
    def broken() -> int:
        raise RuntimeError("actor gone")

    with granted_cores(broken):
        assert available_cores() == 1
    with granted_cores(lambda: 0):
        assert available_cores() == 1


@pytest.mark.parametrize("value, message", [(0, r"cores must be an integer >= 1, got 0"),
                                            (True, r"cores must be an integer >= 1, got True"),
                                            ("4", r"cores must be an integer >= 1, got '4'")])
def test_bad_fixed_grant(value, message):
    with pytest.raises(ConfigError, match=message):
        with granted_cores(value):
            pass


# ------------------------------------------------------------------ CV folds on several threads

@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=90, n_features=40, n_informative=5, random_state=3)
    return X, y


@pytest.mark.parametrize("name", ["elastic_net", "svm", "random_forest"])
@pytest.mark.parametrize("cached", [False, True])
def test_cv_on_several_cores_gives_the_one_core_result(name, cached, data):
    X, y = data
    learner = get_learner(name)
    configs = learner.space.latin_hypercube(3, np.random.default_rng(1))
    if name == "random_forest":
        configs = [{**c, "num_trees": 100} for c in configs]
    plan = CVPlan(X, y, n_folds=5, seed=7) if cached else None
    one = [cross_validate(learner, c, X, y, n_folds=5, seed=7, cache=plan) for c in configs]
    with granted_cores(4):
        four = [cross_validate(learner, c, X, y, n_folds=5, seed=7, cache=plan) for c in configs]
    assert four == one


def test_convergence_warnings_are_counted_per_fold_on_several_threads():
    X, y = make_classification(n_samples=40, n_features=200, random_state=0)
    estimator = Pipeline([("model", ElasticNetLogistic(alpha=0.0, lambda_=1e-4, max_iter=1))])
    with warnings.catch_warnings(), granted_cores(3):
        warnings.simplefilter("error")
        res = cross_validate(estimator, None, X, y, n_folds=4, seed=0)
    assert res.n_not_converged == 4


# ------------------------------------------------------------------ cells

@dataclass(frozen=True)
class ForestCell(Cell):
    """A cell that can use up to ``width`` cores: one 6-fold CV of a small forest."""

    width: int = 6

    def config(self) -> dict:
        return {"forest": self.width}

    @property
    def coordinates(self) -> tuple:
        return ("forest",)

    @property
    def root_seed(self) -> int:
        return 0

    @property
    def max_parallelism(self) -> int:
        return self.width


@dataclass(frozen=True)
class CrossValidate:
    """Runs a forest CV; with ``wait_for_cores`` first waits (up to 120 s) until the grid lends a second core."""

    wait_for_cores: bool = False

    def __call__(self, cell: ForestCell) -> list[dict]:
        deadline = time.monotonic() + 120.0
        while self.wait_for_cores and available_cores() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        cores = available_cores()
        X, y = make_classification(n_samples=80, n_features=30, random_state=5)
        res = cross_validate(get_learner("random_forest"), {"num_trees": 200, "min_node_size": 3,
                                                             "sample_fraction": 0.7}, X, y, n_folds=6, seed=11)
        return [{"error": res.error, "fold_errors": list(res.fold_errors), "cores_seen": cores}]


def test_in_process_cells_report_their_usage_on_one_core(tmp_path):
    result = run_cells([ForestCell()], CrossValidate(), ResultStore(tmp_path), InProcessExecutor())
    (usage,) = result.usages
    assert usage.cores == 1 and usage.end >= usage.start and usage.cpu_seconds > 0
    assert result.records[0].rows[0]["cores_seen"] == 1
    assert result.utilisation(1)["n_cells"] == 1


@pytest.fixture
def by_value():
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_a_lone_cell_on_ray_gets_both_cores_and_the_one_core_rows(ray_session, tmp_path, by_value):
    alone = run_cells([ForestCell()], CrossValidate(), ResultStore(tmp_path / "one"), InProcessExecutor())
    tail = run_cells([ForestCell()], CrossValidate(wait_for_cores=True), ResultStore(tmp_path / "tail"),
                     RayExecutor(poll_seconds=0.1, grant_refresh=0.05))
    (row,) = tail.records[0].rows
    assert row["cores_seen"] == 2
    assert tail.usages[0].cores == 2
    assert tail.usage_by_key()[ForestCell().key].cores == 2
    assert {k: v for k, v in row.items() if k != "cores_seen"} == \
        {k: v for k, v in alone.records[0].rows[0].items() if k != "cores_seen"}
