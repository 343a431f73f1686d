"""What an RFMS grid concludes: mean/sd hypervolume per learner and method, win/loss counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.store import write_atomic


def summarize(frame: pd.DataFrame) -> dict[str, Any]:
    """Mean and sd hypervolume per learner x method, and win/loss matrices."""
    from raytune_fed.metrics import win_loss_matrix

    methods = list(dict.fromkeys(frame["method"]))
    table = (frame.groupby(["learner", "method"], sort=False)["hypervolume"]
             .agg(["mean", "std", "count"]).reset_index())
    wide = frame.pivot_table(index=["experiment"], columns="method", values="hypervolume")[methods]
    summary: dict[str, Any] = {
        "n_experiments": int(frame["experiment"].nunique()),
        "hypervolume": [{"learner": r.learner, "method": r.method, "mean": float(r["mean"]),
                         "sd": float(r["std"]) if np.isfinite(r["std"]) else None, "n": int(r["count"])}
                        for _, r in table.iterrows()],
        "win_loss": {"winner_rows": methods,
                     "matrix": win_loss_matrix(wide).loc[methods, methods].to_numpy().tolist()}
        if len(methods) > 1 else None,
    }
    return summary


def write_results(frame: pd.DataFrame, out: str | Path) -> dict[str, Any]:
    """Write ``results.parquet`` and ``summary.json`` atomically (each appears complete or not at all)."""
    out = Path(out)
    summary = summarize(frame)
    write_atomic(out / "results.parquet", lambda p: frame.to_parquet(p, index=False))
    write_atomic(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2)))
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    """A plain-text table of mean (sd) hypervolume per learner and method."""
    lines = [f"{'learner':<14} {'method':<8} {'mean HV':>8} {'sd':>7} {'n':>4}"]
    for r in summary["hypervolume"]:
        sd = "" if r["sd"] is None else f"{r['sd']:.3f}"
        lines.append(f"{r['learner']:<14} {r['method']:<8} {r['mean']:>8.4f} {sd:>7} {r['n']:>4}")
    wl = summary.get("win_loss")
    if wl:
        names = wl["winner_rows"]
        lines.append("")
        lines.append("wins (row beats column):")
        lines.append(" " * 9 + "".join(f"{n:>8}" for n in names))
        for n, row in zip(names, wl["matrix"]):
            lines.append(f"{n:<9}" + "".join(f"{v:>8.1f}" for v in row))
    return "\n".join(lines)
