"""The Ray executor: one Ray task per cell, throttled to the cluster, retried when a worker dies.

* Each cell is a task holding ``cell.demand`` (one CPU by default; pinned to its site's
  node when one declares ``site:<name>``).  ``run_cell`` is shipped once (``ray.put``).
* A cell whose worker process dies (killed, out of memory, its node lost) is run again, up
  to ``max_retries`` times, and each retry is reported (one line through ``note``): the
  executor, not Ray, retries, so the cell goes back to its queue and starts again only
  when a node can host it.  An exception raised by the cell is not retried (it would
  raise again) and is reported as the cell's failure.
* At most one cell runs per CPU of the (possibly growing) cluster, and cells of one
  requirement never take more slots than their nodes hold (see ``_placement``).  The
  backlog (cells waiting and running) is announced to the autoscaler with
  ``request_resources``, as much of it as the announced node types can hold at once, again
  whenever it shrinks, and withdrawn at the end.
* The long tail (``_grants``): once no cell waits to start, the cores that finished cells
  free are lent to running cells on the same node whose ``max_parallelism`` exceeds their
  grant.  A small actor holds the grants; a cell reads its own (at most every
  ``grant_refresh`` seconds) through :func:`raytune_fed.cores.available_cores`.  Ray still
  books one CPU per cell: the lent cores are ones no other cell will ask for.
* Each outcome carries the cell's :class:`~raytune_fed.grid.Usage` (start, end, CPU seconds
  of its worker process, cores granted), from which :func:`~raytune_fed.grid.utilisation`
  computes how busy the cluster was.
* A cell that no live node can host (a resource nobody declares, site nodes without
  enough CPUs, its node gone), or one that queries a site whose node is gone (its
  ``demand.needs``: the site's actor has nowhere to run, and Ray restarts it only on a
  node declaring its ``site:<name>``), waits ``placement_timeout`` seconds for the cluster
  to change and is then reported as ``unplaced`` with the reason; the other cells go on.
  A running cell waits inside for a restarting site actor, and is cancelled once that
  site has had no node for ``placement_timeout`` seconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from raytune_fed._checks import check_float, check_int
from raytune_fed.cluster import node_groups, offered_resources
from raytune_fed.cores import granted_cores
from raytune_fed.errors import ConfigError
from raytune_fed.grid._cell import CellError, Outcome, Usage, as_result
from raytune_fed.grid._executors import C, RunCell
from raytune_fed.grid._grants import Running, share_cores
from raytune_fed.grid._placement import (
    Slots,
    alive_totals,
    autoscaler_request,
    capacity,
    declared,
    needed_sites,
    requirement,
    undeclared,
    why_sites_missing,
    why_unplaceable,
)

if TYPE_CHECKING:
    from raytune_fed._ray_internals import RemoteFunction3


_MAX_BUNDLES = 1000
MAX_RETRIES = 100
"""Most times a cell may be retried after its worker died (a cell that keeps killing workers is broken)."""


def check_retry_options(max_retries: int, placement_timeout: float) -> tuple[int, float]:
    """``max_retries`` in [0, MAX_RETRIES] and a finite ``placement_timeout`` >= 0 (checked before Ray starts)."""
    return check_int("max_retries", max_retries, 0, MAX_RETRIES), check_float("placement_timeout",
                                                                               placement_timeout, 0.0)


class _Grants:
    """The actor that holds the tail's core grants: where each cell runs, and its grant."""

    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}
        self.cores: dict[str, int] = {}

    def started(self, key: str, node: str) -> None:
        self.nodes[key] = node

    def where(self) -> dict[str, str]:
        return dict(self.nodes)

    def grant(self, cores: dict[str, int]) -> None:
        self.cores.update(cores)

    def finished(self, key: str) -> None:
        self.nodes.pop(key, None)
        self.cores.pop(key, None)

    def cores_of(self, key: str) -> int:
        return self.cores.get(key, 1)


class _GrantReader:
    """A cell's view of its grant: asks the actor at most every ``refresh`` seconds, integrates core-seconds."""

    def __init__(self, grants: Any, key: str, refresh: float) -> None:
        self.grants, self.key, self.refresh = grants, key, refresh
        self.cores = self.most = 1
        self.since = self.asked = time.time()
        self.core_seconds = 0.0

    def __call__(self) -> int:
        import ray

        now = time.time()
        if now - self.asked >= self.refresh:
            self.asked = now
            try:
                cores = int(ray.get(self.grants.cores_of.remote(self.key)))
            except Exception:  # the grant actor is gone: keep what the cell holds
                return self.cores
            if cores != self.cores:
                self.core_seconds += self.cores * (now - self.since)
                self.cores, self.since, self.most = cores, now, max(self.most, cores)
        return self.cores

    def close(self) -> tuple[int, float]:
        return self.most, self.core_seconds + self.cores * (time.time() - self.since)


