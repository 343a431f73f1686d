"""Multi-objective utilities: Pareto filtering, dominated hypervolume, win/loss matrices.

All objectives are minimised.  Hypervolume comes from pymoo (exact for any dimension);
only the bookkeeping around it lives here.
"""

from raytune_fed.metrics._pareto import hypervolume, pareto_mask, pareto_front
from raytune_fed.metrics._winloss import win_loss_matrix

__all__ = ["hypervolume", "pareto_front", "pareto_mask", "win_loss_matrix"]
