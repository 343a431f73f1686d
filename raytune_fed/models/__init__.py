"""Learners of the RFMS paper (Table 3) as scikit-learn pipelines, and their CV objective.

``LEARNERS`` maps ``elastic_net``, ``svm`` and ``random_forest`` to a :class:`Learner`
(name, search space, ``build(config, seed=...)``, and the declared :class:`ModelRecord`
a fitted model travels as).  :func:`encode_model` turns a fitted pipeline into its record
(analyst side); :func:`rebuild_model` validates a record and gives the site's own
predictor.  :func:`cross_validated_error` is the open-box objective.
"""

from raytune_fed.models._cv import CVResult, cross_validate, cross_validated_error, stratified_folds
from raytune_fed.models._elasticnet import ElasticNetLogistic, warm_up
from raytune_fed.models._registry import (
    ALLOWED_MODEL_TYPES,
    LEARNERS,
    Learner,
    check_allowed_model,
    get_learner,
)
from raytune_fed.models._records import (
    ArraySpec, ModelRecord, RecordCodec, RecordError, SiteModel, encode_model, rebuild_model)

__all__ = [
    "ALLOWED_MODEL_TYPES",
    "ArraySpec",
    "ModelRecord",
    "RecordCodec",
    "RecordError",
    "SiteModel",
    "encode_model",
    "rebuild_model",
    "CVResult",
    "ElasticNetLogistic",
    "LEARNERS",
    "Learner",
    "check_allowed_model",
    "cross_validate",
    "cross_validated_error",
    "get_learner",
    "stratified_folds",
    "warm_up",
]
