"""Metrics: Pareto filtering, dominated hypervolume, win/loss matrices, and the scorers.

All objectives are minimised.  Hypervolume comes from pymoo (exact for any dimension);
only the bookkeeping around it lives here.  :mod:`raytune_fed.metrics.scorers` holds the
one copy of each loss (misclassification, AUC, log-loss); :mod:`raytune_fed.metrics.pu` the
PU evaluators (AUC_PU, IPM_PU, the uPU/nnPU risks and the control variate).
"""

from raytune_fed.metrics._pareto import hypervolume, pareto_front, pareto_mask
from raytune_fed.metrics._winloss import win_loss_matrix
from raytune_fed.metrics.pu import (
    EVALUATORS,
    DensityRatio,
    auc_pu,
    bounded_scores,
    check_prior,
    control_variate,
    ipm_pu,
    nnpu_risk,
    pu_contributions,
    pu_score,
    upu_risk,
)
from raytune_fed.metrics.scorers import auc, log_loss, misclassification

__all__ = [
    "EVALUATORS",
    "DensityRatio",
    "auc",
    "auc_pu",
    "bounded_scores",
    "check_prior",
    "control_variate",
    "hypervolume",
    "ipm_pu",
    "log_loss",
    "misclassification",
    "nnpu_risk",
    "pareto_front",
    "pareto_mask",
    "pu_contributions",
    "pu_score",
    "upu_risk",
    "win_loss_matrix",
]
