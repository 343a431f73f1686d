"""Learners of Table 3: spaces, builds, the elastic-net objective, the model gate, CV."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_selection import VarianceThreshold
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import check_estimator

from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.models import (
    ALLOWED_MODEL_TYPES,
    LEARNERS,
    ElasticNetLogistic,
    ProbabilityForest,
    check_allowed_model,
    cross_validate,
    cross_validated_error,
    get_learner,
)


@pytest.fixture(scope="module")
def data():
    """60 x 30, informative enough that every learner beats chance."""
    X, y = make_classification(n_samples=60, n_features=30, n_informative=5, n_redundant=0, class_sep=1.5,
                               random_state=0)
    return X, y


def _fitted(name: str, data, config=None):
    X, y = data
    learner = get_learner(name)
    config = config or learner.space.latin_hypercube(1, np.random.default_rng(3))[0]
    return learner.build(config, seed=0).fit(X, y)


# --------------------------------------------------------------------------- registry and spaces

def test_spaces_are_table_3():
    bounds = {name: {p.name: (p.low, p.high, getattr(p, "log", False)) for p in learner.space.params}
              for name, learner in LEARNERS.items()}
    assert bounds == {
        "elastic_net": {"alpha": (0.0, 1.0, False), "lambda": (2.0 ** -10, 2.0 ** 10, True)},
        "svm": {"C": (2.0 ** -15, 2.0 ** 15, True), "sigma": (2.0 ** -15, 2.0 ** 15, True)},
        "random_forest": {"num_trees": (100, 5000, False), "min_node_size": (1, 50, False),
                          "sample_fraction": (0.1, 1.0, False)},
    }


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_every_learner_builds_from_its_design_and_fits(name, data):
    X, y = data
    learner = get_learner(name)
    for config in learner.space.latin_hypercube(1, np.random.default_rng(7)):
        model = learner.build(config, seed=1)
        assert type(model) is Pipeline
        assert type(model.steps[0][1]) is VarianceThreshold and model.steps[0][1].threshold == 0.0
        model.fit(X, y)
        assert model.predict(X).shape == (60,)
        assert set(np.unique(model.predict(X))) <= {0, 1}
        check_allowed_model(model, n_features=30)
        # what a curator receives from another process
        check_allowed_model(pickle.loads(pickle.dumps(model)), n_features=30)


def test_builds_map_parameters_to_the_r_semantics():
    svm = get_learner("svm").build({"C": 4.0, "sigma": 0.125})
    assert [type(e) for _, e in svm.steps] == [VarianceThreshold, StandardScaler, SVC]
    assert (svm[-1].C, svm[-1].gamma, svm[-1].kernel) == (4.0, 0.125, "rbf")
    net = get_learner("elastic_net").build({"alpha": 0.25, "lambda": 2.0 ** -3})
    assert [type(e) for _, e in net.steps] == [VarianceThreshold, StandardScaler, ElasticNetLogistic]
    assert (net[-1].alpha, net[-1].lambda_) == (0.25, 0.125)
    forest = get_learner("random_forest").build({"num_trees": 300, "min_node_size": 7, "sample_fraction": 0.5},
                                                seed=11)
    assert [type(e) for _, e in forest.steps] == [VarianceThreshold, ProbabilityForest]
    assert (forest[-1].num_trees, forest[-1].min_node_size, forest[-1].sample_fraction, forest[-1].seed) == \
        (300, 7, 0.5, 11)


def test_unknown_learner_lists_known_names():
    with pytest.raises(ConfigError, match=r"unknown learner 'xgboost'.*elastic_net.*random_forest.*svm"):
        get_learner("xgboost")


@pytest.mark.parametrize("name, config, message", [
    ("elastic_net", {"alpha": 1.5, "lambda": 1.0}, r"'alpha'=1.5 is outside"),
    ("elastic_net", {"alpha": 0.5, "lambda": 2.0 ** 11}, r"'lambda'=2048.0 is outside"),
    ("elastic_net", {"alpha": 0.5}, r"missing parameter 'lambda'"),
    ("elastic_net", {"alpha": 0.5, "lambda": 1.0, "s": 1.0}, r"no parameters \['s'\]"),
    ("svm", {"C": 0.0, "sigma": 1.0}, r"'C'=0.0 is outside"),
    ("svm", {"C": 1.0, "sigma": "auto"}, r"'sigma'='auto' is not a number"),
    ("random_forest", {"num_trees": 50, "min_node_size": 5, "sample_fraction": 0.5}, r"'num_trees'=50"),
    ("random_forest", {"num_trees": 100.5, "min_node_size": 5, "sample_fraction": 0.5}, r"'num_trees'=100.5"),
    ("random_forest", {"num_trees": 100, "min_node_size": 5, "sample_fraction": 0.05}, r"'sample_fraction'=0.05"),
])
def test_bad_configs_are_refused(name, config, message):
    with pytest.raises(ConfigError, match=message):
        get_learner(name).build(config)


def test_constant_features_are_dropped_inside_the_pipeline(data):
    X, y = data
    X = np.column_stack([X, np.full(60, 3.0), X[:, :2], np.zeros(60)])
    small = {"elastic_net": {"alpha": 0.5, "lambda": 0.05}, "svm": {"C": 1.0, "sigma": 0.01},
             "random_forest": {"num_trees": 100, "min_node_size": 2, "sample_fraction": 0.7}}
    for name in LEARNERS:
        model = _fitted(name, (X, y), small[name])
        assert model[0].get_support().sum() == 32
        assert model[-1].n_features_in_ == 32
        assert model.n_features_in_ == 34


# --------------------------------------------------------------------------- ElasticNetLogistic

def _small_problem():
    X, y = make_classification(n_samples=80, n_features=6, n_informative=3, n_redundant=0, random_state=2)
    return StandardScaler().fit_transform(X), y


def test_lasso_with_large_lambda_is_the_intercept_only_model():
    X, y = _small_problem()
    y = np.r_[y[:60], np.zeros(20, dtype=int)]  # unbalanced: the intercept is not zero
    model = ElasticNetLogistic(alpha=1.0, lambda_=10.0).fit(X, y)
    assert np.all(model.coef_ == 0.0)
    np.testing.assert_allclose(model.intercept_[0], np.log(y.mean() / (1 - y.mean())), atol=1e-6)
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], y.mean(), atol=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("lambda_", [2.0 ** -6, 2.0 ** -2])
def test_solution_matches_scikit_learn_with_glmnet_scaling(alpha, lambda_):
    """glmnet's lambda is sklearn's 1 / (n C): the same optimum and probabilities."""
    X, y = _small_problem()
    ours = ElasticNetLogistic(alpha=alpha, lambda_=lambda_, tol=1e-9).fit(X, y)
    reference = LogisticRegression(solver="saga", l1_ratio=alpha, C=1.0 / (len(y) * lambda_), tol=1e-12,
                                   max_iter=100_000).fit(X, y)
    ref_model = ElasticNetLogistic(alpha=alpha, lambda_=lambda_)
    ref_model.classes_, ref_model.n_features_in_ = ours.classes_, ours.n_features_in_
    ref_model.coef_, ref_model.intercept_ = reference.coef_, reference.intercept_
    assert ours.objective(X, y) <= ref_model.objective(X, y) + 1e-9
    np.testing.assert_allclose(ours.objective(X, y), ref_model.objective(X, y), rtol=1e-6)
    np.testing.assert_allclose(ours.predict_proba(X), reference.predict_proba(X), atol=1e-4)
    np.testing.assert_allclose(ours.coef_, reference.coef_, atol=1e-3)


def test_labels_decision_and_probabilities_agree():
    X, y = _small_problem()
    labels = np.where(y == 1, "yes", "no")
    model = ElasticNetLogistic(alpha=0.5, lambda_=0.01).fit(X, labels)
    assert list(model.classes_) == ["no", "yes"]
    scores = model.decision_function(X)
    assert model.coef_.shape == (1, 6) and model.intercept_.shape == (1,)
    np.testing.assert_array_equal(model.predict(X), np.where(scores > 0, "yes", "no"))
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], 1 / (1 + np.exp(-scores)))


def test_warm_start_reaches_the_same_solution():
    X, y = _small_problem()
    cold = ElasticNetLogistic(alpha=0.3, lambda_=0.02, tol=1e-9).fit(X, y)
    warm = ElasticNetLogistic(alpha=0.3, lambda_=0.02, tol=1e-9).fit(
        X, y, coef_init=(cold.coef_ + 0.1, cold.intercept_ - 0.1))
    np.testing.assert_allclose(warm.coef_, cold.coef_, atol=1e-6)
    with pytest.raises(ValueError, match="coef_init has 5 coefficients, X has 6"):
        ElasticNetLogistic().fit(X, y, coef_init=(np.zeros(5), 0.0))


def test_iteration_cap_warns_and_is_recorded():
    X, y = make_classification(n_samples=40, n_features=200, random_state=0)  # separable: p >> n
    with pytest.warns(ConvergenceWarning, match=r"lambda_=0.0001.*max_iter=1"):
        model = ElasticNetLogistic(alpha=0.0, lambda_=1e-4, max_iter=1).fit(X, y)
    assert model.n_iter_ == 1 and model.converged_ is False
    assert ElasticNetLogistic(alpha=0.0, lambda_=1e-4).fit(X, y).converged_ is True


@pytest.mark.parametrize("params, message", [
    ({"alpha": 1.5}, r"alpha must be a real number in \[0, 1\], got 1.5"),
    ({"lambda_": 0.0}, r"lambda_ must be a finite real number > 0, got 0.0"),
    ({"lambda_": "1"}, r"lambda_ must be a finite real number > 0, got '1'"),
    ({"tol": -1.0}, r"tol must be"),
    ({"max_iter": 0}, r"max_iter must be an integer >= 1, got 0"),
])
def test_bad_estimator_parameters(params, message):
    X, y = _small_problem()
    with pytest.raises(ConfigError, match=message):
        ElasticNetLogistic(**params).fit(X, y)


def test_more_than_two_classes_is_refused():
    X, _ = _small_problem()
    with pytest.raises(ValueError, match=r"Only binary classification is supported.*got 3"):
        ElasticNetLogistic().fit(X, np.arange(80) % 3)


# Checks ElasticNetLogistic is expected to fail, with the reason.  Defaults lambda_=1,
# alpha=1 zero every coefficient on the check's unscaled blobs (correctly: that much
# penalty gives the intercept-only model), so the 0.83 training-accuracy bound is missed;
# the lightly penalised instance runs the same check and must pass it.
EXPECTED_FAILURES = {"check_classifiers_train": "default penalty zeroes all coefficients on the check's data"}
# scikit-learn itself skips this one unless SCIPY_ARRAY_API=1; we do not claim array-API support.
SKIPPED_BY_SKLEARN = {"check_array_api_input"}


@pytest.mark.parametrize("estimator, expected", [
    (ElasticNetLogistic(alpha=0.5, lambda_=0.01), {}),
    (ElasticNetLogistic(), EXPECTED_FAILURES),
], ids=["light_penalty", "defaults"])
def test_scikit_learn_estimator_checks(estimator, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None, expected_failed_checks=expected)
    unexpected = [(r["check_name"], r["status"], str(r["exception"])[:200]) for r in results
                  if not (r["status"] == "passed"
                          or (r["status"] == "xfail" and r["check_name"] in expected)
                          or (r["status"] == "skipped" and r["check_name"] in SKIPPED_BY_SKLEARN))]
    assert unexpected == []
    assert sum(r["status"] == "passed" for r in results) >= 50


# --------------------------------------------------------------------------- the model gate

class _PipelineSubclass(Pipeline):
    pass


class _SVCSubclass(SVC):
    pass


def _with_foreign_tree(data):
    model = _fitted("random_forest", data, {"num_trees": 100, "min_node_size": 5, "sample_fraction": 0.5})
    model[-1].trees_["hook"] = print
    return model


def _with_callable_kernel(data):
    X, y = data
    return Pipeline([("drop_constant", VarianceThreshold()), ("model", SVC(kernel=lambda a, b: a @ b.T))]).fit(X, y)


def _with_foreign_array(data):
    model = _fitted("elastic_net", data)
    model[1].scale_ = model[1].scale_.astype(object)
    return model


REFUSALS = [
    ("unfitted pipeline", lambda d: get_learner("svm").build({"C": 1.0, "sigma": 0.1}),
     r"step 'drop_constant' \(VarianceThreshold\) is not fitted"),
    ("pipeline subclass", lambda d: _PipelineSubclass([("model", SVC())]).fit(*d),
     r"expected exactly sklearn.pipeline.Pipeline, got .*_PipelineSubclass"),
    ("foreign step", lambda d: Pipeline([("model", LogisticRegression())]).fit(*d),
     r"step 'model' is a sklearn.linear_model.*LogisticRegression; allowed step classes: VarianceThreshold"),
    ("subclass of an allowed step", lambda d: Pipeline([("model", _SVCSubclass())]).fit(*d), r"_SVCSubclass"),
    ("forest with a foreign object", _with_foreign_tree, r"trees_\['hook'\] holds a builtins"),
    ("callable kernel", _with_callable_kernel, r"\(SVC\).kernel holds a builtins.function"),
    ("object array", _with_foreign_array, r"scale_ is an array of dtype object"),
    ("a lambda", lambda d: (lambda X: np.zeros(len(X))),
     r"expected exactly sklearn.pipeline.Pipeline, got builtins.function"),
    ("a dict", lambda d: {"steps": []}, r"got builtins.dict"),
    ("a bare estimator", lambda d: SVC().fit(*d), r"got sklearn.svm.*SVC"),
    ("wrong n_features", lambda d: _fitted("svm", d), r"model expects 30 features, the data has 31"),
]


@pytest.mark.parametrize("make, message", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_check_allowed_model_refuses(make, message, data):
    model = make(data)
    n_features = 31 if message.startswith("model expects") else 30
    with pytest.raises(QueryRefusedError, match=message):
        check_allowed_model(model, n_features=n_features)


def test_allowed_types_are_exactly_the_built_classes():
    assert set(ALLOWED_MODEL_TYPES) == {Pipeline, VarianceThreshold, StandardScaler, ElasticNetLogistic, SVC,
                                        ProbabilityForest}


# --------------------------------------------------------------------------- cross-validation

def test_cross_validated_error_is_reproducible_and_sensible(data):
    X, y = data
    learner = get_learner("elastic_net")
    config = {"alpha": 0.5, "lambda": 2.0 ** -4}
    first = cross_validated_error(learner, config, X, y, seed=5)
    assert first == cross_validated_error(learner, config, X, y, seed=5)
    assert first < 0.25
    forest = {"num_trees": 100, "min_node_size": 3, "sample_fraction": 0.8}
    assert cross_validated_error(get_learner("random_forest"), forest, X, y, n_folds=5, seed=1) == \
        cross_validated_error(get_learner("random_forest"), forest, X, y, n_folds=5, seed=1) < 0.5
    other = [cross_validated_error(learner, config, X, y, seed=s) for s in range(6, 10)]
    assert len({first, *other}) > 1  # the seed does shuffle the folds
    warm = cross_validate(learner, config, X, y, seed=5, warm_start=True)
    assert warm.error == pytest.approx(first)  # same optimum, other starting point


def test_cross_validation_accepts_a_plain_estimator(data):
    X, y = data
    res = cross_validate(SVC(), {"C": 10.0}, X, y, n_folds=4, seed=0)
    assert res.n_folds == 4 and len(res.fold_errors) == 4 and res.error == np.mean(res.fold_errors)


def test_fold_count_shrinks_to_the_rarer_class():
    X, y = make_classification(n_samples=40, n_features=5, weights=[0.9], random_state=0)
    y[np.flatnonzero(y == 1)[3:]] = 0  # three rows of class 1 left
    res = cross_validate(get_learner("svm"), {"C": 1.0, "sigma": 0.1}, X, y, n_folds=10, seed=0)
    assert res.n_folds == 3
    y[np.flatnonzero(y == 1)[1:]] = 0
    with pytest.raises(ConfigError, match="at least 2 rows of every class, class 1 has 1"):
        cross_validate(get_learner("svm"), {"C": 1.0, "sigma": 0.1}, X, y, seed=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_folds": 1}, r"n_folds must be an integer >= 2, got 1"),
    ({"seed": -1}, r"seed must be a non-negative integer, got -1"),
    ({"warm_start": True, "learner": "svm"}, r"warm_start is only supported for ElasticNetLogistic, not SVC"),
])
def test_bad_cv_options(kwargs, message, data):
    X, y = data
    learner = get_learner(kwargs.pop("learner", "elastic_net"))
    config = learner.space.latin_hypercube(1, np.random.default_rng(0))[0]
    kwargs.setdefault("seed", 0)
    with pytest.raises(ConfigError, match=message):
        cross_validate(learner, config, X, y, **kwargs)


def test_convergence_warnings_are_counted_not_shown():
    X, y = make_classification(n_samples=40, n_features=200, random_state=0)
    estimator = Pipeline([("model", ElasticNetLogistic(alpha=0.0, lambda_=1e-4, max_iter=1))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = cross_validate(estimator, None, X, y, n_folds=4, seed=0)
    assert res.n_not_converged == 4
