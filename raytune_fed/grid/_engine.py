"""``run_cells``: run (or resume) a grid of cells into a results store.

1. Every cell's key is looked up in the store (:func:`plan_cells`): stored cells are
   skipped; a damaged unit file (one that fails the store's checks or the cell's own
   :meth:`~raytune_fed.grid.Cell.check_rows`) is reported by name and its cell is not run
   unless ``recompute_damaged`` (then the file goes to the store's quarantine first).
2. The remaining cells run longest first (by ``cell.cost``; ties keep the given order) on
   the executor; each result is stored as it arrives, each failure is kept in the store's
   ``failures/`` with its error, and the other cells go on; a store that cannot write (a full
   or read-only disk) stops the grid at once with a :class:`GridIncompleteError` naming the
   file, since every later cell would fail the same way (no file is left half-written).
3. Only when every cell is stored does ``run_cells`` return their records; otherwise it
   raises :class:`GridIncompleteError` naming what is missing and what to do, after
   running everything it could.  An interrupt (Ctrl-C, or SIGTERM turned into one) stops
   the executor and leaves the store as it is: the same call resumes.
4. While the grid runs, ``on_partial`` (if given) is handed a :class:`GridSnapshot` of the
   cells stored so far: after a cell is stored, at most every ``partial_every`` seconds
   (and no sooner than ten times the last call took; ``partial_every=0``: after every
   cell but the one that completes the grid), and once more when the grid
   stops incomplete (failures, damaged files, an interrupt).  A grid that completes gets no
   final snapshot: its caller writes the complete results.  A workflow passes
   ``raytune_fed.workflows._results.PartialResults``, which keeps ``OUT/results.partial.parquet``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

import pandas as pd

from raytune_fed._checks import check_float
from raytune_fed.errors import ConfigError, RaytuneFedError, StoreError
from raytune_fed.grid._cell import CellError, Outcome, Usage, check_grid_size
from raytune_fed.grid._executors import C, Executor, InProcessExecutor, RunCell
from raytune_fed.grid._grants import utilisation
from raytune_fed.grid._progress import Progress, Silent
from raytune_fed.store import CellState, Record, ResultStore, StoreWriteError, as_stored, damaged_message


class GridIncompleteError(RaytuneFedError, RuntimeError):
    """Some cells of a grid did not finish (failed, unplaced, or damaged in the store).

    ``problems`` lists ``(cell label, what happened)``; the finished cells are stored.
    """

    def __init__(self, message: str, problems: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclass(frozen=True)
class GridResult:
    """The records of every cell of a finished grid, in the cells' order."""

    records: tuple[Record, ...]
    n_run: int
    n_resumed: int
    seconds: float
    usages: tuple[Usage, ...] = ()
    usage_keys: tuple[str, ...] = ()  # the key of the cell each usage belongs to (same order)

    def usage_by_key(self) -> dict[str, Usage]:
        """What each cell run by this call used, by cell key."""
        return dict(zip(self.usage_keys, self.usages))

    def utilisation(self, n_cores: int) -> dict[str, Any]:
        """How busy ``n_cores`` cores were while the cells of this call ran (see
        :func:`~raytune_fed.grid.utilisation`)."""
        return utilisation(self.usages, n_cores, self.seconds)

    def frame(self) -> pd.DataFrame:
        """One row per stored row: the row's values, then its timings, then ``cell_key``."""
        return records_frame(self.records)


def records_frame(records: Sequence[Record]) -> pd.DataFrame:
    """One row per stored row of ``records``: the row's values, then its timings, then ``cell_key``."""
    rows = [{**row, **timing, "cell_key": rec.key} for rec in records for row, timing in zip(rec.rows, rec.timing)]
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class GridSnapshot:
    """The part of a grid stored so far: what ``run_cells`` hands its ``on_partial`` hook.

    ``records`` are the stored cells' records in the cells' order (resumed ones included),
    ``missing`` the labels of the cells not stored (in the cells' order), ``n_cells`` the
    grid's size and ``name`` the grid's (``"rfms"``, ``"pu"``).  :meth:`frame` has the rows
    the complete grid's :meth:`GridResult.frame` would hold for these cells.
    """

    name: str
    records: tuple[Record, ...]
    missing: tuple[str, ...]
    n_cells: int

    @property
    def n_done(self) -> int:
        return len(self.records)

    def frame(self) -> pd.DataFrame:
        return records_frame(self.records)


