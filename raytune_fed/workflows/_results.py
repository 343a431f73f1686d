"""Load any run's results as flat tables: :func:`load_results` (and :func:`recognise`, which workflow wrote them).

``OUT/results.parquet`` stays as each workflow writes it (its report page, resume and
``raytune-fed report`` read it so); :func:`load_results` reads it and returns the workflow's
flat layout (:class:`raytune_fed.report.Results`): ``trials`` with scalar columns only and
the nested data in long tables of their own.

While a grid runs, and after it stopped incomplete (failed cells, Ctrl-C), the grid keeps
``OUT/results.partial.parquet`` (:class:`PartialResults`, the grid engine's ``on_partial``
hook): the same rows ``results.parquet`` would hold for the cells stored so far, written
atomically, with the parquet schema metadata ``raytune_fed.partial`` (JSON: ``workflow``,
``n_done``, ``n_total``, ``unit`` and the ``missing`` cells' labels).  It never takes the
complete file's name; when the grid completes, ``results.parquet`` is written and the partial
file removed (:func:`remove_partial`).  CMOSB, which runs its own Tune loop, writes the same
file through :func:`write_partial` with its methods' finished Tune runs as the unit
(:func:`raytune_fed.workflows.cmosb._report.keep_partial`).  Readers (:func:`read_results`, :func:`load_results`,
``raytune-fed report``) take ``results.parquet``, or the partial file when it is the newer
of the two (a grid running again in the same folder) or the only one, and say which.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytune_fed.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from raytune_fed.grid import GridSnapshot
    from raytune_fed.report import Results

RESULTS_FILE = "results.parquet"
PARTIAL_FILE = "results.partial.parquet"
PARTIAL_KEY = b"raytune_fed.partial"
"""The schema metadata key that marks a partial results file (JSON, see the module notes)."""

WORKFLOWS = {  # the columns that identify each workflow's results.parquet, checked in this order
    "cmosb": {"utility_loss", "training_cost", "privacy_leakage"},
    "pu": {"test_auc", "variant"},
    "rfms": {"hypervolume", "experiment"},
}


@dataclass(frozen=True)
class Partial:
    """What a partial results file says of itself: ``n_done`` of ``n_total`` ``unit`` (cells) are in it;
    ``missing`` are the labels of the others, in the grid's order."""

    workflow: str
    n_done: int
    n_total: int
    missing: tuple[str, ...]
    unit: str = "cells"


def write_partial(out: str | Path, frame: pd.DataFrame, partial: Partial) -> Path:
    """Write ``frame`` as ``out/results.partial.parquet`` with ``partial`` in its schema metadata, atomically
    (a reader sees the previous file or this one, never a torn one); return its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raytune_fed.store import write_atomic

    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = json.dumps({"format": 1, "workflow": partial.workflow, "n_done": partial.n_done,
                       "n_total": partial.n_total, "unit": partial.unit, "missing": list(partial.missing)})
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), PARTIAL_KEY: meta.encode("utf-8")})
    path = Path(out) / PARTIAL_FILE
    write_atomic(path, lambda p: pq.write_table(table, p))
    return path


def remove_partial(out: str | Path) -> None:
    """Remove ``out/results.partial.parquet`` (after the complete ``results.parquet`` was written)."""
    (Path(out) / PARTIAL_FILE).unlink(missing_ok=True)


class PartialResults:
    """The grid engine's ``on_partial`` hook of a workflow: keeps ``out/results.partial.parquet`` up to date
    from each :class:`~raytune_fed.grid.GridSnapshot` (the stored cells' rows, as the complete grid's frame
    holds them); with no cell stored there is no partial file."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)

    def __call__(self, snapshot: GridSnapshot) -> None:
        if not snapshot.records:
            remove_partial(self.out)
            return
        write_partial(self.out, snapshot.frame(),
                      Partial(snapshot.name, snapshot.n_done, snapshot.n_cells, snapshot.missing))


def results_file(path: str | Path) -> Path:
    """The file a reader takes for ``path`` (a results directory, or one of its two results files):
    ``results.parquet``, or ``results.partial.parquet`` when that is the only one or the newer."""
    path = Path(path)
    if path.name in (RESULTS_FILE, PARTIAL_FILE) and not path.is_dir():
        return path
    complete, partial = path / RESULTS_FILE, path / PARTIAL_FILE
    if partial.is_file() and (not complete.is_file() or partial.stat().st_mtime > complete.stat().st_mtime):
        return partial
    return complete


_NO_RESULTS = "run a grid (rfms, pu, cmosb) with this --out first"


def _read_schema(path: Path, hint: str = _NO_RESULTS) -> Any:
    import pyarrow.parquet as pq

    if not path.is_file():
        raise ConfigError(f"no results.parquet in {path.parent}: {hint} (a running grid keeps "
                          f"results.partial.parquet once a cell has finished)")
    try:
        return pq.read_schema(path)
    except Exception as exc:  # a truncated or foreign file
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"cannot read {path} (damaged or not a results file): {type(exc).__name__}: {first}") \
            from None


