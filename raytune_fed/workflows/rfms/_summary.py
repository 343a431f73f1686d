"""What an RFMS grid concludes: mean/sd hypervolume per learner and method, win/loss counts; its flat tables.

``results.parquet`` keeps one row per experiment x method with the selected models' losses as
lists and their configurations as JSON (what the report and resume read); :func:`flat_results`
gives the same rows as scalar columns (``trials``) beside the nested data in long tables:
``selected`` (one row per selected model: ``config.<name>`` and its losses at the openbox,
curators and lockbox), ``curators`` (one row per experiment x curator: its ledger's queries) and
``refusals`` (one row per experiment x method x site x refusal code: what the sites refused).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.report import Results, explode, format_summary_table, spread_json
from raytune_fed.store import write_atomic

NESTED = ("selected", "openbox_outbag", "curator_outbag", "lockbox_loss", "curators", "unit_n_ledger_queries",
          "refusals")
"""Columns of ``results.parquet`` that hold lists (per selected model, per curator) or JSON text (the
configurations, the refusals); :func:`flat_results` turns them into long tables."""


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
    """Mean, sd and n of the hypervolume per learner and method, then the win/loss matrix."""
    lines = [format_summary_table("hypervolume (larger is better)", summary["hypervolume"], ("learner", "method"),
                                  digits=4)]
    wl = summary.get("win_loss")
    if wl:
        names = wl["winner_rows"]
        lines.append("")
        lines.append("wins (row beats column):")
        lines.append(" " * 9 + "".join(f"{n:>8}" for n in names))
        for n, row in zip(names, wl["matrix"]):
            lines.append(f"{n:<9}" + "".join(f"{v:>8.1f}" for v in row))
    return "\n".join(lines)


def _refusals(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per experiment x method x site x refusal: ``kind`` ``query`` (with the site's ``code``) or
    ``final`` (a withheld final loss), and how many (``n``)."""
    from raytune_fed.workflows.rfms._refusals import _parse

    rows = []
    for record in frame.to_dict("records") if "refusals" in frame else ():
        parsed, key = _parse(record["refusals"]), {"experiment": record["experiment"], "method": record["method"]}
        rows += [{**key, "site": site, "kind": "query", "code": code, "n": int(n)}
                 for site, codes in sorted((parsed.get("queries") or {}).items()) for code, n in sorted(codes.items())]
        rows += [{**key, "site": site, "kind": "final", "code": None, "n": int(n)}
                 for site, n in sorted((parsed.get("withheld_finals") or {}).items())]
    return pd.DataFrame(rows, columns=["experiment", "method", "site", "kind", "code", "n"])


def flat_results(frame: pd.DataFrame) -> Results:
    """``trials``: one row per experiment x method, scalar columns (the settings as ``settings.<name>``);
    ``selected``: one row per selected model (``config.<name>``, ``openbox_outbag``, ``curator_outbag``,
    ``lockbox_loss``); ``curators``: one row per experiment x curator (``n_ledger_queries``); ``refusals``:
    what the sites refused (one row per experiment x method x site x refusal code)."""
    keys = ["experiment", "method"]
    selected = explode(frame, keys, ["openbox_outbag", "curator_outbag", "lockbox_loss"], index="model",
                       configs="selected")
    units = frame.drop_duplicates("experiment")
    curators = explode(units, ["experiment"], ["curators", "unit_n_ledger_queries"], index="position") \
        .drop(columns="position").rename(columns={"curators": "curator", "unit_n_ledger_queries": "n_ledger_queries"})
    trials = frame.drop(columns=[c for c in NESTED if c in frame])
    if "settings" in trials:
        trials = spread_json(trials, "settings", "settings")
    return Results("rfms", trials.reset_index(drop=True),
                   {"selected": selected, "curators": curators, "refusals": _refusals(frame)})
