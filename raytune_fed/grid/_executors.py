"""How cells run: the executor contract, and the in-process executor.

An executor takes the cells to run (already ordered) and ``run_cell`` and yields one
:class:`~raytune_fed.grid.Outcome` per cell as cells finish, in any order.  It catches what
a cell raises (the cell has failed; the others go on) but lets ``KeyboardInterrupt``
through; when the caller closes the iterator (normally, or because of an interrupt) the
executor submits nothing more (cells already running on Ray finish, or end with the driver).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from raytune_fed.grid._cell import Cell, CellError, Outcome, Usage, as_result

C = TypeVar("C", bound=Cell)
RunCell = Callable[[C], Any]  # a workflow's run_cell takes its own kind of cell


class Executor(Protocol):
    def run(self, cells: Sequence[C], run_cell: RunCell[C],
            note: Callable[[str], None] | None = None) -> Iterator[Outcome]:
        """Run ``cells`` and yield one outcome each (see the module notes); ``note`` tells what the
        caller should know meanwhile (a cell retried after its worker died)."""


class InProcessExecutor:
    """Runs cells one after another in this process (tests, debugging, small grids without Ray), one core each."""

    def run(self, cells: Sequence[C], run_cell: RunCell[C],
            note: Callable[[str], None] | None = None) -> Iterator[Outcome]:
        for cell in cells:
            start, started, cpu = time.perf_counter(), time.time(), time.process_time()
            error: CellError | None
            try:
                result = as_result(run_cell(cell))
            except Exception as exc:  # a failed cell is reported; the others still run
                result, error = None, CellError("failed", type(exc).__name__, str(exc) or repr(exc))
            else:
                error = None
            usage = Usage(started, time.time(), time.process_time() - cpu)
            yield Outcome(cell, result, error, time.perf_counter() - start, usage)


class Unplaceable:
    """Runs nothing: reports every cell as ``unplaced`` with ``reason`` (a grid that found, before it
    started, that none of its cells can be placed, e.g. a site of it that no live node declares)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def run(self, cells: Sequence[C], run_cell: RunCell[C],
            note: Callable[[str], None] | None = None) -> Iterator[Outcome]:
        for cell in cells:
            yield Outcome(cell, None, CellError("unplaced", "Unplaceable", self.reason), 0.0)
