"""Table IV and Figures 6-9 from the rows of a CMOSB comparison.

The three objectives are normalised per dataset, as the paper does: min-max over every
configuration any method evaluated on it, so each lies in [0, 1]; the hypervolume of a
method is then taken against the reference point (1, 1, 1).  With constraints
(``max_cost``, ``max_leakage``) a method's front and hypervolume use its feasible rows only.

CMOSB's hypervolume by generation (Figure 10) is given two ways: over every feasible
configuration evaluated up to each generation, and over the feasible members of NSGA-II's
population after it (the rows' ``generation`` and ``in_population_until`` columns come from
the searcher's own record).

:func:`flat_results` gives ``results.parquet`` as the flat trials table (the six hyperparameters
as ``config.<name>`` columns, as in the other workflows); :func:`format_summary` prints Table IV
in the one console format of :func:`raytune_fed.report.format_summary_table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.metrics import hypervolume, pareto_mask
from raytune_fed.report import Results, format_summary_table
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES, PARAMETERS

REFERENCE = (1.0, 1.0, 1.0)
COLOURS = {"cmosb": "tab:blue", "gs": "tab:green", "bo": "tab:orange", "es": "tab:red"}
LABELS = {"cmosb": "CMOSB", "gs": "GS", "bo": "BO", "es": "ES"}


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """The objectives min-max scaled per dataset (a constant objective becomes 0)."""
    out = frame.copy()
    for _, rows in frame.groupby("dataset"):
        for name in OBJECTIVES:
            v = rows[name].to_numpy(dtype=float)
            span = v.max() - v.min()
            out.loc[rows.index, name] = (v - v.min()) / span if span > 0 else 0.0
    return out


def feasible(frame: pd.DataFrame, constraints: Mapping[str, tuple[str, float]]) -> np.ndarray:
    keep = np.ones(len(frame), dtype=bool)
    for name, (op, bound) in constraints.items():
        v = frame[name].to_numpy(dtype=float)
        keep &= v <= bound if op == "<=" else v >= bound
    return keep


def summarize(frame: pd.DataFrame, constraints: Mapping[str, tuple[str, float]] | None = None) -> dict[str, Any]:
    """Per dataset and method: evaluations, feasible ones, normalised hypervolume and the front."""
    constraints = dict(constraints or {})
    scaled = normalise(frame)
    ok = feasible(frame, constraints)
    out: dict[str, Any] = {"reference": list(REFERENCE), "constraints": {k: list(v) for k, v in constraints.items()},
                           "datasets": {}}
    for dataset, rows in frame.groupby("dataset"):
        bounds = {n: [float(rows[n].min()), float(rows[n].max())] for n in OBJECTIVES}
        methods = {}
        for method, mrows in rows.groupby("method", sort=False):
            keep = ok[mrows.index]
            points = scaled.loc[mrows.index[keep], list(OBJECTIVES)].to_numpy(dtype=float)
            front_rows = mrows[keep].iloc[np.flatnonzero(pareto_mask(points))] if keep.any() else mrows.iloc[:0]
            methods[method] = {
                "n_evaluated": int(len(mrows)), "n_feasible": int(keep.sum()),
                "hypervolume": hypervolume(points, REFERENCE) if keep.any() else 0.0,
                "front": [{k: _plain(r[k]) for k in (*PARAMETERS, *OBJECTIVES, "run")}
                          for _, r in front_rows.iterrows()]}
        mine = (scaled.loc[rows.index, "method"] == "cmosb").to_numpy()
        cmosb, cmosb_ok = scaled.loc[rows.index[mine]], ok[rows.index[mine]]
        out["datasets"][dataset] = {
            "bounds": bounds, "methods": methods,
            "cmosb_hypervolume_by_generation": hypervolume_by_generation(cmosb, cmosb_ok),
            "cmosb_population_hypervolume_by_generation": hypervolume_by_generation(cmosb, cmosb_ok,
                                                                                    population=True)}
    return out


def hypervolume_by_generation(scaled: pd.DataFrame, ok: np.ndarray, *, population: bool = False) -> list[float]:
    """For every generation ``g``, the hypervolume of the rows ``ok`` marks feasible among

    * (``population=False``) every row of generations ``0..g``: all evaluations so far;
    * (``population=True``) the members of NSGA-II's population after generation ``g``
      (``generation <= g <= in_population_until``).

    ``scaled`` holds one NSGA-II run's rows (objectives normalised, ``generation`` and, for
    the population, ``in_population_until`` columns); without them there is no curve.
    """
    needed = ["generation", "in_population_until"] if population else ["generation"]
    if not len(scaled) or any(c not in scaled for c in needed):
        return []
    generations = scaled["generation"].to_numpy()
    until = scaled["in_population_until"].to_numpy() if population else None
    points = scaled[list(OBJECTIVES)].to_numpy(dtype=float)
    ok = np.asarray(ok, dtype=bool)
    out = []
    for g in range(int(generations.max()) + 1):
        keep = ok & (generations <= g) & (until >= g if until is not None else True)
        out.append(hypervolume(points[keep], REFERENCE) if keep.any() else 0.0)
    return out


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def format_summary(summary: Mapping[str, Any]) -> str:
    """Table IV per dataset and method: the run's hypervolume (one value: n = 1, no sd), evaluations, feasible
    ones and the front's size."""
    rows = [{"dataset": dataset, "method": LABELS.get(method, method), "mean": m["hypervolume"], "sd": None, "n": 1,
             "evaluated": m["n_evaluated"], "feasible": m["n_feasible"], "front": len(m["front"])}
            for dataset, d in summary["datasets"].items() for method, m in d["methods"].items()]
    title = f"hypervolume on normalised objectives (reference {tuple(summary['reference'])}; larger is better)"
    return format_summary_table(title, rows, ("dataset", "method"),
                                extra={"evaluated": "evaluated", "feasible": "feasible", "on the front": "front"})


def flat_results(frame: pd.DataFrame) -> Results:
    """``trials``: one row per evaluated configuration and method, the hyperparameters as ``config.<name>``."""
    trials = frame.rename(columns={name: f"config.{name}" for name in PARAMETERS})
    return Results("cmosb", trials.reset_index(drop=True))
