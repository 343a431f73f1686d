"""Restrictive federated model selection (RFMS): methods, experiments, the grid, reports."""

from raytune_fed.workflows.rfms._experiment import REFERENCE_POINT, Evaluator, Timing, run_experiment
from raytune_fed.workflows.rfms._grid import (
    SitePlan, build_grid, format_summary, plan_sites, run_grid, summarize, write_report, write_results)
from raytune_fed.workflows.rfms._methods import METHODS, Method, get_methods
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings


__all__ = [
    "METHODS", "REFERENCE_POINT", "Evaluator", "ExperimentSpec", "Method", "RFMSSettings", "SitePlan",
    "Timing", "build_grid", "format_summary", "get_methods", "plan_sites", "run_experiment",
    "run_grid", "summarize", "write_report", "write_results",
]
