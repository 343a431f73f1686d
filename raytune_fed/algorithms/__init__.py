"""Search algorithm cores: plain numpy / scikit-learn code driven through ask/tell (no Ray)."""

from raytune_fed.algorithms.gp_bo import GPMinimizer
from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.algorithms.parego import ParEGO
from raytune_fed.algorithms.thresholdout import Thresholdout

__all__ = ["GPMinimizer", "ParEGO", "SuccessiveHalving", "Thresholdout"]
