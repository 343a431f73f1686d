"""How many cores this process may use right now (the grid engine's core grant).

A grid cell normally runs on one core.  When fewer cells remain than the cluster has
CPUs, the grid engine grants running cells more cores (see :mod:`raytune_fed.grid`) and
installs a *provider* here for the cell's duration; code that can split its work (the
folds of a cross-validation) asks :func:`available_cores` each time it starts such a
piece and uses that many threads.  Without a provider (tests, scripts, the in-process
executor) the answer is 1, so nothing changes.  A grant may only change how fast a result
comes, never the result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from raytune_fed._checks import check_int

_lock = threading.Lock()
_provider: Callable[[], int] | None = None


def available_cores() -> int:
    """Cores this process may use now: the installed provider's answer (at least 1), else 1."""
    provider = _provider
    if provider is None:
        return 1
    try:
        return max(1, int(provider()))
    except Exception:  # a grant that cannot be read is no grant: work goes on, on one core
        return 1


@contextmanager
def granted_cores(provider: Callable[[], int] | int) -> Iterator[None]:
    """Within the block, :func:`available_cores` answers ``provider()`` (or the fixed count given)."""
    global _provider
    if isinstance(provider, int) or not callable(provider):
        count = check_int("cores", provider, 1)
        provider = lambda: count  # noqa: E731
    with _lock:
        previous, _provider = _provider, provider
    try:
        yield
    finally:
        with _lock:
            _provider = previous


__all__ = ["available_cores", "granted_cores"]