class _Snapshots:
    """Hands ``on_partial`` a snapshot of the stored cells, throttled (see the module notes, point 4).

    The records of cells stored before this call are read from the store at the first snapshot and
    kept; each newly stored cell is read once.  A hook that fails (e.g. a full disk) is told once on
    the progress display and does not stop the grid: the unit files are what resume reads."""

    def __init__(self, cells: Sequence[C], store: ResultStore, name: str, hook: Callable[[GridSnapshot], None],
                 every: float, note: Callable[[str], None], done: set[str]) -> None:
        self.cells, self.store, self.name, self.hook, self.every, self.note = cells, store, name, hook, every, note
        self.done = set(done)
        self.records: dict[str, Record] = {}
        self.next_at = 0.0
        self.failed = False

    def stored(self, key: str) -> None:
        self.done.add(key)
        if len(self.done) < len(self.cells) and time.monotonic() >= self.next_at:  # complete: the caller writes
            self.write()

    def write(self) -> None:
        started = time.monotonic()
        try:
            records = []
            for cell in self.cells:
                if cell.key in self.done:
                    if cell.key not in self.records:
                        self.records[cell.key] = self.store.load(cell.key)
                    records.append(self.records[cell.key])
            missing = tuple(cell.label for cell in self.cells if cell.key not in self.done)
            self.hook(GridSnapshot(self.name, tuple(records), missing, len(self.cells)))
        except Exception as exc:  # noqa: BLE001 - pyarrow's ValueError/TypeError, a full disk, memory: told, not fatal
            if not self.failed:
                self.note(f"{self.name}: the partial results could not be written ({exc}); the finished cells are "
                          f"stored all the same")
            self.failed = True
        took = time.monotonic() - started  # partial_every=0: after every cell, however long a write takes
        self.next_at = time.monotonic() + (max(self.every, 10.0 * took) if self.every > 0 else 0.0)


@dataclass(frozen=True)
class GridPlan(Generic[C]):
    """What :func:`run_cells` will do with a grid and a store, known before anything starts: which
    cells are ``done``, which are ``damaged`` (with the reason) and which it runs (``todo``, longest
    first).  A workflow starts Ray and its sites only when ``todo`` is not empty."""

    states: dict[str, CellState]
    todo: tuple[C, ...]
    damaged: tuple[tuple[C, CellState], ...]
    n_done: int
    recompute_damaged: bool

    @property
    def n_skipped(self) -> int:
        """Cells that neither are done nor run: damaged files left alone (no ``recompute_damaged``)."""
        return 0 if self.recompute_damaged else len(self.damaged)


def plan_cells(cells: Sequence[C], store: ResultStore, *, recompute_damaged: bool = False) -> GridPlan[C]:
    """Inspect every cell's unit file (the store's checks and the cell's :meth:`~Cell.check_rows`) and
    decide what runs (see :class:`GridPlan`)."""
    cells = list(cells)
    check_grid_size(len(cells))
    by_key: dict[str, C] = {}
    for cell in cells:
        if cell.key in by_key:
            raise ConfigError(f"cells {by_key[cell.key].label!r} and {cell.label!r} have the same configuration "
                              f"(key {cell.key}); a grid lists each cell once")
        by_key[cell.key] = cell
    states = {cell.key: store.inspect(cell.key, check=cell.check_rows) for cell in cells}
    damaged = tuple((cell, states[cell.key]) for cell in cells if states[cell.key].state == "damaged")
    runnable = {"missing", "damaged"} if recompute_damaged else {"missing"}
    todo = sorted((cell for cell in cells if states[cell.key].state in runnable),
                  key=lambda c: -float(c.cost))  # longest first: the last cells on the cluster are short ones
    n_done = sum(state.state == "done" for state in states.values())
    return GridPlan(states, tuple(todo), damaged, n_done, recompute_damaged)


