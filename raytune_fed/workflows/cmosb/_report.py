"""The report of a CMOSB comparison: Table IV and Figures 6-10 on one page.

``write_report`` renders through the one report layer (:mod:`raytune_fed.report`):
``index.html`` with the figures embedded, ``index.md`` and the PNGs beside it.  The
figure functions return matplotlib figures; the page writes them.  Pure pandas/matplotlib.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import pareto_mask
from raytune_fed.workflows._results import read_results
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES
from raytune_fed.workflows.cmosb._summary import COLOURS, LABELS, feasible, normalise, summarize

Constraints = Mapping[str, tuple[str, float]]
_REQUIRED = ("dataset", "method", *OBJECTIVES)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def front_figures(frame: pd.DataFrame, constraints: Constraints | None = None) -> list[tuple[str, Any, str]]:
    """Figures 6/7 (3-D, normalised objectives) and 8/9 (2-D projections with each method's
    front) per dataset: ``(name, figure, caption)``."""
    from raytune_fed.report import plots

    plt = _plt()
    scaled = normalise(frame)
    ok = feasible(frame, dict(constraints or {}))
    out = []
    for dataset, rows in scaled.groupby("dataset"):
        fig = plt.figure(figsize=(6.4, 5.4))
        ax = fig.add_subplot(projection="3d")
        for method, m in rows.groupby("method", sort=False):
            ax.scatter(*(m[o] for o in OBJECTIVES), s=14, c=COLOURS.get(method), label=LABELS.get(method, method),
                       depthshade=False)
        ax.set_xlabel("utility loss")
        ax.set_ylabel("training cost")
        ax.set_zlabel("privacy leakage")
        ax.legend(fontsize=8)
        ax.set_title(f"{dataset}: evaluated configurations (normalised)")
        out.append((f"pareto3d_{dataset}", fig, "Every evaluated configuration in the three normalised objectives "
                                               "(0 = best value any method reached, 1 = worst); lower is better."))
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
        for ax, other in zip(axes, ("training_cost", "privacy_leakage")):
            for method, m in rows.groupby("method", sort=False):
                colour = COLOURS.get(method)
                ax.scatter(m["utility_loss"], m[other], s=12, alpha=0.35, c=colour)
                kept = m[ok[m.index]]
                pts = kept[["utility_loss", other]].to_numpy(dtype=float)
                front = pts[pareto_mask(pts)] if len(pts) else pts
                front = front[np.argsort(front[:, 0])]
                ax.step(front[:, 0], front[:, 1], where="post", c=colour, lw=1.8, label=LABELS.get(method, method))
            plots.fit_axis(ax, rows["utility_loss"], "x", margin=0.05)
            plots.fit_axis(ax, rows[other], "y", margin=0.05)
            ax.set_xlabel("utility loss (normalised)")
            ax.set_ylabel(f"{other.replace('_', ' ')} (normalised)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{dataset}: fronts of each method")
        fig.tight_layout()
        out.append((f"pareto2d_{dataset}", fig, "Points: evaluated configurations; lines: each method's "
                                               "non-dominated front (feasible rows only) in two of the objectives."))
    return out


def generation_figures(summary: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """Figure 10: CMOSB's hypervolume (feasible rows) after each generation, per dataset."""
    from raytune_fed.report import plots

    plt = _plt()
    out = []
    for dataset, d in summary["datasets"].items():
        curve = d.get("cmosb_hypervolume_by_generation") or []
        if not curve:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.8))
        generations = np.arange(1, len(curve) + 1)
        ax.plot(generations, curve, marker="o", c=COLOURS["cmosb"], label="all evaluated so far")
        values = list(curve)
        population = d.get("cmosb_population_hypervolume_by_generation") or []
        if population:
            ax.plot(np.arange(1, len(population) + 1), population, marker=".", ls="--", c=COLOURS["cmosb"],
                    label="current population")
            values += list(population)
        ax.legend(fontsize=8)
        plots.integer_ticks(ax, "x")
        ax.set_xlim(0.5, len(curve) + 0.5)
        plots.fit_axis(ax, values, "y", floor=0.0, ceiling=1.0)
        ax.set_xlabel("generation")
        ax.set_ylabel("hypervolume (normalised)")
        ax.set_title(f"{dataset}: CMOSB by generation")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        out.append((f"hypervolume_by_generation_{dataset}", fig, "Hypervolume of CMOSB's feasible configurations "
                    "after each generation: of all evaluated so far, and of the population NSGA-II keeps."))
    return out


