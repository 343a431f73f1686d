"""How cells run: the executor contract, and the in-process executor.

An executor takes the cells to run (already ordered) and ``run_cell`` and yields one
:class:`~raytune_fed.grid.Outcome` per cell as cells finish, in any order.  It catches what
a cell raises (the cell has failed; the others go on) but lets ``KeyboardInterrupt``
through; when the caller closes the iterator (normally, or because of an interrupt) the
executor submits nothing more (cells already running on Ray finish, or end with the driver).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Protocol, Sequence

from raytune_fed.grid._cell import Cell, CellError, Outcome, as_result

RunCell = Callable[[Cell], Any]


class Executor(Protocol):
    def run(self, cells: Sequence[Cell], run_cell: RunCell) -> Iterator[Outcome]:
        """Run ``cells`` and yield one outcome each (see the module notes)."""


class InProcessExecutor:
    """Runs cells one after another in this process (tests, debugging, small grids without Ray)."""

    def run(self, cells: Sequence[Cell], run_cell: RunCell) -> Iterator[Outcome]:
        for cell in cells:
            start = time.perf_counter()
            try:
                result = as_result(run_cell(cell))
            except Exception as exc:  # a failed cell is reported; the others still run
                yield Outcome(cell, None, CellError("failed", type(exc).__name__, str(exc) or repr(exc)),
                              time.perf_counter() - start)
            else:
                yield Outcome(cell, result, None, time.perf_counter() - start)