def run_cells(cells: Sequence[C], run_cell: RunCell[C], store: ResultStore,
              executor: Executor | None = None, *, recompute_damaged: bool = False, progress: Progress | None = None,
              name: str = "grid", on_partial: Callable[[GridSnapshot], None] | None = None,
              partial_every: float = 10.0) -> GridResult:
    """Run every cell not yet in ``store`` with ``run_cell`` on ``executor`` (see the module notes).

    ``run_cell(cell)`` returns a :class:`~raytune_fed.grid.CellResult` or a list of row
    dicts; it must be a picklable top-level callable for the Ray executor.  ``executor``
    defaults to :class:`~raytune_fed.grid.InProcessExecutor`.  ``on_partial`` receives a
    :class:`GridSnapshot` of the stored cells while the grid runs (at most every
    ``partial_every`` seconds) and when it stops incomplete.
    """
    cells = list(cells)
    check_float("partial_every", partial_every, 0.0)
    plan = plan_cells(cells, store, recompute_damaged=recompute_damaged)
    executor = executor or InProcessExecutor()
    progress = progress or Silent()
    started = time.perf_counter()
    snapshots = None if on_partial is None else _Snapshots(
        cells, store, name, on_partial, partial_every, progress.note,
        {key for key, state in plan.states.items() if state.state == "done"})

    damaged = list(plan.damaged)
    problems: list[tuple[str, str]] = []
    for cell, state in damaged:
        if recompute_damaged:
            moved = store.quarantine(cell.key)
            progress.note(f"unit file {state.path} is damaged ({state.reason}); moved to {moved}, recomputing "
                          f"{cell.label}")
        else:
            progress.note(damaged_message(state.path, state.reason))
            problems.append((cell.label, damaged_message(state.path, state.reason)))
    todo = list(plan.todo)
    retried = len(store.failed_keys() & {c.key for c in todo})
    if retried:
        progress.note(f"{name}: retrying {retried} cell(s) that failed before (their errors are in "
                      f"{store.failures_dir})")
    n_done = plan.n_done
    progress.start(name, len(cells), n_done, sum(float(c.cost) for c in todo), n_todo=len(todo),
                   n_skipped=plan.n_skipped)
    outcomes = executor.run(todo, run_cell, note=progress.note)
    usages: list[Usage] = []
    usage_keys: list[str] = []
    n_stored = n_done
    complete = False
    try:
        for outcome in outcomes:
            if outcome.usage is not None:
                usages.append(outcome.usage)
                usage_keys.append(outcome.cell.key)
            try:
                outcome = _store(store, outcome)
            except StoreWriteError as exc:  # a full or read-only disk: every later cell would fail the same way
                raise GridIncompleteError(
                    f"{name}: stopped: {exc}; {n_stored} of {len(cells)} cells are stored in {store.root}; free space "
                    f"there (or make it writable) and run the same command again to resume",
                    [(outcome.cell.label, str(exc))]) from None
            n_stored += outcome.error is None
            progress.advance(outcome)
            if outcome.error is not None:
                problems.append((outcome.cell.label, str(outcome.error)))
            elif snapshots is not None:
                snapshots.stored(outcome.cell.key)
        complete = not problems and n_stored == len(cells)
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:
            close()  # stops what still runs (after an interrupt)
        if snapshots is not None and not complete:
            snapshots.write()  # what stopped incomplete is readable as it stands
        progress.close()
    if problems:
        raise GridIncompleteError(_incomplete_message(name, len(cells), problems, store, damaged, recompute_damaged),
                                  problems)
    records = tuple(store.load(cell.key) for cell in cells)
    return GridResult(records, len(todo), n_done, time.perf_counter() - started, tuple(usages),
                      tuple(usage_keys))


def _store(store: ResultStore, outcome: Outcome) -> Outcome:
    """Keep an outcome in the store: its rows, or its error in ``failures/``."""
    cell = outcome.cell
    if outcome.result is not None:
        try:
            reason = cell.check_rows(as_stored(outcome.result.rows))
            if reason:
                raise StoreError(f"the cell's rows fail its checks: {reason}")
            store.put(cell.config(), outcome.result.rows, outcome.result.timing)
        except StoreWriteError:
            raise
        except (StoreError, TypeError, ValueError) as exc:  # e.g. other rows than a stored run of the same cell
            outcome = Outcome(cell, None, CellError("failed", type(exc).__name__, str(exc)), outcome.seconds)
        else:
            store.clear_failure(cell.key)
            return outcome
    error = outcome.error or CellError("failed", "RuntimeError", "the executor reported neither a result nor an error")
    store.record_failure(cell.config(), label=cell.label, kind=error.kind, error_type=error.error_type,
                         message=error.message)
    return outcome


def _incomplete_message(name: str, n_cells: int, problems: list[tuple[str, str]], store: ResultStore,
                        damaged: list, recompute_damaged: bool) -> str:
    n_damaged = 0 if recompute_damaged else len(damaged)
    n_other = len(problems) - n_damaged
    parts = []
    if n_other:
        parts.append(f"{n_other} failed or could not be placed (errors in {store.failures_dir}; the same command "
                     f"retries them)")
    if n_damaged:
        parts.append(f"{n_damaged} with a damaged unit file (rerun with --recompute-damaged to recompute them)")
    label, what = problems[0]
    return (f"{name}: {len(problems)} of {n_cells} cells did not finish: {'; '.join(parts)}; the finished cells are "
            f"stored in {store.root} and no results were written. First: {label}: {what}")
