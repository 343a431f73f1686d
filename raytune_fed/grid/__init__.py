"""The grid engine: run (or resume) a grid of cells into a results store, in-process or on Ray.

A grid is a list of :class:`Cell` specs (frozen, with a content key and a derived seed);
:func:`run_cells` runs those not yet stored with a workflow's ``run_cell``, longest first,
on an executor (:class:`InProcessExecutor`, :class:`RayExecutor`), stores each result as
it arrives, records failures without stopping the other cells, and returns the records
only when every cell is done.  Progress goes to a :class:`ProgressBar` on a terminal and
to :class:`ProgressLines` otherwise (:func:`make_progress` picks).  When fewer cells remain
than cores, :class:`RayExecutor` lends the idle cores to running cells that declare a
``max_parallelism`` (:func:`share_cores`); :func:`utilisation` measures how busy the
cores were from each cell's :class:`Usage`.
"""

from raytune_fed.grid._cell import MAX_CELLS, Cell, CellError, CellResult, Demand, Outcome, Usage, check_grid_size
from raytune_fed.grid._engine import GridIncompleteError, GridPlan, GridResult, GridSnapshot, plan_cells, run_cells
from raytune_fed.grid._executors import Executor, InProcessExecutor, Unplaceable
from raytune_fed.grid._grants import Running, share_cores, utilisation
from raytune_fed.grid._placement import Slots, alive_totals, capacity, requirement, why_unplaceable
from raytune_fed.grid._progress import Progress, ProgressBar, ProgressLines, make_progress, progress_to
from raytune_fed.grid._ray import MAX_RETRIES, RayExecutor, check_retry_options, wait_for_declared

__all__ = [
    "MAX_CELLS", "MAX_RETRIES", "Cell", "CellError", "CellResult", "Demand", "Executor", "GridIncompleteError",
    "GridPlan", "GridResult", "GridSnapshot", "InProcessExecutor", "Outcome", "Progress", "ProgressBar",
    "ProgressLines",
    "RayExecutor", "Running", "Slots", "Unplaceable", "Usage", "alive_totals", "capacity", "check_grid_size",
    "check_retry_options", "make_progress", "plan_cells", "progress_to", "requirement", "run_cells", "share_cores",
    "utilisation", "wait_for_declared", "why_unplaceable",
]
