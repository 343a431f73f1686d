"""The report of a PU grid: the paper's Tables 2, 4, 5, 6 and Figures 3-5 for our results, one page.

``write_report`` reads ``results.parquet``, recomputes the tables with
:func:`~raytune_fed.workflows.pu._summary.summarize` and renders them through the one
report layer (:mod:`raytune_fed.report`: ``index.html`` with embedded figures, ``index.md``
and one PNG per dataset: test AUC against c per method, the paper's Figures 3-5).  Test AUC
is in percent, as in the paper.  The main ODE variant carries one name everywhere (its
variant label, e.g. ``ode-ipm-selfpaced``).  Pure pandas/matplotlib: no Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from raytune_fed.errors import ConfigError
from raytune_fed.workflows._results import read_results
from raytune_fed.workflows.pu._summary import summarize

_REQUIRED = ("dataset", "c", "method", "variant", "test_auc", "seconds")


def _cell(r: dict[str, Any], digits: int = 2) -> str:
    failed = f" ({r['n_no_selection']} of {r['n'] + r['n_no_selection']} selected nothing)" \
        if r.get("n_no_selection") else ""
    if r["mean"] is None:
        return f"none{failed}"
    sd = "" if r.get("sd") is None else f" ± {r['sd']:.{digits}f}"
    return f"{r['mean']:.{digits}f}{sd}{failed}"


def _variant_name(main: dict[str, Any] | None, evaluator: str | None = None) -> str:
    """The label the grid gives an ODE variant (as in results.parquet's ``variant`` column)."""
    if main is None:
        return "ode"
    evaluator = evaluator or main["evaluator"]
    return f"ode-{evaluator}-{main['schedule']}" + ("" if main["control_variate"] else "-nocv")


def _table(rows: list[dict[str, Any]], column: str, rename: dict[str, str] | None = None,
           digits: int = 2) -> tuple[list[str], list[list[str]]]:
    """Rows dataset x c, one column per value of ``column`` (renamed by ``rename``)."""
    rename = rename or {}
    name = lambda value: rename.get(str(value), str(value))  # noqa: E731
    columns = list(dict.fromkeys(name(r[column]) for r in rows))
    keys = list(dict.fromkeys((r["dataset"], r["c"]) for r in rows))
    cells = {(r["dataset"], r["c"], name(r[column])): _cell(r, digits) for r in rows}
    return (["dataset", "c", *columns],
            [[dataset, f"{c:g}", *(cells.get((dataset, c, col), "") for col in columns)] for dataset, c in keys])


def _figures(frame: pd.DataFrame, main: dict[str, Any] | None) -> list[tuple[str, Any]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from raytune_fed.report import plots

    keep = frame["method"] != "ode"
    if main is not None:
        keep |= ((frame["method"] == "ode") & (frame["schedule"] == main["schedule"])
                 & (frame["control_variate"] == main["control_variate"]))
    shown = frame[keep]
    figures = []
    for dataset, rows in shown.groupby("dataset", sort=False):
        fig, ax = plt.subplots(figsize=(6.2, 4.0))
        values = []
        for variant, part in rows.groupby("variant", sort=False):
            stats = part.groupby("c")["test_auc"].agg(["mean", "std", "count"]).sort_index()
            stats[["mean", "std"]] *= 100
            values += [*(stats["mean"] - stats["std"].fillna(0)), *(stats["mean"] + stats["std"].fillna(0))]
            ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), marker="o", capsize=3,
                        label=variant)
        cs = sorted(rows["c"].unique())
        ax.set_xscale("log")
        ax.set_xticks(cs, [f"{c:g}" for c in cs])
        ax.minorticks_off()
        plots.fit_axis(ax, values, "y", floor=0.0, ceiling=100.5)
        ax.set_xlabel("label frequency c")
        ax.set_ylabel("test AUC (%)")
        ax.set_title(f"{dataset}: test AUC against c")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        figures.append((f"auc_vs_c_{dataset}", fig))
    return figures


