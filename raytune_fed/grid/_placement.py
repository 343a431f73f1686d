"""Where cells can run, from the resources each live node declares (pure: no Ray calls).

The Ray executor reads the nodes with ``ray.nodes()`` and asks this module what a cell
requires (its demand with the site pin resolved), which sites it queries must have a live
node (:func:`needed_sites`, :func:`declared`), how many such cells the cluster can hold at
once (:func:`capacity`, 0 means never), and, when a cell cannot run, why
(:func:`why_unplaceable`, :func:`why_sites_missing`).  :class:`Slots` is the throttle: Ray lends a blocked task's CPU
to other tasks, so the executor keeps at most one running cell per CPU, and no more cells
of one kind in flight than the nodes that can host them hold, so cells waiting for a busy
site node never hold back cells that could run elsewhere.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from raytune_fed.grid._cell import Demand
from raytune_fed.runtime import site_placement

Requirement = tuple[tuple[str, float], ...]
_EPS = 1e-9


def alive_totals(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Total resources of each live node, from ``ray.nodes()``."""
    return [dict(n.get("Resources") or {}) for n in nodes if n.get("Alive")]


def requirement(demand: Demand, totals: Sequence[Mapping[str, float]], offered: Collection[str] = ()) -> Requirement:
    """The resources a cell asks Ray for, its site pin resolved against the resources the live nodes
    declare and those ``offered`` by node types the autoscaler can start."""
    need: dict[str, float] = {"CPU": float(demand.num_cpus)} if demand.num_cpus > 0 else {}
    need.update({k: float(v) for k, v in demand.resources.items()})
    if demand.site is not None:
        declared: Counter = Counter({r: 1.0 for r in offered})
        for node in totals:
            declared.update(node)
        need.update(site_placement(demand.site, declared).get("resources", {}))
    return tuple(sorted(need.items()))


def needed_sites(demand: Demand, totals: Sequence[Mapping[str, float]],
                 offered: Collection[str] = ()) -> tuple[str, ...]:
    """The ``site:<name>`` resources of the sites a cell queries (``demand.needs``) that live nodes, or node
    types the autoscaler can start (``offered``), declare when the grid starts: from then on some live node
    must declare each, or the site's actor has nowhere to run and the cell waits (a site nobody declares
    runs anywhere, as its actor does)."""
    wanted = sorted({f"site:{name}" for name in demand.needs})
    missing = set(undeclared(wanted, totals))
    return tuple(r for r in wanted if r in offered or r not in missing)


def undeclared(resources: Sequence[str], totals: Sequence[Mapping[str, float]]) -> list[str]:
    """Those of ``resources`` that no live node declares."""
    return [r for r in resources if not any(node.get(r, 0.0) > 0 for node in totals)]


def declared(resources: Sequence[str], totals: Sequence[Mapping[str, float]]) -> bool:
    """Whether some live node declares each of ``resources``."""
    return not undeclared(resources, totals)


def why_sites_missing(resources: Sequence[str], totals: Sequence[Mapping[str, float]]) -> str:
    """Which of ``resources`` no live node declares (call when :func:`declared` is False)."""
    return (f"no live node declares {', '.join(repr(r) for r in undeclared(resources, totals))}, so the actor of a "
            f"site this cell queries has nowhere to run (a site's rows stay on its own nodes)")


def _fits(node: Mapping[str, float], need: Requirement) -> int:
    return min((math.floor(node.get(r, 0.0) / amount + _EPS) for r, amount in need if amount > 0),
               default=10 ** 9)


def capacity(need: Requirement, totals: Sequence[Mapping[str, float]]) -> int:
    """How many cells requiring ``need`` the live nodes can run at the same time (0: none ever)."""
    return sum(_fits(node, need) for node in totals)


def why_unplaceable(need: Requirement, totals: Sequence[Mapping[str, float]]) -> str:
    """Why no live node can run a cell requiring ``need`` (call when :func:`capacity` is 0)."""
    wanted = dict(need)
    asked = ", ".join(f"{amount:g} {r}" for r, amount in need)
    custom = [r for r in wanted if r != "CPU"]
    if not totals:
        return f"the cluster has no live node (the cell needs {asked})"
    for r in custom:
        if not any(node.get(r, 0.0) > 0 for node in totals):
            return f"no live node declares resource {r!r} (the cell needs {asked})"
    hosts = [node for node in totals if all(node.get(r, 0.0) + _EPS >= wanted[r] for r in custom)]
    if custom and not hosts:
        return (f"no live node offers {', '.join(f'{wanted[r]:g} {r}' for r in custom)} together "
                f"(the cell needs {asked})")
    short = [r for r in wanted if all(node.get(r, 0.0) + _EPS < wanted[r] for node in hosts)]
    have = ", ".join(f"{max(node.get(r, 0.0) for node in hosts):g} {r}" for r in short)
    if custom:
        return f"the {len(hosts)} node(s) declaring {', '.join(custom)} offer at most {have} (the cell needs {asked})"
    return f"the largest live node offers {have} (the cell needs {asked})"


def autoscaler_request(backlog: Sequence[Requirement], groups: Sequence[tuple[Mapping[str, float], int]],
                       limit: int = 1000) -> list[dict[str, float]]:
    """The bundles to ask the autoscaler for (``request_resources``): the backlog's requirements that a
    cluster of every node type at its maximum count (``groups``: resources, most nodes) can hold at once.

    Ray's autoscaler (v2, as ``ray up`` runs it) ignores a request it cannot satisfy whole, so a
    backlog larger than the cluster can grow (two cells pinned to one site node of one CPU) would
    start no node at all.  Requirements naming a custom resource are packed first (their nodes are
    few), each bundle on the first node with room.  Without node types (nothing announced, or a
    type whose CPUs are unknown) the backlog is asked as it is.  At most ``limit`` bundles."""
    wanted = [need for need in backlog if need]
    nodes = [dict(resources) for resources, most in groups for _ in range(max(0, min(int(most), limit)))]
    if not nodes or any("CPU" not in node for node in nodes):
        return [dict(need) for need in wanted][:limit]
    bundles: list[dict[str, float]] = []
    for need in sorted(wanted, key=lambda n: not any(r != "CPU" for r, _ in n)):  # stable: pinned first
        for node in nodes:
            if all(node.get(r, 0.0) + _EPS >= amount for r, amount in need):
                for r, amount in need:
                    node[r] -= amount
                bundles.append(dict(need))
                break
        if len(bundles) >= limit:
            break
    return bundles


class Slots:
    """Cells in flight: their CPUs, and how many of each requirement (see the module notes)."""

    def __init__(self) -> None:
        self.cpus = 0.0
        self.by_need: Counter = Counter()

    def fits(self, need: Requirement, totals: Sequence[Mapping[str, float]]) -> bool:
        cpu = dict(need).get("CPU", 0.0)
        total_cpu = sum(node.get("CPU", 0.0) for node in totals)
        return self.by_need[need] < capacity(need, totals) and self.cpus + cpu <= total_cpu + _EPS

    def add(self, need: Requirement) -> None:
        self.cpus += dict(need).get("CPU", 0.0)
        self.by_need[need] += 1

    def remove(self, need: Requirement) -> None:
        self.cpus -= dict(need).get("CPU", 0.0)
        self.by_need[need] -= 1

    def __len__(self) -> int:
        return sum(self.by_need.values())
