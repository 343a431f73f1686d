"""Ray Tune searchers: thin adapters around the ask/tell cores of :mod:`raytune_fed.algorithms`.

:class:`CoreSearcher` is the adapter base a new searcher subclasses (it only builds its
core); :class:`GPSearch`, :class:`ParEGOSearch` and :class:`NSGA2Search` are built on it; :class:`TuneSpace`
converts Tune domains to and from a :class:`~raytune_fed.space.SearchSpace`.  Everything
is loaded on first access, so ``import raytune_fed.search`` does not import Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"CoreSearcher": "_base", "GPSearch": "_searchers", "NSGA2Search": "_nsga2", "ParEGOSearch": "_searchers",
         "TuneSpace": "_tune_space"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"raytune_fed.search.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
