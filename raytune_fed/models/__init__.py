"""Learners of the RFMS paper (Table 3) as scikit-learn pipelines, and their CV objective.

``LEARNERS`` maps ``elastic_net``, ``svm`` and ``random_forest`` to a :class:`Learner`
(name, search space, ``build(config, seed=...)``, and the declared :class:`ModelRecord`
a fitted model travels as).  :func:`encode_model` turns a fitted pipeline into its record
(analyst side); :func:`rebuild_model` validates a record and gives the site's own
predictor.  :func:`cross_validated_error` is the open-box objective (with a :class:`CVPlan`
as ``cache``, per-fold preprocessing is done once per data set and seed).
:class:`ProbabilityForest` is ranger's probability forest; its fitted node arrays
(``FOREST_ARRAY_SPECS``) predict through :func:`predict_proba_from_arrays` after
:func:`check_forest_arrays`.
"""

from raytune_fed.models._cv import CVPlan, CVResult, cross_validate, cross_validated_error, stratified_folds
from raytune_fed.models._elasticnet import ElasticNetLogistic, warm_up
from raytune_fed.models._forest import (
    FOREST_ARRAY_SPECS,
    ProbabilityForest,
    check_forest_arrays,
    predict_proba_from_arrays,
)
from raytune_fed.models._learner import Learner
from raytune_fed.models._records import ArraySpec, ModelRecord, RecordCodec, RecordError, SiteModel
from raytune_fed.models._registry import LEARNERS, encode_model, get_learner, rebuild_model

__all__ = [
    "CVPlan",
    "ArraySpec",
    "ModelRecord",
    "RecordCodec",
    "RecordError",
    "SiteModel",
    "encode_model",
    "rebuild_model",
    "CVResult",
    "ElasticNetLogistic",
    "FOREST_ARRAY_SPECS",
    "LEARNERS",
    "Learner",
    "ProbabilityForest",
    "check_forest_arrays",
    "cross_validate",
    "cross_validated_error",
    "get_learner",
    "predict_proba_from_arrays",
    "stratified_folds",
    "warm_up",
]
