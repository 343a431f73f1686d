"""The Ray executor: one Ray task per cell, throttled to the cluster, retried when a worker dies.

* Each cell is a task holding ``cell.demand`` (one CPU by default; pinned to its site's
  node when one declares ``site:<name>``).  ``run_cell`` is shipped once (``ray.put``).
* A worker process that dies (killed, out of memory, node lost) is retried up to
  ``max_retries`` times by Ray; an exception raised by the cell is not retried (it would
  raise again) and is reported as the cell's failure.
* At most one cell runs per CPU of the (possibly growing) cluster, and cells of one
  requirement never take more slots than their nodes hold (see ``_placement``).  The
  backlog is announced to the autoscaler with ``request_resources`` and withdrawn at the end.
* A cell that no live node can host (a resource nobody declares, site nodes without
  enough CPUs, its node gone) waits ``placement_timeout`` seconds for the cluster to
  change and is then reported as ``unplaced`` with the reason; the other cells go on.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Iterator, Sequence

from raytune_fed._checks import check_float, check_int
from raytune_fed.errors import ConfigError
from raytune_fed.grid._cell import Cell, CellError, Outcome, as_result
from raytune_fed.grid._executors import RunCell
from raytune_fed.grid._placement import Requirement, Slots, alive_totals, capacity, requirement, why_unplaceable

_MAX_BUNDLES = 1000


def _run_one(run_cell: RunCell, cell: Cell) -> tuple[Any, float]:
    start = time.perf_counter()
    result = as_result(run_cell(cell))
    return result, time.perf_counter() - start


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

    def __init__(self, *, max_retries: int = 2, placement_timeout: float = 600.0, poll_seconds: float = 1.0) -> None:
        self.max_retries = check_int("max_retries", max_retries, 0)
        self.placement_timeout = check_float("placement_timeout", placement_timeout, 0.0)
        self.poll_seconds = check_float("poll_seconds", poll_seconds, 0.01)

    def run(self, cells: Sequence[Cell], run_cell: RunCell) -> Iterator[Outcome]:
        if not cells:
            return
        import ray

        if not ray.is_initialized():
            raise ConfigError("RayExecutor needs a connected Ray session (raytune_fed.runtime.connect())")
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False)(_run_one)
        shipped = ray.put(run_cell)
        totals = alive_totals(ray.nodes())
        queues: dict[Requirement, deque[tuple[int, Cell]]] = {}
        for index, cell in enumerate(cells):  # site pins are resolved once, when the grid starts
            queues.setdefault(requirement(cell.demand, totals), deque()).append((index, cell))
        slots = Slots()
        running: dict[Any, tuple[Cell, Requirement, float]] = {}
        blocked_since: dict[Requirement, float] = {}
        _ask_autoscaler([dict(need) for need, q in queues.items() for _ in range(len(q)) if need][:_MAX_BUNDLES])
        try:
            while any(queues.values()) or running:
                totals = alive_totals(ray.nodes())
                yield from self._expire(queues, running, slots, blocked_since, totals)
                while True:  # submit in the given order among the requirements that have room
                    heads = [(q[0][0], need) for need, q in queues.items() if q and slots.fits(need, totals)]
                    if not heads:
                        break
                    need = min(heads)[1]
                    _, cell = queues[need].popleft()
                    options: dict[str, Any] = {"num_cpus": dict(need).get("CPU", 0.0),
                                               "resources": {r: a for r, a in need if r != "CPU"}}
                    running[task.options(**options).remote(shipped, cell)] = (cell, need, time.perf_counter())
                    slots.add(need)
                if not running:
                    time.sleep(self.poll_seconds)
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self.poll_seconds)
                if ready:
                    ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
                for ref in ready:
                    cell, need, submitted = running.pop(ref)
                    slots.remove(need)
                    try:
                        result, seconds = ray.get(ref)
                    except Exception as exc:  # the cell raised, or its worker died beyond the retries
                        yield Outcome(cell, None, _error(exc), time.perf_counter() - submitted)
                    else:
                        yield Outcome(cell, result, None, seconds)
        finally:  # an interrupt, or the caller closed us.  Running cells are left alone: the driver's
            # exit takes its tasks along, and in a driver that lives on they finish and are dropped.
            # ray.cancel here raced replies already in flight and aborted Ray's core worker in this
            # process ("Tried to complete task that was not pending"), turning exit 130 into 1.
            running.clear()
            _ask_autoscaler([])

    def _expire(self, queues: dict, running: dict, slots: Slots, blocked_since: dict,
                totals: list) -> Iterator[Outcome]:
        """Report the cells no live node has been able to host for ``placement_timeout`` seconds."""
        import ray

        now = time.perf_counter()
        for need in {*(n for n, q in queues.items() if q), *(n for _, n, _ in running.values())}:
            if capacity(need, totals) > 0:
                blocked_since.pop(need, None)
                continue
            waited = now - blocked_since.setdefault(need, now)
            if waited < self.placement_timeout:
                continue
            error = CellError("unplaced", "Unplaceable",
                              f"no node can run this cell: {why_unplaceable(need, totals)}; waited {waited:.0f} s "
                              f"(placement_timeout)")
            while queues.get(need):
                _, cell = queues[need].popleft()
                yield Outcome(cell, None, error, 0.0)
            for ref in [r for r, (_, n, _) in running.items() if n == need]:
                cell, _, submitted = running.pop(ref)
                slots.remove(need)
                ray.cancel(ref)  # it is waiting for a node, not running
                yield Outcome(cell, None, error, now - submitted)
