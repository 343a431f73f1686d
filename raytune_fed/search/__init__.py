"""Ray Tune searchers: thin adapters around the ask/tell cores of :mod:`raytune_fed.algorithms`.

The adapters are loaded on first access, so ``import raytune_fed.search`` does not import Ray.
"""

from __future__ import annotations

from typing import Any

_LAZY = {"GPSearch", "ParEGOSearch"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from raytune_fed.search import _tune

        return getattr(_tune, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
