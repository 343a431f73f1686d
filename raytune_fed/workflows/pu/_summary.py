"""What a PU grid concludes: the paper's tables as data (Tables 2, 4, 5, 6), from ``results.parquet`` rows.

Every table is a mean over replications (with sd and count) of test AUC in percent, or of
seconds for Table 6; a table needs the grid to hold what it compares (two evaluators for
Table 2's ODE columns, two schedules for Table 4, both control-variate settings for
Table 5) and is otherwise left out.  ``tables`` holds only what the same command gives
again on every run (test AUC, the priors); ``timings`` holds what a clock measured (Table 6's
seconds and ratios), so two runs' ``tables`` compare equal.  The *main* ODE variant (the one Tables 2 and 6 and
the figures use) is the grid's first evaluator with the self-paced schedule and the
control variate where the grid has them.

:func:`flat_results` gives ``results.parquet`` as one flat table (the selected configuration's
keys as ``config.<name>`` columns); :func:`format_summary` is the console summary, test AUC per
variant in the one format of :func:`raytune_fed.report.format_summary_table`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.report import Results, format_summary_table, spread_json

BASELINES = ("upu", "nnpu", "wsvm", "supervised")


def main_variant(frame: pd.DataFrame) -> dict[str, Any] | None:
    """Evaluator, schedule and control-variate setting of the main ODE variant (None without ODE rows)."""
    ode = frame[frame["method"] == "ode"]
    if ode.empty:
        return None
    evaluators = list(dict.fromkeys(ode["evaluator"]))
    schedules = list(dict.fromkeys(ode["schedule"]))
    cvs = list(dict.fromkeys(ode["control_variate"]))
    return {"evaluator": evaluators[0], "schedule": "selfpaced" if "selfpaced" in schedules else schedules[0],
            "control_variate": True if True in cvs else cvs[0]}


def _ode(frame: pd.DataFrame, **fixed: Any) -> pd.DataFrame:
    mask = frame["method"] == "ode"
    for key, value in fixed.items():
        mask &= frame[key] == value
    return frame[mask]


def _table(rows: pd.DataFrame, column: str, value: str = "test_auc", scale: float = 100.0) -> list[dict[str, Any]]:
    """Mean, sd and count of ``value`` per dataset x c x ``column``, over the rows with a value.

    A row without one (an ODE search that selected nothing: NaN) is counted in ``n_no_selection``
    and left out of the mean; a group with no value at all has mean ``None``.
    """
    out = []
    for (dataset, c, col), group in rows.groupby(["dataset", "c", column], sort=False):
        v = group[value].to_numpy(dtype=float) * scale
        ok = v[np.isfinite(v)]
        out.append({"dataset": dataset, "c": float(c), column: col if not isinstance(col, np.generic) else col.item(),
                    "mean": float(ok.mean()) if ok.size else None, "sd": float(ok.std(ddof=1)) if ok.size > 1 else None,
                    "n": int(ok.size), "n_no_selection": int(v.size - ok.size)})
    return out


def summarize(frame: pd.DataFrame) -> dict[str, Any]:
    """The tables of a finished grid (see the module notes)."""
    main = main_variant(frame)
    tables: dict[str, Any] = {"main_variant": main}
    columns = []
    if main is not None:
        for evaluator in dict.fromkeys(_ode(frame)["evaluator"]):
            part = _ode(frame, evaluator=evaluator, schedule=main["schedule"],
                        control_variate=main["control_variate"]).assign(column=f"ode-{evaluator}")
            columns.append(part)
    columns.append(frame[frame["method"].isin(BASELINES)].assign(column=lambda f: f["method"]))
    tables["table2_test_auc"] = _table(pd.concat(columns), "column")
    if main is not None:
        schedules = _ode(frame, evaluator=main["evaluator"], control_variate=main["control_variate"])
        if schedules["schedule"].nunique() > 1:
            tables["table4_schedules"] = _table(schedules, "schedule")
        cv_schedule = "exp" if "exp" in set(_ode(frame)["schedule"]) else main["schedule"]
        cv = _ode(frame, evaluator=main["evaluator"], schedule=cv_schedule)
        if cv["control_variate"].nunique() > 1:
            tables["table5_control_variate"] = _table(cv, "control_variate")
            tables["table5_schedule"] = cv_schedule
    priors = frame[frame["prior"].notna()] if "prior" in frame else frame.iloc[:0]
    if not priors.empty:
        tables["priors"] = [{"dataset": d, "c": float(c), "mean": float(g["prior"].mean()),
                             "sd": float(g["prior"].std(ddof=1)) if len(g) > 1 else None,
                             "true_mean": float(g["true_prior"].mean()),
                             "n_at_clip": int((g["prior"] >= 0.999 - 1e-9).sum()), "n": int(len(g))}
                            for (d, c), g in priors.drop_duplicates(["dataset", "c", "rep"])
                            .groupby(["dataset", "c"], sort=False)]
    timed = pd.concat(([_ode(frame, **main).assign(column="ode")] if main else [])
                      + [frame[frame["method"].isin(BASELINES)].assign(column=lambda f: f["method"])])
    timings: dict[str, Any] = {}
    if "seconds" in timed:
        seconds = _table(timed, "column", value="seconds", scale=1.0)
        timings["table6_seconds"] = seconds
        ode_mean = {(r["dataset"], r["c"]): r["mean"] for r in seconds if r["column"] == "ode"}
        timings["table6_ratio_to_ode"] = [{**{k: r[k] for k in ("dataset", "c", "column")},
                                           "ratio": r["mean"] / ode_mean[(r["dataset"], r["c"])]}
                                          for r in seconds if (r["dataset"], r["c"]) in ode_mean
                                          and ode_mean[(r["dataset"], r["c"])] > 0]
    return {"n_cells": int(len(frame)), "tables": tables, "timings": timings}


def flat_results(frame: pd.DataFrame) -> Results:
    """``trials``: one row per cell (dataset x c x variant x replication), the selected configuration as
    ``config.<name>`` columns (missing where a method has no such key or selected nothing)."""
    return Results("pu", spread_json(frame, "config", "config").reset_index(drop=True))


def format_summary(frame: pd.DataFrame) -> str:
    """Test AUC (percent) per dataset x c x variant: mean, sd and n over the replications that selected a model
    (and how many selected none, where any did)."""
    rows = _table(frame, "variant")
    extra = {"no selection": "n_no_selection"} if any(r["n_no_selection"] for r in rows) else None
    return format_summary_table("test AUC (%)", rows, ("dataset", "c", "variant"), digits=2, extra=extra)
