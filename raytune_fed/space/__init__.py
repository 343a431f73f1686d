"""Search spaces as plain data: parameters, configurations and the unit-cube encoding.

No Ray here; :mod:`raytune_fed.search` converts Ray Tune domains into these types.
"""

from raytune_fed.space._params import Categorical, Float, Int, Param
from raytune_fed.space._space import SearchSpace

__all__ = ["Categorical", "Float", "Int", "Param", "SearchSpace"]
