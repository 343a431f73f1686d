"""Restrictive federated model selection (RFMS): methods, experiments, the grid, reports."""

from raytune_fed.rfms._experiment import REFERENCE_POINT, Evaluator, Timing, run_experiment
from raytune_fed.rfms._grid import (
    SitePlan, build_grid, format_summary, plan_sites, run_grid, summarize, write_results)
from raytune_fed.rfms._methods import METHODS, Method, get_methods
from raytune_fed.rfms._spec import ExperimentSpec, RFMSSettings
from raytune_fed.rfms._thresholdout import Thresholdout


def write_report(out_dir, settings: RFMSSettings | None = None):
    """Rebuild the report of a results directory; the sites picture needs the dataset settings."""
    import pandas as pd
    from pathlib import Path

    from raytune_fed.rfms._report import build_report

    path = Path(out_dir) / "results.parquet"
    frame = pd.read_parquet(path) if path.exists() else None
    sites = None
    if settings is None and frame is not None and len(frame) and "settings" in frame.columns:
        settings = RFMSSettings(**__import__("json").loads(frame["settings"].iloc[0]))
    if settings is not None:
        plan = plan_sites(settings)
        sites = (plan.X, plan.site_of_row, plan.site_names)
    return build_report(out_dir, frame=frame, sites=sites)


__all__ = [
    "METHODS", "REFERENCE_POINT", "Evaluator", "ExperimentSpec", "Method", "RFMSSettings", "SitePlan",
    "Thresholdout", "Timing", "build_grid", "format_summary", "get_methods", "plan_sites", "run_experiment",
    "run_grid", "summarize", "write_report", "write_results",
]
