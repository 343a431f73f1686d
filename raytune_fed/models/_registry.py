"""The three RFMS learners and their search spaces (paper Table 3).

Each learner is a scikit-learn ``Pipeline`` whose first step drops constant features
(mlr's ``makeRemoveConstantFeaturesWrapper`` in the authors' code), mirroring the R
learners of the paper:

* ``elastic_net`` (glmnet): standardise, then :class:`ElasticNetLogistic` with
  ``alpha`` in [0, 1] and ``lambda`` in 2^[-10, 10] (log scale; mlr's ``s``).
  Difference: mlr fits glmnet's default lambda path and predicts at ``s`` by
  interpolation, clamped to the path's ends (the path stops at 1e-2 * lambda_max for
  p > n, or earlier once 99.9 % of the deviance is explained); here the problem is
  solved exactly at ``lambda``, so very small ``lambda`` values really are less
  penalised than in R.
* ``svm`` (kernlab ``ksvm``, RBF): standardise (ksvm's ``scaled=TRUE``), then ``SVC``
  with ``C`` and ``sigma`` in 2^[-15, 15] (log scale).  kernlab's RBF is
  ``exp(-sigma ||x - x'||^2)``, so ``sigma`` is sklearn's ``gamma``.  Differences: R's
  ``scale`` divides by the n-1 standard deviation (a factor sqrt(n/(n-1)) on distances);
  the authors predicted with ``predict.type = "prob"`` (Platt scaling), here the class is
  the sign of the decision function.
* ``random_forest`` (ranger, probability forest as the authors used
  ``predict.type = "prob"``): :class:`ProbabilityForest` (``_forest.py``, which lists its
  differences from ranger) with ``num_trees`` in [100, 5000], ``min_node_size`` in
  [1, 50], ``sample_fraction`` in [0.1, 1], mtry = floor(sqrt(p)), draws with
  replacement; ``build(config)`` without a seed gives it seed 0.  scikit-learn's
  ``RandomForestClassifier`` (``min_samples_split = min_node_size + 1``, which counts
  distinct rows where ranger counts draws) stays available as ``_sklearn_forest_steps``
  for ``experiments/bench_forest.py``, which measured both.

A fitted model reaches a site only as its declared record (``Learner.record``,
:mod:`raytune_fed.models._records`); the site rebuilds its own predictor from it
(:func:`rebuild_model`).  The registry sits above the codecs and the PU learners: it
knows learners by name (:func:`get_learner` for either task), the codecs know arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sklearn.ensemble import RandomForestClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from raytune_fed.errors import ConfigError
from raytune_fed.models._codecs import ForestCodec, LinearCodec, RBFKernelCodec
from raytune_fed.models._elasticnet import ElasticNetLogistic, warm_up
from raytune_fed.models._forest import ProbabilityForest
from raytune_fed.models._forest import warm_up as forest_warm_up
from raytune_fed.models._learner import Learner
from raytune_fed.models._records import Deadline, ModelRecord, RecordError, SiteModel, check_record
from raytune_fed.models.pu import PU_LEARNERS
from raytune_fed.space import Float, Int, SearchSpace


def _elastic_net_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("standardize", StandardScaler()),
            ("model", ElasticNetLogistic(alpha=float(config["alpha"]), lambda_=float(config["lambda"])))]


def _svm_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("standardize", StandardScaler()),
            ("model", SVC(kernel="rbf", C=float(config["C"]), gamma=float(config["sigma"])))]


def _random_forest_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("model", ProbabilityForest(num_trees=int(config["num_trees"]), min_node_size=int(config["min_node_size"]),
                                        sample_fraction=float(config["sample_fraction"]),
                                        seed=0 if seed is None else seed))]


def _sklearn_forest_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("model", RandomForestClassifier(
        n_estimators=int(config["num_trees"]), max_features="sqrt",
        min_samples_split=int(config["min_node_size"]) + 1, min_samples_leaf=1,
        bootstrap=True, max_samples=float(config["sample_fraction"]), n_jobs=1, random_state=seed))]


LEARNERS: Mapping[str, Learner] = {
    learner.name: learner for learner in (
        Learner("elastic_net", SearchSpace((
            Float("alpha", 0.0, 1.0),
            Float("lambda", 2.0 ** -10, 2.0 ** 10, log=True))), _elastic_net_steps, relative_cost=3.0,
            warm_up=warm_up, record=LinearCodec()),
        Learner("svm", SearchSpace((
            Float("C", 2.0 ** -15, 2.0 ** 15, log=True),
            Float("sigma", 2.0 ** -15, 2.0 ** 15, log=True))), _svm_steps, relative_cost=1.0,
            record=RBFKernelCodec()),
        Learner("random_forest", SearchSpace((
            Int("num_trees", 100, 5000),
            Int("min_node_size", 1, 50),
            Float("sample_fraction", 0.1, 1.0))), _random_forest_steps, relative_cost=20.0,
            warm_up=forest_warm_up, record=ForestCodec()),
    )
}  # relative costs: experiments/bench_learners.py; the forest's from bench_forest.py (mean CV 2.6 s vs SVM 0.12 s)


_REGISTRIES: Mapping[str, Mapping[str, Learner]] = {"pn": LEARNERS, "pu": PU_LEARNERS}


def get_learner(name: str, task: str = "pn") -> Learner:
    """The registered learner called ``name`` for ``task`` (``"pn"``: RFMS learners, ``"pu"``: PU learners)."""
    if not isinstance(task, str) or task not in _REGISTRIES:
        raise ConfigError(f"unknown learner task {task!r}; known tasks: {sorted(_REGISTRIES)}")
    registry = _REGISTRIES[task]
    try:
        return registry[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown learner {name!r}; known learners: {sorted(registry)}") from None


def encode_model(learner: str, config: Mapping[str, Any], pipeline: Any) -> ModelRecord:
    """The record of ``pipeline``, a fitted pipeline of learner ``learner`` at ``config`` (analyst side)."""
    return get_learner(learner).encode(config, pipeline)


def rebuild_model(record: Any, n_features: int, *, n_rows: int, deadline: Deadline | None = None) -> SiteModel:
    """Validate ``record`` against its learner's declaration for a site with ``n_features``
    columns and ``n_rows`` rows to score; raise :class:`RecordError` naming the first rule broken.

    The record must name a registered learner that declares a record; the rest is
    :func:`~raytune_fed.models._records.check_record`.  ``deadline()`` is called between the
    validation's steps (each bounded by the caps it enforces) and may raise
    :class:`TimeoutError` to stop it.
    """
    if type(record) is not ModelRecord:
        raise RecordError("a model must be sent as a ModelRecord")
    learner = LEARNERS.get(record.learner) if type(record.learner) is str else None
    if learner is None or learner.record is None:
        raise RecordError(f"record learner must be one of {sorted(n for n, lr in LEARNERS.items() if lr.record)}")
    return check_record(record, learner.space, learner.record, n_features, n_rows=n_rows, deadline=deadline)
