"""The long tail: more cores for the last cells, and how busy the cores were (pure: no Ray calls).

Cells start longest first, one core each.  Once no cell waits to start, every core a
finished cell frees would sit idle until the grid ends; instead the executor lends it to a
running cell on the same node that can use it (``cell.max_parallelism`` > its grant), one
core at a time in the cells' order (longest first), so the last wave finishes sooner.
The cell reads its grant through :func:`raytune_fed.cores.available_cores` whenever it
starts a piece of parallel work; a grant changes how fast a cell runs, never its rows.

:func:`utilisation` measures the result: the share of the cluster's core time that cells
kept busy, from each cell's :class:`~raytune_fed.grid.Usage` (start, end, CPU seconds
of its process, cores granted), the tail included.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.grid._cell import Usage

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Running(Generic[K]):
    """A running cell as the grant logic sees it: its id, node, current grant and how many cores it can use."""

    key: K
    node: Hashable
    cores: int
    max_parallelism: int


def share_cores(node_cpus: Mapping[Hashable, float], running: Sequence[Running[K]]) -> dict[K, int]:
    """New grants: each node's free cores lent one at a time, round robin over its running cells in order.

    ``node_cpus`` is each node's CPU count; a node's free cores are its CPUs minus the
    grants of the cells running on it.  A cell never gets more than its
    ``max_parallelism`` and never loses cores it holds.  Returns every cell's grant.
    """
    grants = {cell.key: cell.cores for cell in running}
    by_node: dict[Hashable, list[Running[K]]] = {}
    for cell in running:
        by_node.setdefault(cell.node, []).append(cell)
    for node, cells in by_node.items():
        free = int(node_cpus.get(node, 0.0) + 1e-9) - sum(grants[c.key] for c in cells)
        while free > 0:
            hungry = [c for c in cells if grants[c.key] < c.max_parallelism]
            if not hungry:
                break
            for cell in hungry[:free]:
                grants[cell.key] += 1
            free -= min(free, len(hungry))
    return grants


def utilisation(usages: Sequence[Usage], n_cores: int, wall: float | None = None) -> dict[str, Any]:
    """How busy ``n_cores`` cores were over a grid's wall time (by default first start to last end).

    ``busy_share`` = CPU seconds of all cells / (cores x wall): the cores actually kept
    busy.  ``granted_share`` = core-seconds granted to cells / (cores x wall): the cores
    lent to cells (busy or not).  Both include the tail, when fewer cells run than cores.
    """
    n_cores = check_int("n_cores", n_cores, 1)
    if not usages:
        raise ConfigError("utilisation needs the usage of at least one cell, got none")
    start = min(u.start for u in usages)
    end = max(u.end for u in usages)
    span = end - start
    if wall is None:
        wall = span
    if not wall > 0:
        raise ConfigError(f"utilisation needs a positive wall time, got {wall!r}")
    cpu = sum(u.cpu_seconds for u in usages)
    granted = sum(_core_seconds(u) for u in usages)
    last_start = max(u.start for u in usages)
    return {
        "n_cells": len(usages), "n_cores": n_cores, "wall_seconds": float(wall), "cpu_seconds": float(cpu),
        "core_seconds_granted": float(granted), "busy_share": float(cpu / (n_cores * wall)),
        "granted_share": float(granted / (n_cores * wall)),
        "max_cores_per_cell": max(u.cores for u in usages),
        "n_cells_granted_more": sum(u.cores > 1 for u in usages),
        "tail_seconds": float(end - last_start),  # from the last cell's start (nothing left to start) to the end
    }


def _core_seconds(usage: Usage) -> float:
    if usage.core_seconds is None:  # Usage fills it in when built
        raise RuntimeError(f"usage {usage!r} has no core seconds")
    return usage.core_seconds
