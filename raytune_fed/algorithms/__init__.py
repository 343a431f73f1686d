"""Search algorithm cores: plain numpy / scikit-learn code driven through ask/tell (no Ray).

:class:`SearchCore` (``base``) is the protocol every core follows; :class:`GPSettings`
configures the GP-based cores (:class:`GPMinimizer`, :class:`ParEGO`).
"""

from raytune_fed.algorithms.base import SearchCore
from raytune_fed.algorithms.gp import GP_BO_SETTINGS, GPSettings
from raytune_fed.algorithms.gp_bo import GPMinimizer
from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.algorithms.parego import ParEGO
from raytune_fed.algorithms.thresholdout import Thresholdout

__all__ = ["GP_BO_SETTINGS", "GPMinimizer", "GPSettings", "ParEGO", "SearchCore", "SuccessiveHalving", "Thresholdout"]
