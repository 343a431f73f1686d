"""Learners of the RFMS paper (Table 3) as scikit-learn pipelines, and their CV objective.

``LEARNERS`` maps ``elastic_net``, ``svm`` and ``random_forest`` to a :class:`Learner`
(name, search space, ``build(config, seed=...)``).  :func:`check_allowed_model` is the
gate a curator applies to a received model; :func:`cross_validated_error` is the
open-box objective.
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

__all__ = [
    "ALLOWED_MODEL_TYPES",
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
