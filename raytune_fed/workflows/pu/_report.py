"""The report of a PU grid: the paper's Tables 2, 4, 5, 6 and Figures 3-5 for our results, one Markdown page.

``write_report`` reads ``results.parquet``, recomputes the tables with
:func:`~raytune_fed.workflows.pu._summary.summarize` and writes ``index.md`` with one PNG
per dataset (test AUC against c per method, the paper's Figures 3-5).  Test AUC is in
percent, as in the paper.  Pure pandas/matplotlib: no Ray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from raytune_fed.errors import ConfigError
from raytune_fed.store import write_atomic
from raytune_fed.workflows.pu._summary import main_variant, summarize

_REQUIRED = ("dataset", "c", "method", "variant", "test_auc", "seconds")


def _cell(r: dict[str, Any], digits: int = 2) -> str:
    sd = "" if r.get("sd") is None else f" ± {r['sd']:.{digits}f}"
    return f"{r['mean']:.{digits}f}{sd}"


def _markdown_table(rows: list[dict[str, Any]], column: str, title: str, digits: int = 2) -> list[str]:
    """Rows dataset x c, one column per value of ``column``."""
    if not rows:
        return []
    columns = list(dict.fromkeys(str(r[column]) for r in rows))
    keys = list(dict.fromkeys((r["dataset"], r["c"]) for r in rows))
    cells = {(r["dataset"], r["c"], str(r[column])): _cell(r, digits) for r in rows}
    lines = [f"### {title}", "", "| dataset | c | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for dataset, c in keys:
        lines.append(f"| {dataset} | {c:g} | " + " | ".join(cells.get((dataset, c, col), "") for col in columns)
                     + " |")
    return lines + [""]


def _figures(frame: pd.DataFrame, out_dir: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = main_variant(frame)
    keep = frame["method"] != "ode"
    if main is not None:
        keep |= ((frame["method"] == "ode") & (frame["schedule"] == main["schedule"])
                 & (frame["control_variate"] == main["control_variate"]))
    shown = frame[keep]
    names = []
    for dataset, rows in shown.groupby("dataset", sort=False):
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for variant, part in rows.groupby("variant", sort=False):
            stats = part.groupby("c")["test_auc"].agg(["mean", "std"]).sort_index() * 100
            ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), marker="o", capsize=3, label=variant)
        ax.set_xscale("log")
        ax.set_xlabel("label frequency c")
        ax.set_ylabel("test AUC (%)")
        ax.set_title(f"{dataset}: test AUC against c")
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"auc_vs_c_{dataset}.png"
        try:
            write_atomic(out_dir / name, lambda p: fig.savefig(p, format="png", dpi=100))
        finally:
            plt.close(fig)
        names.append(name)
    return names


def write_report(out_dir: str | Path, frame: pd.DataFrame | None = None) -> Path:
    """Write ``index.md`` and the figures of a PU grid under ``out_dir``; return the ``index.md`` path."""
    out_dir = Path(out_dir)
    if frame is None:
        path = out_dir / "results.parquet"
        if not path.is_file():
            raise ConfigError(f"no results.parquet in {out_dir} (run the grid first)")
        frame = pd.read_parquet(path)
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"{out_dir}/results.parquet is not a PU grid's results: columns {missing} are missing")
    tables = summarize(frame)["tables"]
    main = tables["main_variant"]
    lines = ["# PU model selection report", "",
             f"{len(frame)} cells: datasets {', '.join(dict.fromkeys(frame['dataset']))}; c "
             f"{', '.join(f'{c:g}' for c in sorted(frame['c'].unique()))}; "
             f"{frame.groupby(['dataset', 'c', 'variant']).size().max()} replication(s). Test AUC in percent, "
             "mean ± sd over replications.", ""]
    if main is not None:
        lines += [f"Main ODE variant: evaluator {main['evaluator']}, schedule {main['schedule']}, control variate "
                  f"{'on' if main['control_variate'] else 'off'}.", ""]
    lines += _markdown_table(tables["table2_test_auc"], "column", "Table 2: test AUC per method (ODE with IPM_PU "
                                                                  "and/or AUC_PU, and the baselines)")
    lines += _markdown_table(tables.get("table4_schedules", []), "schedule", "Table 4: ODE's pruning schedules")
    if "table5_control_variate" in tables:
        lines += _markdown_table(tables["table5_control_variate"], "control_variate",
                                 f"Table 5: ODE with (True) and without (False) the control variate, "
                                 f"{tables['table5_schedule']} schedule")
    lines += _markdown_table(tables.get("table6_seconds", []), "column", "Table 6: seconds per cell (training, "
                                                                         "selection and the final fit)")
    ratios = [{**r, "mean": r["ratio"]} for r in tables.get("table6_ratio_to_ode", [])]
    lines += _markdown_table(ratios, "column", "Table 6 (ratios): seconds relative to ODE")
    figures = _figures(frame, out_dir)
    if figures:
        lines += ["### Figures 3-5: test AUC against the label frequency c", ""]
        lines += [f"![{name}]({name})" for name in figures] + [""]
    page = out_dir / "index.md"
    write_atomic(page, lambda p: Path(p).write_text("\n".join(lines), encoding="utf-8"))
    return page