def partial_of(path: str | Path, hint: str = _NO_RESULTS) -> Partial | None:
    """What the results file ``path`` says of itself when it is partial (None: it is complete)."""
    path = Path(path)
    meta = (_read_schema(path, hint).metadata or {}).get(PARTIAL_KEY)
    if meta is None:
        if path.name == PARTIAL_FILE:
            raise ConfigError(f"{path} is not a partial results file (no {PARTIAL_KEY.decode()} metadata): "
                              "delete it and run the grid again")
        return None
    try:
        record = json.loads(meta.decode("utf-8"))
        missing = tuple(record["missing"])
        n_done, n_total = record["n_done"], record["n_total"]
        if not (isinstance(n_done, int) and isinstance(n_total, int) and 0 <= n_done <= n_total
                and all(isinstance(m, str) for m in missing)):
            raise ValueError(f"n_done {n_done!r}, n_total {n_total!r}")
        return Partial(str(record["workflow"]), n_done, n_total, missing, str(record.get("unit", "cells")))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: its {PARTIAL_KEY.decode()} metadata is damaged ({type(exc).__name__}: {exc}); "
                          "delete the file and run the grid again") from None


def recognise(out: str | Path) -> str:
    """Which workflow wrote ``out`` (a results directory or one of its results files): ``"rfms"``, ``"pu"`` or
    ``"cmosb"``, from the file's columns (a partial file's too: see the module notes)."""
    path = results_file(out)
    columns = set(_read_schema(path).names)
    for name, needed in WORKFLOWS.items():
        if needed <= columns:
            return name
    raise ConfigError(f"{path} was not written by rfms, pu or cmosb: its columns "
                      f"{sorted(columns)[:8]}{' ...' if len(columns) > 8 else ''} match none of them")


def read_results(out: str | Path, hint: str = _NO_RESULTS) -> tuple[pd.DataFrame, Partial | None]:
    """The rows of a run (see :func:`results_file` for which file) and, for a partial file, what it says of itself
    (None: the run is complete).  No results file, or one that cannot be read, is a
    :class:`~raytune_fed.errors.ConfigError` naming it (``hint``: what to run first)."""
    import pandas as pd

    def read(path: Path) -> tuple[pd.DataFrame, Partial | None]:
        partial = partial_of(path, hint)
        try:
            return pd.read_parquet(path), partial
        except FileNotFoundError:
            raise
        except Exception as exc:  # a file torn by hand or by a foreign writer: say which one
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ConfigError(f"cannot read {path} (damaged or not a results file): {type(exc).__name__}: {first}; "
                              f"rerun the grid with the same --out to write it again") from None

    path = results_file(out)
    if path.name == PARTIAL_FILE:
        try:
            return read(path)
        except (ConfigError, FileNotFoundError):
            if path.exists():
                raise
            path = results_file(out)  # the grid finished meanwhile: its partial file gave way to results.parquet
    return read(path)


def load_results(path: str | Path, *, partial: bool = False) -> Results:
    """The results of an ``rfms``/``demo``, ``pu`` or ``cmosb`` run as flat tables.

    ``path`` is the run's output directory (or its ``results.parquet`` or ``results.partial.parquet``).
    Returns a :class:`raytune_fed.report.Results`: ``workflow``, ``trials`` (one row per RFMS experiment x
    method, PU cell, or CMOSB trial; scalar columns, configurations as ``config.<name>``) and
    ``tables`` (RFMS: ``selected``, one row per selected model, and ``curators``).

    A grid that is still running or stopped incomplete is a :class:`~raytune_fed.errors.ConfigError`
    saying how far it got, unless ``partial=True``: then it is read from its partial file,
    ``complete`` is False, ``n_done`` of ``n_total`` cells are in the tables and ``missing``
    names the others (their labels, in the grid's order).  A finished run has ``complete``
    True, ``missing`` empty, and ``n_done`` and ``n_total`` None.
    """
    workflow = recognise(path)
    frame, found = read_results(path)
    if found is not None and not partial:
        raise ConfigError(f"{Path(path)} holds a partial {found.workflow} grid ({found.n_done} of {found.n_total} "
                          f"{found.unit}): it is running or stopped early; wait for it, run its command again to "
                          f"finish it, or read what is there with load_results(..., partial=True)")
    if workflow == "rfms":
        from raytune_fed.workflows.rfms._summary import flat_results
    elif workflow == "pu":
        from raytune_fed.workflows.pu._summary import flat_results
    else:
        from raytune_fed.workflows.cmosb._summary import flat_results
    results = flat_results(frame)
    if found is None:
        return results
    return replace(results, complete=False, missing=found.missing, n_done=found.n_done, n_total=found.n_total)
