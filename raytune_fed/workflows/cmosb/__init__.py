"""CMOSB: constrained multi-objective tuning of vertical SecureBoost (utility, cost, privacy).

:func:`evaluate` measures the three objectives of one configuration in-process;
:func:`run_cmosb` compares CMOSB (:class:`~raytune_fed.search.NSGA2Search`) with the ES, GS
and BO baselines as ``tune.Tuner`` runs whose trials train on party actors;
:func:`write_outputs` writes ``results.parquet``, ``summary.json`` (Table IV) and the report page
(:func:`write_report`, through :mod:`raytune_fed.report`).
Ray is imported only when the Tune parts are used.
"""

from raytune_fed.workflows.cmosb._methods import BASELINES, ES_PRESETS, METHODS, grid_values, method_runs
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES, PARAMETERS, Evaluation, search_space
from raytune_fed.workflows.cmosb._report import front_figures, generation_figures, write_outputs, write_report
from raytune_fed.workflows.cmosb._summary import (
    feasible,
    flat_results,
    format_summary,
    hypervolume_by_generation,
    normalise,
    summarize,
)
from raytune_fed.workflows.cmosb._tasks import SENSORLESS_OPENML, TASKS, VerticalTask, load_task
from raytune_fed.workflows.cmosb._trial import evaluate

__all__ = ["BASELINES", "ES_PRESETS", "METHODS", "OBJECTIVES", "PARAMETERS", "SENSORLESS_OPENML", "TASKS",
           "CMOSBSettings", "Evaluation", "VerticalTask", "evaluate", "feasible", "flat_results", "format_summary",
           "grid_values", "hypervolume_by_generation", "load_task", "method_runs", "normalise", "run_cmosb",
           "search_space", "summarize", "write_outputs", "front_figures", "generation_figures", "write_report"]


def __getattr__(name: str):
    if name in ("CMOSBSettings", "run_cmosb", "check_point"):
        from raytune_fed.workflows.cmosb import _run

        return getattr(_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
