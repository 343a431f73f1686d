"""Table IV and Figures 6-9 from the rows of a CMOSB comparison.

The three objectives are normalised per dataset, as the paper does: min-max over every
configuration any method evaluated on it, so each lies in [0, 1]; the hypervolume of a
method is then taken against the reference point (1, 1, 1).  With constraints
(``max_cost``, ``max_leakage``) a method's front and hypervolume use its feasible rows only.

CMOSB's hypervolume by generation (Figure 10) is given two ways: over every feasible
configuration evaluated up to each generation, and over the feasible members of NSGA-II's
population after it (the rows' ``generation`` and ``in_population_until`` columns come from
the searcher's own record).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from raytune_fed.metrics import hypervolume, pareto_mask
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
        keep = ok & (generations <= g) & (until >= g if population else True)
        out.append(hypervolume(points[keep], REFERENCE) if keep.any() else 0.0)
    return out


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def format_summary(summary: Mapping[str, Any]) -> str:
    lines = []
    for dataset, d in summary["datasets"].items():
        lines.append(f"{dataset}: hypervolume on normalised objectives (reference {summary['reference']})")
        for method, m in d["methods"].items():
            lines.append(f"  {LABELS.get(method, method):6s} {m['hypervolume']:.3f}  "
                         f"({m['n_evaluated']} evaluated, {m['n_feasible']} feasible, {len(m['front'])} on the front)")
    return "\n".join(lines)


def write_outputs(frame: pd.DataFrame, out: str | Path,
                  constraints: Mapping[str, tuple[str, float]] | None = None) -> dict[str, Any]:
    """``results.parquet``, ``summary.json``, the PNG plots and ``report.md`` / ``report.html``."""
    out = Path(out)
    summary = summarize(frame, constraints)
    frame.to_parquet(out / "results.parquet")
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    figures = plot_fronts(frame, out, constraints) + plot_generations(summary, out)
    _write_report(summary, figures, out)
    return summary


def plot_fronts(frame: pd.DataFrame, out: Path, constraints: Mapping[str, tuple[str, float]] | None = None
                ) -> list[str]:
    """Figure 6/7 (3-D, normalised objectives) and 8/9 (2-D projections with fronts) per dataset, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scaled = normalise(frame)
    ok = feasible(frame, dict(constraints or {}))
    names = []
    for dataset, rows in scaled.groupby("dataset"):
        fig = plt.figure(figsize=(6, 5))
        ax = fig.add_subplot(projection="3d")
        for method, m in rows.groupby("method", sort=False):
            ax.scatter(*(m[o] for o in OBJECTIVES), s=12, c=COLOURS.get(method), label=LABELS.get(method, method))
        ax.set_xlabel("utility loss")
        ax.set_ylabel("training cost")
        ax.set_zlabel("privacy leakage")
        ax.legend()
        ax.set_title(f"{dataset}: evaluated configurations (normalised)")
        names.append(_save(fig, out, f"pareto3d_{dataset}.png", plt))
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, other in zip(axes, ("training_cost", "privacy_leakage")):
            for method, m in rows.groupby("method", sort=False):
                colour = COLOURS.get(method)
                ax.scatter(m["utility_loss"], m[other], s=10, alpha=0.4, c=colour)
                kept = m[ok[m.index]]
                pts = kept[["utility_loss", other]].to_numpy(dtype=float)
                front = pts[pareto_mask(pts)] if len(pts) else pts
                front = front[np.argsort(front[:, 0])]
                ax.step(front[:, 0], front[:, 1], where="post", c=colour, label=LABELS.get(method, method))
            ax.set_xlabel("utility loss (normalised)")
            ax.set_ylabel(f"{other.replace('_', ' ')} (normalised)")
            ax.legend()
        fig.suptitle(f"{dataset}: fronts of each method")
        names.append(_save(fig, out, f"pareto2d_{dataset}.png", plt))
    return names


def plot_generations(summary: Mapping[str, Any], out: Path) -> list[str]:
    """Figure 10: CMOSB's hypervolume (feasible rows) after each generation, per dataset: all so far and population."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for dataset, d in summary["datasets"].items():
        curve = d.get("cmosb_hypervolume_by_generation") or []
        if not curve:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(range(1, len(curve) + 1), curve, marker="o", c=COLOURS["cmosb"], label="all evaluated so far")
        population = d.get("cmosb_population_hypervolume_by_generation") or []
        if population:
            ax.plot(range(1, len(population) + 1), population, marker=".", ls="--", c=COLOURS["cmosb"],
                    label="current population")
            ax.legend()
        ax.set_xlabel("generation")
        ax.set_ylabel("hypervolume (normalised)")
        ax.set_title(f"{dataset}: CMOSB by generation")
        names.append(_save(fig, out, f"hypervolume_by_generation_{dataset}.png", plt))
    return names


def _save(fig: Any, out: Path, name: str, plt: Any) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def _write_report(summary: Mapping[str, Any], figures: list[str], out: Path) -> None:
    md = ["# CMOSB comparison", "", "Hypervolume on objectives normalised per dataset (Table IV).", ""]
    body = ["<h1>CMOSB comparison</h1>", "<p>Hypervolume on objectives normalised per dataset (Table IV).</p>"]
    for dataset, d in summary["datasets"].items():
        md += [f"## {dataset}", "", "| method | hypervolume | evaluated | feasible | on the front |",
               "| --- | ---: | ---: | ---: | ---: |"]
        body.append(f"<h2>{html.escape(dataset)}</h2><table><tr><th>method</th><th>hypervolume</th>"
                    f"<th>evaluated</th><th>feasible</th><th>on the front</th></tr>")
        for method, m in d["methods"].items():
            cells = (LABELS.get(method, method), f"{m['hypervolume']:.3f}", m["n_evaluated"], m["n_feasible"],
                     len(m["front"]))
            md.append("| " + " | ".join(str(c) for c in cells) + " |")
            body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        body.append("</table>")
        md.append("")
    for name in figures:
        md += [f"![{name}]({name})", ""]
        body.append(f'<p><img src="{html.escape(name)}" alt="{html.escape(name)}"></p>')
    (out / "report.md").write_text("\n".join(md))
    (out / "report.html").write_text("<!doctype html><html><head><meta charset='utf-8'><title>CMOSB comparison"
                                     "</title></head><body>" + "\n".join(body) + "</body></html>\n")
