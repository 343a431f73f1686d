"""How the CMOSB reproduction scores its searches: Table 4's hypervolume under three normalisations, the
constrained searches against MOSB by generation (Figures 10 and 11), and what each bound cuts away.

Pure pandas / numpy over the workflow's evaluated rows (one frame per seed); no Ray.  Used by
``experiments/bench_cmosb_seeds.py``, the multi-seed reproduction, and tested on known answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from raytune_fed.crypto import REFERENCE_OP_TIMES
from raytune_fed.metrics import hypervolume, pareto_mask
from raytune_fed.workflows.cmosb._objectives import OBJECTIVES
from raytune_fed.workflows.cmosb._summary import feasible, hypervolume_by_generation

METHOD_ORDER = ("cmosb", "es", "gs", "bo")
REFERENCE = (1.0, 1.0, 1.0)
PAPER_BOUNDS = {"privacy_leakage": 0.6, "training_cost": 100.0}  # Section VII-D, on Synthetic1


def mosb_meets_bound(mosb: dict[int, pd.DataFrame], bounds: dict[str, float]) -> dict[str, Any]:
    """How much of the unconstrained search each bound cuts away, per seed: the share of MOSB's evaluations that
    meet it.  A bound every evaluation meets binds nothing: the constrained search sees no violation, so with the
    same seed it makes MOSB's search again, evaluation for evaluation."""
    out: dict[str, Any] = {}
    for objective, bound in bounds.items():
        shares = {str(s): float(feasible(f, {objective: ("<=", bound)}).mean()) for s, f in mosb.items()}
        out[f"{objective} <= {bound:g}"] = {
            "share_per_seed": shares, "largest_value_per_seed": {str(s): float(f[objective].max())
                                                                  for s, f in mosb.items()},
            "binds": any(v < 1.0 for v in shares.values())}
    return out


def flood_share(frame: pd.DataFrame) -> dict[str, float]:
    """The share of eps_c that the passive party's flooding adds: one addition per result ciphertext, and the
    active party decrypts each result once, so floods = decryptions (plain and BFV count alike)."""
    cost = frame["training_cost"].to_numpy(dtype=float)
    priced = cost > 0  # a configuration without federated trees encrypts nothing: eps_c = 0, no share to take
    share = frame["decryptions"].to_numpy(dtype=float)[priced] * REFERENCE_OP_TIMES.addition / cost[priced]
    return {"n_rows": int(priced.sum()), "n_rows_without_cost": int((~priced).sum()),
            "median": float(np.median(share)), "min": float(share.min()), "max": float(share.max())}


def _scaled(frame: pd.DataFrame, low: np.ndarray, span: np.ndarray) -> np.ndarray:
    span = np.where(span > 0, span, 1.0)
    return (frame[list(OBJECTIVES)].to_numpy(dtype=float) - low) / span


READINGS = {"all_rows": "min-max over every configuration any method evaluated on the dataset (the workflow's "
                         "summary.json; our reading of 'we normalize the three objectives for each dataset')",
            "natural": "utility loss and privacy leakage on their own [0, 1] scale, training cost divided by the "
                       "largest cost any method reached",
            "own_rows": "each method min-max scaled over its own rows (a check: not comparable between methods)"}


def readings(points: dict[str, np.ndarray], low: np.ndarray, high: np.ndarray) -> dict[str, dict[str, float]]:
    """Each method's hypervolume (reference (1, 1, 1)) under every normalisation of :data:`READINGS`.

    ``points`` are a method's objective rows (all of them, or its non-dominated ones: every
    reading scales each objective by an increasing map, so the front and its hypervolume are
    the same); ``low`` / ``high`` the objectives' range over every method's rows.
    """
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    out: dict[str, dict[str, float]] = {r: {} for r in READINGS}
    for method, rows in points.items():
        rows = np.asarray(rows, dtype=float).reshape(-1, len(OBJECTIVES))
        own_low, own_high = rows.min(axis=0), rows.max(axis=0)
        scaled = {"all_rows": (low, high - low), "natural": (np.zeros(3), np.array([1.0, high[1], 1.0])),
                  "own_rows": (own_low, own_high - own_low)}
        for reading, (lo, span) in scaled.items():
            out[reading][method] = hypervolume((rows - lo) / np.where(span > 0, span, 1.0), REFERENCE)
    return out


def table4(frames: dict[int, pd.DataFrame]) -> dict[str, Any]:
    """Each method's hypervolume per seed under the three normalisations, and their mean and spread."""
    per_seed: dict[str, dict[str, dict[int, float]]] = {r: {} for r in READINGS}
    counts: dict[str, dict[int, int]] = {}
    out_es: dict[str, list[dict[str, float]]] = {}
    for seed, frame in frames.items():
        values = frame[list(OBJECTIVES)].to_numpy(dtype=float)
        points = {m: frame.loc[frame.method == m, list(OBJECTIVES)].to_numpy(dtype=float) for m in METHOD_ORDER
                  if (frame.method == m).any()}
        for method, rows in points.items():
            counts.setdefault(method, {})[seed] = len(rows)
        if "es" in points:  # ES's few fixed settings: their objectives explain its swing between seeds
            out_es[str(seed)] = [dict(zip(OBJECTIVES, map(float, r))) for r in points["es"]]
        for reading, hv in readings(points, values.min(axis=0), values.max(axis=0)).items():
            for method, value in hv.items():
                per_seed[reading].setdefault(method, {})[seed] = value
    out: dict[str, Any] = {"n_evaluated": counts, "readings": {}, "reading_definitions": READINGS,
                           "cmosb_minus_paired": {}, "es_objectives": out_es}
    for reading, methods in per_seed.items():
        out["readings"][reading] = {m: _spread(hv) for m, hv in methods.items()}
        # CMOSB minus each baseline, paired by seed (the same trainings' seeds and normalisation)
        cmosb = methods.get("cmosb", {})
        out["cmosb_minus_paired"][reading] = {m: _spread({s: cmosb[s] - v for s, v in hv.items() if s in cmosb},
                                                         paired=True)
                                              for m, hv in methods.items() if m != "cmosb" and set(hv) & set(cmosb)}
    return out


