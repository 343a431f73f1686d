"""Search spaces and model-based search: ask/tell cores and their Ray Tune adapters.

``SearchSpace`` and the cores (``GPMinimizer``, ``ParEGO``) are plain numpy/scikit-learn
code.  The Tune adapters (``GPSearch``, ``ParEGOSearch``) are loaded on first access, so
``import raytune_fed.search`` does not import Ray.
"""

from __future__ import annotations

from typing import Any

from raytune_fed.search.gp_bo import GPMinimizer
from raytune_fed.search.parego import ParEGO
from raytune_fed.search.space import Categorical, Float, Int, SearchSpace

_LAZY = {"GPSearch", "ParEGOSearch"}

__all__ = ["SearchSpace", "Float", "Int", "Categorical", "GPMinimizer", "ParEGO", "GPSearch", "ParEGOSearch"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from raytune_fed.search import _tune

        return getattr(_tune, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
