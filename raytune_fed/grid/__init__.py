"""The grid engine: run (or resume) a grid of cells into a results store, in-process or on Ray.

A grid is a list of :class:`Cell` specs (frozen, with a content key and a derived seed);
:func:`run_cells` runs those not yet stored with a workflow's ``run_cell``, longest first,
on an executor (:class:`InProcessExecutor`, :class:`RayExecutor`), stores each result as
it arrives, records failures without stopping the other cells, and returns the records
only when every cell is done.  Progress goes to a :class:`ProgressBar` on a terminal and
to :class:`ProgressLines` otherwise (:func:`make_progress` picks).
"""

from raytune_fed.grid._cell import MAX_CELLS, Cell, CellError, CellResult, Demand, Outcome, check_grid_size
from raytune_fed.grid._engine import GridIncompleteError, GridResult, run_cells
from raytune_fed.grid._executors import Executor, InProcessExecutor
from raytune_fed.grid._placement import Slots, alive_totals, capacity, requirement, why_unplaceable
from raytune_fed.grid._progress import Progress, ProgressBar, ProgressLines, make_progress
from raytune_fed.grid._ray import RayExecutor

__all__ = [
    "MAX_CELLS", "Cell", "CellError", "CellResult", "Demand", "Executor", "GridIncompleteError", "GridResult",
    "InProcessExecutor", "Outcome", "Progress", "ProgressBar", "ProgressLines", "RayExecutor", "Slots",
    "alive_totals", "capacity", "check_grid_size", "make_progress", "requirement", "run_cells", "why_unplaceable",
]
