"""Ray Tune trial schedulers (decide when a trial continues, pauses or stops).

:class:`PUHalvingScheduler` runs ODE's halving search (synchronous rungs, or ASHA-like
asynchronous promotions) under a sample budget, as a thin adapter over
:class:`raytune_fed.algorithms.halving.SuccessiveHalving`.  Ray is imported here.
"""

from raytune_fed.schedulers._pu_halving import PUHalvingScheduler, PUHalvingStateCallback

__all__ = ["PUHalvingScheduler", "PUHalvingStateCallback"]