def _stored(out: Path) -> tuple[dict[str, Any], Constraints]:
    path = out / "settings.json"
    if not path.is_file():
        return {}, {}
    try:
        record = json.loads(path.read_text())
    except ValueError:
        return {}, {}
    settings = record.get("settings", {}) if isinstance(record, dict) else {}
    constraints = {}
    if settings.get("max_cost") is not None:
        constraints["training_cost"] = ("<=", float(settings["max_cost"]))
    if settings.get("max_leakage") is not None:
        constraints["privacy_leakage"] = ("<=", float(settings["max_leakage"]))
    return dict(settings), constraints


def write_report(out: str | Path, frame: pd.DataFrame | None = None, constraints: Constraints | None = None, *,
                 summary: Mapping[str, Any] | None = None, command: str | None = None) -> Path:
    """Write the page of a CMOSB run under ``out`` (from ``results.parquet`` unless ``frame`` is
    given; constraints from ``settings.json`` unless given); return the ``index.html`` path."""
    from raytune_fed.report import Page, write_page

    out = Path(out)
    partial = None
    if frame is None:
        frame, partial = read_results(out, f"run `raytune-fed cmosb --out {out}` first")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ConfigError(f"{out}/results.parquet is not a CMOSB run's results: columns {missing} are missing")
    settings, stored_constraints = _stored(out)
    constraints = stored_constraints if constraints is None else dict(constraints)
    summary = summarize(frame, constraints) if summary is None else summary
    bounds = ", ".join(f"{k.replace('_', ' ')} {op} {v:g}" for k, (op, v) in constraints.items()) or "none"
    page = Page("CMOSB comparison", "cmosb", settings=settings, command=command,
                intro=f"{len(frame)} evaluated configurations on {', '.join(summary['datasets'])}. Hypervolume on "
                      f"the three objectives normalised per dataset (Table IV), reference point "
                      f"{tuple(summary['reference'])}; higher is better. Constraints: {bounds}.")
    if partial is not None:
        page.mark_partial(partial.n_done, partial.n_total, partial.missing, partial.unit)
    for dataset, d in summary["datasets"].items():
        page.section(f"Table IV: {dataset}").table(
            ["method", "hypervolume", "evaluated", "feasible", "on the front"],
            [[LABELS.get(method, method), f"{m['hypervolume']:.3f}", m["n_evaluated"], m["n_feasible"],
              len(m["front"])] for method, m in d["methods"].items()])
    figures = front_figures(frame, constraints) + generation_figures(summary)
    if figures:
        page.section("Figures")
        for name, fig, caption in figures:
            page.figure(name, fig, caption)
    return write_page(out, page)


def keep_partial(out: str | Path, dataset: str, run_names: Sequence[str]) -> None:
    """Keep ``out/results.partial.parquet`` of a CMOSB run that is not complete: the rows of the methods' Tune
    runs finished so far (``out/runs/<name>.parquet``, in the order of ``run_names``, as ``results.parquet``
    would hold them) and the names of the others, counted in ``runs`` (see
    :mod:`raytune_fed.workflows._results`).  With every run finished it does nothing (``write_outputs``
    writes the complete results); with none there is no partial file.  It is called while the run goes
    on and when it stops, so a failure to write is left for the run's own files to report."""
    from raytune_fed.workflows._results import Partial, remove_partial, write_partial

    out = Path(out)
    done = [name for name in run_names if (out / "runs" / f"{name}.parquet").is_file()]
    if len(done) == len(run_names):
        return
    try:
        if not done:
            remove_partial(out)
            return
        frame = pd.concat([pd.read_parquet(out / "runs" / f"{name}.parquet") for name in done], ignore_index=True)
        frame.insert(0, "dataset", dataset)
        write_partial(out, frame, Partial("cmosb", len(done), len(run_names),
                                          tuple(n for n in run_names if n not in done), unit="runs"))
    except Exception:  # noqa: BLE001 - a full disk, a runs file cut short, pyarrow: never hide the run's error
        return


def write_outputs(frame: pd.DataFrame, out: str | Path,
                  constraints: Mapping[str, tuple[str, float]] | None = None, *,
                  command: str | None = None) -> dict[str, Any]:
    """``results.parquet``, ``summary.json`` and the report page (``index.html``, ``index.md``, PNGs); the
    run's ``results.partial.parquet`` (:func:`keep_partial`) is removed."""
    from raytune_fed.store import write_atomic
    from raytune_fed.workflows._results import remove_partial

    out = Path(out)
    summary = summarize(frame, constraints)
    write_atomic(out / "results.parquet", lambda p: frame.to_parquet(p))  # whole or not at all
    remove_partial(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    write_report(out, frame, constraints or {}, summary=summary, command=command)
    return summary
