"""The fold cache (CVPlan): the same CV results as the pipeline, preprocessing done once."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.svm import SVC

from raytune_fed.errors import ConfigError
from raytune_fed.models import LEARNERS, CVPlan, cross_validate, cross_validated_error, get_learner


@pytest.fixture(scope="module")
def data():
    """Constant and duplicated columns, so the filter and the scaler both matter."""
    X, y = make_classification(n_samples=70, n_features=40, n_informative=6, n_redundant=0, random_state=3)
    X = np.column_stack([X * np.linspace(0.1, 50, 40) + 3.0, np.full(70, 2.0), X[:, :3]])
    X[:35, 40] = 1.0  # constant inside some training folds only
    return X, y


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_cached_cv_is_identical_to_the_pipeline(name, data):
    X, y = data
    learner = get_learner(name)
    configs = learner.space.latin_hypercube(4, np.random.default_rng(1))
    if name == "random_forest":
        configs = [{**c, "num_trees": 100 + c["num_trees"] // 50} for c in configs]  # the same space, fewer trees
    plan = CVPlan(X, y, n_folds=10, seed=9)
    for config in configs:
        plain = cross_validate(learner, config, X, y, n_folds=10, seed=9)
        cached = cross_validate(learner, config, X, y, n_folds=10, seed=9, cache=plan)
        assert cached == plain, config
    assert len(plan._prepared) == 1  # one preprocessing for all configurations


def test_cached_cv_of_a_plain_estimator_reuses_only_the_folds(data):
    X, y = data
    plan = CVPlan(X, y, n_folds=5, seed=0)
    assert cross_validated_error(SVC(), {"C": 3.0}, X, y, n_folds=5, seed=0, cache=plan) == \
        cross_validated_error(SVC(), {"C": 3.0}, X, y, n_folds=5, seed=0)
    assert plan.n_folds == 5 and len(plan.folds) == 5


def test_one_plan_serves_learners_with_different_preprocessing(data):
    X, y = data
    plan = CVPlan(X, y, n_folds=4, seed=2)
    net = {"alpha": 0.5, "lambda": 0.05}
    forest = {"num_trees": 100, "min_node_size": 3, "sample_fraction": 0.7}
    for name, config in (("elastic_net", net), ("random_forest", forest), ("svm", {"C": 2.0, "sigma": 0.01})):
        assert cross_validate(get_learner(name), config, X, y, n_folds=4, seed=2, cache=plan) == \
            cross_validate(get_learner(name), config, X, y, n_folds=4, seed=2)
    assert len(plan._prepared) == 2  # filter + scaler (net, svm) and filter only (forest)


@pytest.mark.parametrize("change, message", [
    ({"seed": 4}, r"built for n_folds=10, seed=3; got n_folds=10, seed=4"),
    ({"n_folds": 5}, r"built for n_folds=10, seed=3; got n_folds=5, seed=3"),
    ({"X": "shifted"}, r"built for other data \(X \(70, 44\)\), got X \(70, 44\)"),
    ({"X": "fewer"}, r"built for other data"),
    ({"y": "flipped"}, r"built for other data"),
    ({"warm_start": True}, r"warm_start and cache cannot be combined"),
    ({"cache": "plan"}, r"cache must be a CVPlan, got str"),
])
def test_a_cache_for_other_data_or_settings_is_refused(change, message, data):
    X, y = data
    plan = CVPlan(X, y, n_folds=10, seed=3)
    kwargs = {"n_folds": 10, "seed": 3, "cache": plan, **change}
    X = {"shifted": X + 1.0, "fewer": X[:-1]}.get(kwargs.pop("X", None), X)
    y = 1 - y if kwargs.pop("y", None) == "flipped" else y
    if isinstance(X, np.ndarray) and X.shape[0] != y.shape[0]:
        y = y[:-1]
    with pytest.raises(ConfigError, match=message):
        cross_validate(get_learner("elastic_net"), {"alpha": 0.5, "lambda": 0.1}, X, y, **kwargs)


def test_the_plan_draws_the_folds_cross_validate_draws(data):
    X, y = data
    plan = CVPlan(X, y, n_folds=7, seed=12)
    res = cross_validate(get_learner("svm"), {"C": 1.0, "sigma": 0.01}, X, y, n_folds=7, seed=12)
    assert res.n_folds == plan.n_folds == 7
    assert sorted(np.concatenate([test for _, test in plan.folds]).tolist()) == list(range(70))