def _run_one(run_cell: RunCell[C], cell: C, grants: Any, refresh: float) -> tuple[Any, float, Usage]:
    start, started, cpu = time.perf_counter(), time.time(), time.process_time()
    if grants is None:
        result = as_result(run_cell(cell))
        return result, time.perf_counter() - start, Usage(started, time.time(), time.process_time() - cpu)
    import ray

    grants.started.remote(cell.key, ray.get_runtime_context().get_node_id())
    reader = _GrantReader(grants, cell.key, refresh)
    try:
        with granted_cores(reader):
            result = as_result(run_cell(cell))
    finally:
        grants.finished.remote(cell.key)
    most, core_seconds = reader.close()
    return result, time.perf_counter() - start, Usage(started, time.time(), time.process_time() - cpu, most,
                                                     core_seconds)


def _error(exc: BaseException) -> CellError:
    cause = getattr(exc, "cause", None)
    err = cause if isinstance(cause, BaseException) else exc
    return CellError("failed", type(err).__name__, str(err).strip() or repr(err))


def _ask_autoscaler(bundles: list[dict[str, float]]) -> None:
    """Tell a cluster's autoscaler what the backlog needs (an empty list withdraws the request).

    Cells are submitted only as fast as CPUs exist, so without this the autoscaler would
    never see the backlog.  A session without an autoscaler ignores it.
    """
    try:
        from ray.autoscaler.sdk import request_resources

        request_resources(bundles=bundles)
    except Exception:  # no autoscaler to ask (a local session)
        pass


class RayExecutor:
    """Runs each cell as a Ray task on the connected session (see the module notes)."""

    def __init__(self, *, max_retries: int = 2, placement_timeout: float = 600.0, poll_seconds: float = 1.0,
                 long_tail: bool = True, grant_refresh: float = 0.5) -> None:
        self.max_retries, self.placement_timeout = check_retry_options(max_retries, placement_timeout)
        self.poll_seconds = check_float("poll_seconds", poll_seconds, 0.01)
        if not isinstance(long_tail, bool):
            raise ConfigError(f"long_tail must be True or False, got {long_tail!r}")
        self.long_tail = long_tail
        self.grant_refresh = check_float("grant_refresh", grant_refresh, 0.0)

    def run(self, cells: Sequence[C], run_cell: RunCell[C],
            note: Callable[[str], None] | None = None) -> Iterator[Outcome]:
        if not cells:
            return
        import ray

        if not ray.is_initialized():
            raise ConfigError("RayExecutor needs a connected Ray session (raytune_fed.runtime.connect())")
        note = note or (lambda message: None)
        # retries are ours: see _retriable
        task: RemoteFunction3[tuple[Any, float, Usage], RunCell[C], C, Any, float] = \
            ray.remote(max_retries=0, retry_exceptions=False)(_run_one)
        shipped = ray.put(run_cell)
        grants = None
        if self.long_tail and any(cell.max_parallelism > 1 for cell in cells):
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            grants = ray.remote(num_cpus=0)(_Grants).options(scheduling_strategy=here).remote()  # dies with us only
        granted: dict[str, int] = {}
        totals = alive_totals(ray.nodes())
        offered = offered_resources()  # site nodes the autoscaler can start: their cells wait for them
        queues: dict[_Key, deque[tuple[int, C]]] = {}
        for index, cell in enumerate(cells):  # site pins are resolved once, when the grid starts
            key = (requirement(cell.demand, totals, offered), needed_sites(cell.demand, totals, offered))
            queues.setdefault(key, deque()).append((index, cell))
        slots = Slots()
        running: dict[Any, _Running[C]] = {}
        blocked_since: dict[_Key, float] = {}
        retries: dict[str, int] = {}
        groups = node_groups()  # the node types the autoscaler can start: ask only for what they can hold
        asked = -1
        try:
            while any(queues.values()) or running:
                backlog = [need for (need, _), q in queues.items() for _ in q] + [r.key[0] for r in running.values()]
                if len(backlog) != asked:  # the cluster's shape follows the cells left: idle nodes can go
                    _ask_autoscaler(autoscaler_request(backlog, groups, _MAX_BUNDLES))
                    asked = len(backlog)
                totals = alive_totals(ray.nodes())
                yield from self._expire(queues, running, slots, blocked_since, totals)
                if grants is not None and running and not any(queues.values()):
                    try:
                        self._lend(grants, granted, running)
                    except Exception:  # the grant actor is gone: the cells go on with what they hold
                        grants = None
                while True:  # submit in the given order among the cells that have room and their sites
                    heads = [(q[0][0], key) for key, q in queues.items()
                             if q and slots.fits(key[0], totals) and declared(key[1], totals)]
                    if not heads:
                        break
                    key = min(heads)[1]
                    index, cell = queues[key].popleft()
                    need = key[0]
                    options: dict[str, Any] = {"num_cpus": dict(need).get("CPU", 0.0),
                                               "resources": {r: a for r, a in need if r != "CPU"}}
                    ref = task.options(**options).remote(shipped, cell, grants, self.grant_refresh)
                    running[ref] = _Running(cell, key, index, time.perf_counter())
                    slots.add(need)
                if not running:
                    time.sleep(self.poll_seconds)
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.poll_seconds)
                if ready:
                    ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
                for ref in ready:
                    entry = running.pop(ref)
                    cell = entry.cell
                    slots.remove(entry.key[0])
                    granted.pop(cell.key, None)
                    try:
                        result, seconds, usage = ray.get(ref)
                    except Exception as exc:  # the cell raised, or its worker (or node) died
                        lost = _retriable(exc)
                        if lost and retries.get(cell.key, 0) < self.max_retries:
                            retries[cell.key] = retries.get(cell.key, 0) + 1
                            note(f"{cell.label}: {lost}; retrying it once a node can host it (retry "
                                 f"{retries[cell.key]} of {self.max_retries})")
                            queues[entry.key].appendleft((entry.index, cell))
                            continue
                        yield Outcome(cell, None, _error(exc), time.perf_counter() - entry.submitted)
                    else:
                        yield Outcome(cell, result, None, seconds, usage)
        finally:  # an interrupt, or the caller closed us.  Running cells are left alone: the driver's
            # exit takes its tasks along, and in a driver that lives on they finish and are dropped.
            # ray.cancel here raced replies already in flight and aborted Ray's core worker in this
            # process ("Tried to complete task that was not pending"), turning exit 130 into 1.
            running.clear()
            _ask_autoscaler([])

    def _lend(self, grants: Any, granted: dict[str, int], running: dict) -> None:
        """Lend the cores of each node that no running cell holds to the running cells there (see ``_grants``)."""
        import ray

        where = ray.get(grants.where.remote())
        cells = [entry.cell for entry in running.values()]
        if any(cell.key not in where for cell in cells):
            return  # a cell has not said where it runs yet: its node's free cores are unknown
        node_cpus = {n["NodeID"]: float((n.get("Resources") or {}).get("CPU", 0.0))
                     for n in ray.nodes() if n.get("Alive")}
        order = sorted(cells, key=lambda c: -float(c.cost))
        base = {c.key: max(1, math.ceil(c.demand.num_cpus)) for c in order}  # what Ray booked for the cell
        now = share_cores(node_cpus, [Running(c.key, where[c.key], granted.get(c.key, base[c.key]),
                                              max(int(c.max_parallelism), base[c.key])) for c in order])
        changed = {key: cores for key, cores in now.items() if cores != granted.get(key, base[key])}
        if changed:
            granted.update(changed)
            grants.grant.remote(changed)

    def _expire(self, queues: dict, running: dict, slots: Slots, blocked_since: dict,
                totals: list) -> Iterator[Outcome]:
        """Report the cells that have had no live node to run on, or no live node for a site they query,
        for ``placement_timeout`` seconds (running ones that wait for such a site are cancelled)."""
        import ray

        now = time.perf_counter()
        for key in {*(k for k, q in queues.items() if q), *(entry.key for entry in running.values())}:
            need, sites = key
            if capacity(need, totals) > 0 and declared(sites, totals):
                blocked_since.pop(key, None)
                continue
            waited = now - blocked_since.setdefault(key, now)
            if waited < self.placement_timeout:
                continue
            why = why_unplaceable(need, totals) if capacity(need, totals) == 0 else why_sites_missing(sites, totals)
            error = CellError("unplaced", "Unplaceable",
                              f"no node can run this cell: {why}; waited {waited:.0f} s (placement_timeout)")
            while queues.get(key):
                _, cell = queues[key].popleft()
                yield Outcome(cell, None, error, 0.0)
            for ref in [r for r, entry in running.items() if entry.key == key]:
                entry = running.pop(ref)
                slots.remove(need)
                ray.cancel(ref)  # waiting for a node, or inside for a site's actor that cannot start
                yield Outcome(entry.cell, None, error, now - entry.submitted)


