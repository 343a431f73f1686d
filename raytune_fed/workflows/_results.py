"""Load any run's results as flat tables: :func:`load_results` (and :func:`recognise`, which workflow wrote them).

``OUT/results.parquet`` stays as each workflow writes it (its report page, resume and
``raytune-fed report`` read it so); :func:`load_results` reads it and returns the workflow's
flat layout (:class:`raytune_fed.report.Results`): ``trials`` with scalar columns only and
the nested data in long tables of their own.
"""

from __future__ import annotations

from pathlib import Path

from raytune_fed.errors import ConfigError

RESULTS_FILE = "results.parquet"

WORKFLOWS = {  # the columns that identify each workflow's results.parquet, checked in this order
    "cmosb": {"utility_loss", "training_cost", "privacy_leakage"},
    "pu": {"test_auc", "variant"},
    "rfms": {"hypervolume", "experiment"},
}


def _results_file(path: str | Path) -> Path:
    path = Path(path)
    return path if path.name == RESULTS_FILE and not path.is_dir() else path / RESULTS_FILE


def recognise(out: str | Path) -> str:
    """Which workflow wrote ``out`` (a results directory or its ``results.parquet``): ``"rfms"``, ``"pu"`` or
    ``"cmosb"``, from the file's columns."""
    import pyarrow.parquet as pq

    path = _results_file(out)
    if not path.is_file():
        raise ConfigError(f"no results.parquet in {path.parent}: run a grid (rfms, pu, cmosb) with this --out "
                          "first, or wait until it has finished")
    try:
        columns = set(pq.read_schema(path).names)
    except Exception as exc:  # a truncated or foreign file
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"cannot read {path} (damaged or not a results file): {type(exc).__name__}: {first}") \
            from None
    for name, needed in WORKFLOWS.items():
        if needed <= columns:
            return name
    raise ConfigError(f"{path} was not written by rfms, pu or cmosb: its columns "
                      f"{sorted(columns)[:8]}{' ...' if len(columns) > 8 else ''} match none of them")


def load_results(path: str | Path):
    """The results of a finished ``rfms``/``demo``, ``pu`` or ``cmosb`` run as flat tables.

    ``path`` is the run's output directory (or its ``results.parquet``).  Returns a
    :class:`raytune_fed.report.Results`: ``workflow``, ``trials`` (one row per RFMS experiment x
    method, PU cell, or CMOSB trial; scalar columns, configurations as ``config.<name>``) and
    ``tables`` (RFMS: ``selected``, one row per selected model, and ``curators``).
    """
    import pandas as pd

    workflow = recognise(path)
    frame = pd.read_parquet(_results_file(path))
    if workflow == "rfms":
        from raytune_fed.workflows.rfms._summary import flat_results
    elif workflow == "pu":
        from raytune_fed.workflows.pu._summary import flat_results
    else:
        from raytune_fed.workflows.cmosb._summary import flat_results
    return flat_results(frame)
