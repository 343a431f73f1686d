"""Restrictive federated model selection (RFMS): methods, experiments, the grid, reports."""

from raytune_fed.workflows.rfms._experiment import (
    REFERENCE_POINT,
    REFUSED_LOSS,
    TOLERATED_REFUSALS,
    Evaluator,
    Timing,
    run_experiment,
)
from raytune_fed.workflows.rfms._grid import TIMING_COLUMNS, RunCell, build_grid, run_grid
from raytune_fed.workflows.rfms._methods import METHODS, Method, get_methods
from raytune_fed.workflows.rfms._report import REQUIRED_COLUMNS, build_report, win_loss_figure, write_report
from raytune_fed.workflows.rfms._sites import (
    DEPLOYMENTS,
    SiteHandles,
    SitePlan,
    StartedSites,
    grid_schedule,
    plan_sites,
    rfms_site_policy,
    run_with_sites,
    start_sites,
    unit_of,
)
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings
from raytune_fed.workflows.rfms._summary import flat_results, format_summary, summarize, write_results

__all__ = [
    "DEPLOYMENTS", "REFUSED_LOSS", "StartedSites", "TOLERATED_REFUSALS", "grid_schedule", "rfms_site_policy", "unit_of",
    "METHODS", "REFERENCE_POINT", "REQUIRED_COLUMNS", "TIMING_COLUMNS", "Evaluator", "ExperimentSpec", "Method",
    "RFMSSettings", "RunCell", "SiteHandles", "SitePlan", "Timing", "build_grid", "build_report", "flat_results",
    "format_summary",
    "get_methods", "plan_sites", "run_experiment", "run_grid", "run_with_sites", "start_sites", "summarize",
    "win_loss_figure", "write_report", "write_results",
]