def _settings(frame: pd.DataFrame, out_dir: Path) -> dict[str, Any]:
    stored = out_dir / "settings.json"
    if stored.is_file():
        try:
            data = json.loads(stored.read_text())
            if isinstance(data, dict):
                return data
        except ValueError:
            pass
    return {"datasets": list(dict.fromkeys(frame["dataset"])), "c": sorted(float(c) for c in frame["c"].unique()),
            "methods": list(dict.fromkeys(frame["variant"])),
            "replications": int(frame.groupby(["dataset", "c", "variant"]).size().max())}


def write_report(out_dir: str | Path, frame: pd.DataFrame | None = None, *, command: str | None = None) -> Path:
    """Write the page and figures of a PU grid under ``out_dir``; return the ``index.html`` path.

    Without ``frame`` the rows come from ``results.parquet``, or from the grid's
    ``results.partial.parquet`` while it runs or after it stopped incomplete: the page then says
    how many cells it holds and which are missing."""
    from raytune_fed.report import Page, write_page

    out_dir = Path(out_dir)
    partial = None
    if frame is None:  # results.parquet, or while the grid runs (or stopped incomplete) its partial file
        frame, partial = read_results(out_dir, "run the grid first")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"{out_dir}/results.parquet is not a PU grid's results: columns {missing} are missing")
    summary = summarize(frame)
    tables, timings = summary["tables"], summary["timings"]
    main = tables["main_variant"]
    ode_names = {}
    if main is not None:
        ode_names = {f"ode-{e}": _variant_name(main, e) for e in dict.fromkeys(frame.loc[frame["method"] == "ode",
                                                                                         "evaluator"])}
        ode_names["ode"] = _variant_name(main)
    page = Page("PU model selection report", "pu", settings=_settings(frame, out_dir), command=command,
                intro=f"{len(frame)} cells: datasets {', '.join(dict.fromkeys(frame['dataset']))}; c "
                      f"{', '.join(f'{c:g}' for c in sorted(frame['c'].unique()))}; "
                      f"{frame.groupby(['dataset', 'c', 'variant']).size().max()} replication(s). Test AUC in "
                      "percent, mean ± sd over replications.")
    if partial is not None:
        page.mark_partial(partial.n_done, partial.n_total, partial.missing, partial.unit)
    if main is not None:
        page.text(f"Main ODE variant: {_variant_name(main)} (evaluator {main['evaluator']}, schedule "
                  f"{main['schedule']}, control variate {'on' if main['control_variate'] else 'off'}).")
    page.section("Table 2: test AUC per method").table(*_table(tables["table2_test_auc"], "column", ode_names))
    if tables.get("table4_schedules"):
        page.section("Table 4: ODE's pruning schedules").table(*_table(tables["table4_schedules"], "schedule"))
    if "table5_control_variate" in tables:
        page.section(f"Table 5: ODE with and without the control variate, {tables['table5_schedule']} schedule")
        page.table(*_table(tables["table5_control_variate"], "control_variate", {"True": "with", "False": "without"}))
    if tables.get("priors"):
        page.section("The class prior that trained uPU (ODE's candidates and the uPU / nnPU baselines)")
        page.text("Per dataset and c over replications: TIcE's estimate (or the true prior with --prior true) of "
                  "the share of positives among the unlabelled rows; the true share; replications at the 0.999 "
                  "clip.")
        page.table(["dataset", "c", "prior used", "true prior", "at the clip"],
                   [[r["dataset"], f"{r['c']:g}", _cell(r, 3), f"{r['true_mean']:.3f}", f"{r['n_at_clip']}/{r['n']}"]
                    for r in tables["priors"]])
    if timings.get("table6_seconds"):
        page.section("Table 6: seconds per cell (training, selection and the final fit)")
        page.table(*_table(timings["table6_seconds"], "column", ode_names))
        ratios = [{**r, "mean": r["ratio"]} for r in timings.get("table6_ratio_to_ode", [])]
        if ratios:
            page.text("Seconds relative to ODE:").table(*_table(ratios, "column", ode_names))
    figures = _figures(frame, main)
    if figures:
        page.section("Figures 3-5: test AUC against the label frequency c")
        for name, fig in figures:
            page.figure(name, fig, "Mean test AUC over replications per method, bars one sd; higher is better.")
    return write_page(out_dir, page)
