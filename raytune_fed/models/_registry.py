"""The three RFMS learners, their search spaces (paper Table 3), and the model gate.

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

:func:`check_allowed_model` is what a curator runs before predicting with a model it
received: only the exact classes built here may run on its data.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.feature_selection import VarianceThreshold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier
from sklearn.tree._tree import Tree
from sklearn.utils.validation import check_is_fitted

from raytune_fed.errors import ConfigError, DatasetError, QueryRefusedError
from raytune_fed.models._elasticnet import ElasticNetLogistic, warm_up
from raytune_fed.models._forest import ProbabilityForest
from raytune_fed.models._forest import warm_up as forest_warm_up
from raytune_fed.models._codecs import ForestCodec, LinearCodec, RBFKernelCodec
from raytune_fed.models._records import ModelRecord, RecordCodec
from raytune_fed.space import Float, Int, SearchSpace

StepMaker = Callable[[Mapping[str, Any], "int | None"], list]


@dataclass(frozen=True)
class Learner:
    """A named learner: its search space, how a configuration becomes a pipeline, and
    what the rest of the package derives from it.

    ``record`` declares how a fitted model of this learner crosses a site boundary: the
    names, dtypes and shapes of its arrays, their size caps, the analyst-side encoder and
    the site's own predictor (:mod:`raytune_fed.models._records`); a learner without one
    can be tuned locally but never sent to a site.  ``step_types`` are the exact classes
    of the pipeline's steps (what :func:`check_allowed_model`, the legacy admission of
    pickled pipelines, allows); ``relative_cost`` orders a grid's cells longest first;
    ``warm_up`` (optional) pays one-off per-process costs such as numba compilation
    before a grid's timings start.  ``task`` is ``"pn"`` for learners fitted on class
    labels (the RFMS learners, in :data:`LEARNERS`) and ``"pu"`` for learners fitted on
    positive/unlabelled indicators (``raytune_fed.models.pu.PU_LEARNERS``).
    """

    name: str
    space: SearchSpace
    make_steps: StepMaker = field(repr=False, compare=False)
    step_types: tuple[type, ...] = field(default=(), repr=False, compare=False)
    relative_cost: float = 1.0
    warm_up: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    task: str = "pn"
    record: RecordCodec | None = field(default=None, repr=False, compare=False)

    def encode(self, config: Mapping[str, Any], pipeline: Pipeline) -> ModelRecord:
        """The :class:`ModelRecord` of ``pipeline`` fitted at ``config`` (what a site accepts)."""
        from raytune_fed.models._records import encode_model

        return encode_model(self.name, config, pipeline)

    def build(self, config: Mapping[str, Any], *, seed: int | None = None) -> Pipeline:
        """An unfitted pipeline for ``config`` (checked against :attr:`space`).

        ``seed`` sets the random state of randomised learners (the forest); the SVM and
        the elastic net are deterministic and ignore it.
        """
        self.space.validate(config)
        unknown = sorted(set(config) - set(self.space.names))
        if unknown:
            raise ConfigError(f"learner {self.name!r} has no parameters {unknown}; "
                              f"its parameters are {self.space.names}")
        return Pipeline([("drop_constant", VarianceThreshold(0.0)), *self.make_steps(config, seed)])


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
            Float("lambda", 2.0 ** -10, 2.0 ** 10, log=True))), _elastic_net_steps,
            step_types=(VarianceThreshold, StandardScaler, ElasticNetLogistic), relative_cost=3.0,
            warm_up=warm_up, record=LinearCodec()),
        Learner("svm", SearchSpace((
            Float("C", 2.0 ** -15, 2.0 ** 15, log=True),
            Float("sigma", 2.0 ** -15, 2.0 ** 15, log=True))), _svm_steps,
            step_types=(VarianceThreshold, StandardScaler, SVC), relative_cost=1.0, record=RBFKernelCodec()),
        Learner("random_forest", SearchSpace((
            Int("num_trees", 100, 5000),
            Int("min_node_size", 1, 50),
            Float("sample_fraction", 0.1, 1.0))), _random_forest_steps,
            step_types=(VarianceThreshold, ProbabilityForest), relative_cost=20.0, warm_up=forest_warm_up,
            record=ForestCodec()),
    )
}  # relative costs: experiments/bench_learners.py; the forest's from bench_forest.py (mean CV 2.6 s vs SVM 0.12 s)


def get_learner(name: str, task: str = "pn") -> Learner:
    """The registered learner called ``name`` for ``task`` (``"pn"``: RFMS learners, ``"pu"``: PU learners)."""
    if task == "pu":
        from raytune_fed.models.pu import PU_LEARNERS as registry
    elif task == "pn":
        registry = LEARNERS
    else:
        raise ConfigError(f"unknown learner task {task!r}; known tasks: ['pn', 'pu']")
    try:
        return registry[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown learner {name!r}; known learners: {sorted(registry)}") from None


# ---------------------------------------------------------------------------------------
# The model gate

_ALLOWED_STEP_TYPES: tuple[type, ...] = tuple(dict.fromkeys(t for lr in LEARNERS.values() for t in lr.step_types))
ALLOWED_MODEL_TYPES: tuple[type, ...] = (Pipeline, *_ALLOWED_STEP_TYPES)
# Objects a step may hold inside it: a forest's trees, their Cython tree structure, a
# random state.  Exact types only, and estimators are inspected recursively.
_NESTED_TYPES: tuple[type, ...] = (DecisionTreeClassifier, Tree, np.random.RandomState)
_PLAIN_SCALARS = frozenset({type(None), bool, int, float, str} | {
    np.dtype(code).type for code in "?bhilqBHILQefdgU"})
_MAX_DEPTH = 8


def _refuse(message: str) -> QueryRefusedError:
    return QueryRefusedError(f"model refused: {message}")


def _check_plain(value: Any, where: str, depth: int = 0) -> None:
    """Refuse anything a step holds that could run code other than the allowed classes."""
    kind = type(value)
    if depth > _MAX_DEPTH:
        raise _refuse(f"{where} is nested deeper than {_MAX_DEPTH} levels")
    if kind in _PLAIN_SCALARS:
        return
    if kind is np.ndarray:
        if value.dtype.kind in "biufU":
            return
        if value.dtype.kind == "O" and all(type(v) is str for v in value.ravel()):
            return  # feature_names_in_
        raise _refuse(f"{where} is an array of dtype {value.dtype}, not numbers or strings")
    if kind in (list, tuple):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]", depth + 1)
        return
    if kind is dict:
        for key, item in value.items():
            _check_plain(key, f"{where} key", depth + 1)
            _check_plain(item, f"{where}[{key!r}]", depth + 1)
        return
    if kind is DecisionTreeClassifier:
        for name, item in vars(value).items():
            _check_plain(item, f"{where}.{name}", depth + 1)
        return
    if kind in (Tree, np.random.RandomState):
        return
    raise _refuse(f"{where} holds a {kind.__module__}.{kind.__qualname__}, which is not allowed")


def check_allowed_model(model: Any, *, n_features: int) -> None:
    """Raise :class:`QueryRefusedError` unless ``model`` is a fitted pipeline of our classes.

    Checks, in order: the object is exactly a ``Pipeline`` (no subclass); every step is
    exactly one of the allowed step classes; every attribute of every step is plain data
    (numbers, strings, numeric arrays, or a forest's own trees) so no foreign callable
    rides along; every step is fitted; the pipeline expects ``n_features`` columns.
    """
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) or n_features < 1:
        raise ConfigError(f"n_features must be an integer >= 1, got {n_features!r}")
    if type(model) is not Pipeline:
        raise _refuse(f"expected exactly sklearn.pipeline.Pipeline, got {type(model).__module__}."
                      f"{type(model).__qualname__}")
    steps = vars(model).get("steps")
    if type(steps) is not list or not steps:
        raise _refuse(f"pipeline steps must be a non-empty list, got {type(steps).__qualname__}")
    for name, item in vars(model).items():
        if name != "steps":
            _check_plain(item, f"pipeline.{name}")
    allowed = ", ".join(t.__qualname__ for t in _ALLOWED_STEP_TYPES)
    for i, step in enumerate(steps):
        if type(step) is not tuple or len(step) != 2 or type(step[0]) is not str:
            raise _refuse(f"pipeline step {i} must be a (name, estimator) tuple, got {step!r:.80}")
        name, estimator = step
        if type(estimator) not in _ALLOWED_STEP_TYPES:
            raise _refuse(f"step {name!r} is a {type(estimator).__module__}.{type(estimator).__qualname__}; "
                          f"allowed step classes: {allowed}")
        for attr, item in vars(estimator).items():
            _check_plain(item, f"step {name!r} ({type(estimator).__qualname__}).{attr}")
        try:
            check_is_fitted(estimator)
        except NotFittedError:
            raise _refuse(f"step {name!r} ({type(estimator).__qualname__}) is not fitted") from None
    received = getattr(steps[0][1], "n_features_in_", None)
    if received != n_features:
        raise _refuse(f"model expects {received} features, the data has {n_features}")
