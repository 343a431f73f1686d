"""PU model selection (ODE, Wei et al. 2022) and its baselines, composed from the shared layers.

Data: :func:`raytune_fed.simulation.pu_split`; evaluators: :mod:`raytune_fed.metrics.pu`;
learners: :mod:`raytune_fed.models.pu`; search: :class:`raytune_fed.algorithms.halving.SuccessiveHalving`
(and :class:`raytune_fed.schedulers.PUHalvingScheduler` under Ray Tune).  The choices the
paper leaves open are listed in ``docs/pu.md``.
"""

from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, build_grid, run_cell, run_grid
from raytune_fed.workflows.pu._methods import METHOD_NAMES, MethodResult, check_methods, estimate_prior, run_method
from raytune_fed.workflows.pu._ode import ODESettings, SearchResult, configuration_set, nested_order, run_ode
from raytune_fed.workflows.pu._report import write_report
from raytune_fed.workflows.pu._summary import flat_results, format_summary, summarize


def run_ode_tune(*args, **kwargs):
    """ODE through Ray Tune with :class:`~raytune_fed.schedulers.PUHalvingScheduler` (imports Ray on first use);
    see :func:`raytune_fed.workflows.pu._tune_path.run_ode_tune`."""
    from raytune_fed.workflows.pu._tune_path import run_ode_tune as run

    return run(*args, **kwargs)


__all__ = [
    "METHOD_NAMES",
    "MethodResult",
    "ODESettings",
    "PUCell",
    "PUGridSettings",
    "SearchResult",
    "build_grid",
    "check_methods",
    "configuration_set",
    "estimate_prior",
    "flat_results",
    "format_summary",
    "nested_order",
    "run_cell",
    "run_grid",
    "run_method",
    "run_ode",
    "run_ode_tune",
    "summarize",
    "write_report",
]