def _spread(by_seed: dict[int, float], paired: bool = False) -> dict[str, Any]:
    """Values per seed with their mean and standard deviation (and, for differences, how many are > 0)."""
    values = np.array(list(by_seed.values()), dtype=float)
    out = {"per_seed": {str(s): float(v) for s, v in by_seed.items()}, "mean": float(values.mean()),
           "std": float(values.std(ddof=1)) if len(values) > 1 else 0.0}
    return {**out, "seeds_ahead": int((values > 0).sum()), "seeds": len(values)} if paired else out


def figures(mosb: dict[int, pd.DataFrame], constrained: dict[str, dict[int, pd.DataFrame]], objective: str,
            bound: float) -> dict[str, Any]:
    """Figure 10 (hypervolume by generation, two ways) and Figure 11 (final 2-D fronts) for one constraint."""
    searches = {name: runs for name, runs in {"mosb": mosb, **constrained}.items() if runs}
    pooled = pd.concat([f for runs in searches.values() for f in runs.values()], ignore_index=True)
    values = pooled[list(OBJECTIVES)].to_numpy(dtype=float)
    low, span = values.min(axis=0), values.max(axis=0) - values.min(axis=0)
    out: dict[str, Any] = {"bound": bound, "normalised_over": {n: [float(lo), float(lo + s)] for n, lo, s in
                                                              zip(OBJECTIVES, low, span)}, "searches": {}}
    for name, runs in searches.items():
        curves: dict[str, dict[int, list[float]]] = {"so_far": {}, "population": {}}
        fronts: dict[str, list[list[float]]] = {}
        n_feasible: dict[str, int] = {}
        for seed, frame in runs.items():
            scaled = frame.copy()
            scaled[list(OBJECTIVES)] = _scaled(frame, low, span)
            ok = feasible(frame, {objective: ("<=", bound)})
            curves["so_far"][seed] = hypervolume_by_generation(scaled, ok)
            curves["population"][seed] = hypervolume_by_generation(scaled, ok, population=True)
            pts = frame.loc[ok, ["utility_loss", objective]].to_numpy(dtype=float)
            front = pts[pareto_mask(pts)] if len(pts) else pts
            fronts[str(seed)] = front[np.argsort(front[:, 0])].tolist() if len(front) else []
            n_feasible[str(seed)] = int(ok.sum())
        entry: dict[str, Any] = {"n_evaluated": {str(s): len(f) for s, f in runs.items()}, "n_feasible": n_feasible,
                                 "fronts": fronts}
        entry["generations_reached"] = {str(s): len(c) for s, c in curves["so_far"].items()}
        for kind, by_seed in curves.items():
            # a search still running has fewer generations: each generation's mean is over the seeds that reached it
            depth = max(len(c) for c in by_seed.values())
            matrix = np.full((len(by_seed), depth), np.nan)
            for i, c in enumerate(by_seed.values()):
                matrix[i, :len(c)] = c
            n = (~np.isnan(matrix)).sum(axis=0)
            finals = np.array([c[-1] for c in by_seed.values()])
            entry[kind] = {"per_seed": {str(s): c for s, c in by_seed.items()},
                           "mean": np.nanmean(matrix, axis=0).tolist(), "n_seeds": n.tolist(),
                           "std": [float(np.nanstd(matrix[:, g], ddof=1)) if n[g] > 1 else 0.0 for g in range(depth)],
                           "final_mean": float(finals.mean()),
                           "final_std": float(finals.std(ddof=1)) if len(finals) > 1 else 0.0}
        out["searches"][name] = entry
    # paired by seed: each constrained search minus MOSB, at the last generation both searches of that seed
    # reached, and after every generation (mean and sd over the seeds where both reached it)
    for name in constrained:
        if name not in out["searches"] or "mosb" not in out["searches"]:
            continue
        for kind in ("so_far", "population"):
            mine, base = out["searches"][name][kind]["per_seed"], out["searches"]["mosb"][kind]["per_seed"]
            pairs = {s: (mine[s], base[s]) for s in mine if s in base}
            d = np.array([a[min(len(a), len(b)) - 1] - b[min(len(a), len(b)) - 1] for a, b in pairs.values()])
            if not len(d):
                continue
            out["searches"][name][f"{kind}_final_minus_mosb"] = {
                "seeds_compared": list(pairs), "at_generation": {s: min(len(a), len(b)) for s, (a, b) in pairs.items()},
                "per_seed": d.tolist(), "mean": float(d.mean()), "std": float(d.std(ddof=1)) if len(d) > 1 else 0.0,
                "seeds_ahead": int((d > 0).sum()), "seeds": len(d)}
            depth = max(min(len(a), len(b)) for a, b in pairs.values())
            by_generation = []
            for g in range(depth):
                dg = np.array([a[g] - b[g] for a, b in pairs.values() if min(len(a), len(b)) > g])
                by_generation.append({"n_seeds": len(dg), "mean": float(dg.mean()),
                                      "std": float(dg.std(ddof=1)) if len(dg) > 1 else 0.0,
                                      "seeds_ahead": int((dg > 0).sum())})
            out["searches"][name][f"{kind}_minus_mosb_by_generation"] = by_generation
    return out
