"""Metrics: Pareto filtering, dominated hypervolume, win/loss matrices, and the scorers.

All objectives are minimised.  Hypervolume comes from pymoo (exact for any dimension);
only the bookkeeping around it lives here.  :mod:`raytune_fed.metrics.scorers` holds the
one copy of each loss (misclassification, AUC, log-loss).
"""

from raytune_fed.metrics._pareto import hypervolume, pareto_front, pareto_mask
from raytune_fed.metrics._winloss import win_loss_matrix
from raytune_fed.metrics.scorers import auc, log_loss, misclassification

__all__ = ["auc", "hypervolume", "log_loss", "misclassification", "pareto_front", "pareto_mask", "win_loss_matrix"]