_Key = tuple  # (Requirement, the site resources the cell's queries need declared somewhere)


@dataclass(frozen=True)
class _Running(Generic[C]):
    cell: C
    key: _Key
    index: int
    submitted: float


def wait_for_declared(resources: Sequence[str], timeout: float, note: Callable[[str], None] | None = None,
                      poll: float = 1.0) -> list[str]:
    """Wait up to ``timeout`` seconds until some live node declares each of ``resources``; the ones
    still missing then (empty: all there)."""
    import ray

    give_up = time.monotonic() + timeout
    told = False
    while True:
        totals = alive_totals(ray.nodes())
        missing = undeclared(resources, totals)
        if not missing or time.monotonic() >= give_up:
            return missing
        if not told and note is not None:
            note(f"no live node declares {', '.join(repr(r) for r in missing)}: waiting up to {timeout:.0f} s "
                 f"(placement timeout) for one")
            told = True
        time.sleep(poll)


def _retriable(exc: BaseException) -> str | None:
    """What was lost when a cell failed for a reason other than its own code (its worker process or node
    died, it was killed for memory): then it is run again.  None for an exception the cell raised."""
    from ray import exceptions as rx

    lost = (rx.WorkerCrashedError, rx.NodeDiedError, rx.LocalRayletDiedError, rx.OutOfMemoryError,
            rx.ObjectLostError, rx.RaySystemError)
    if isinstance(exc, lost):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"its worker was lost ({type(exc).__name__}{': ' + first[:160] if first else ''})"
    return None
