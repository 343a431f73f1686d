"""The RFMS grid: its cells, how one cell runs, and the composition on the grid engine.

Parallel grain: one cell (role assignment x replication x learner, every method) is one
Ray task holding one CPU; it drives its searchers through their ask/tell cores in-process
and talks to long-lived site actors (one :class:`~raytune_fed.federation.SiteHost` per
site, its rows shipped once).  So Ray costs one task per cell and about a millisecond per
curator query, never a Tune trial per evaluation.  Storing, resuming, retrying, placing
and progress are the grid engine's (:mod:`raytune_fed.grid`).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from raytune_fed._checks import check_int, check_unique
from raytune_fed.grid import CellResult, Progress, RayExecutor, check_grid_size, run_cells
from raytune_fed.runtime import check_address
from raytune_fed.store import ResultStore
from raytune_fed.workflows.rfms._sites import SiteHandles, plan_sites, run_with_sites, start_sites
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings
from raytune_fed.workflows.rfms._summary import write_results

TIMING_COLUMNS = ("seconds",)
"""Columns of an experiment's rows that are measurements (stored as timing, never compared)."""


def _check_learners(learners: Sequence[str]) -> tuple[str, ...]:
    from raytune_fed.models import get_learner

    learners = check_unique("learners", learners)
    for name in learners:
        get_learner(name)
    return learners


def build_grid(settings: RFMSSettings, *, n_sites: int, learners: Sequence[str], n_reps: int,
               n_pairs: int | None = None, site_names: Sequence[str] = ()) -> list[ExperimentSpec]:
    """Every (openbox, lockbox) pair (or ``n_pairs`` of them) x replications x learners."""
    from raytune_fed.simulation import role_assignments

    learners = _check_learners(learners)
    n_reps = check_int("n_reps", n_reps, 1)
    roles = role_assignments(n_sites)
    if n_pairs is not None:
        n_pairs = check_int("n_pairs", n_pairs, 1, len(roles))
        roles = _spread(roles, n_pairs)
    check_grid_size(len(roles) * n_reps * len(learners),
                    f"{len(roles)} openbox/lockbox pairs x {n_reps} replications x {len(learners)} learners")
    return [ExperimentSpec(settings, r.openbox, r.lockbox, tuple(r.curators), rep, learner, tuple(site_names))
            for rep in range(n_reps) for r in roles for learner in learners]


def _spread(roles: list[Any], k: int) -> list[Any]:
    """``k`` role assignments with distinct openboxes first (so small runs vary the openbox)."""
    out, used = [], set()
    for r in roles:
        if r.openbox not in used and len(out) < k:
            out.append(r)
            used.add(r.openbox)
    for r in roles:
        if len(out) >= k:
            break
        if r not in out:
            out.append(r)
    return out


@dataclass(frozen=True)
class RunCell:
    """Runs one RFMS cell in a Ray worker against the grid's site actors."""

    sites: SiteHandles

    def __call__(self, spec: ExperimentSpec) -> CellResult:
        from raytune_fed.models import get_learner
        from raytune_fed.workflows.rfms._experiment import run_experiment

        started = time.time()
        learner = get_learner(spec.learner)
        if learner.warm_up is not None:  # e.g. compile the solver once per worker process, outside the timings
            learner.warm_up()
        warmup = time.time() - started
        rows, info = run_with_sites(spec, self.sites, lambda ob, cur, lb: run_experiment(spec, ob, cur, lb))
        shared = {"settings": json.dumps(asdict(spec.settings), sort_keys=True),
                  "unit_n_curator_queries": info["n_curator_queries_total"],
                  "unit_n_ledger_queries": info["n_ledger_queries"]}
        measured = {**{f"unit_{k}": v for k, v in info["timing"].items()},
                    "unit_started": started, "unit_finished": time.time(), "unit_warmup": warmup}
        return CellResult([{**{k: v for k, v in r.items() if k not in TIMING_COLUMNS}, **shared} for r in rows],
                          [{**{k: r[k] for k in TIMING_COLUMNS if k in r}, **measured} for r in rows])


def run_grid(settings: RFMSSettings, *, learners: Sequence[str], n_reps: int = 1, n_pairs: int | None = None,
             out: str | Path, address: str | None = None, num_cpus: int | None = None,
             progress: Progress | None = None, recompute_damaged: bool = False, placement_timeout: float = 600.0,
             max_retries: int = 2) -> pd.DataFrame:
    """Run (or resume) an RFMS grid; writes ``results.parquet`` and ``summary.json`` under ``out``.

    Everything is checked before Ray starts: the arguments, the output directory, the
    dataset and every site.  See :func:`raytune_fed.grid.run_cells` for what happens to
    failed, unplaceable and damaged cells.
    """
    from raytune_fed.runtime import connect

    check_address(address)
    if num_cpus is not None:
        check_int("num_cpus", num_cpus, 1)
    executor = RayExecutor(max_retries=max_retries, placement_timeout=placement_timeout)
    _check_learners(learners)
    check_int("n_reps", n_reps, 1)
    store = ResultStore(out)
    plan = plan_sites(settings)
    specs = build_grid(settings, n_sites=len(plan.site_names), learners=learners, n_reps=n_reps, n_pairs=n_pairs,
                       site_names=plan.site_names)
    run_cell = None
    if any(store.inspect(spec.key).state != "done" for spec in specs):
        connect(address, num_cpus)
        run_cell = RunCell(start_sites(plan))
    result = run_cells(specs, run_cell, store, executor, recompute_damaged=recompute_damaged, progress=progress,
                       name="rfms")
    frame = result.frame()
    frame.attrs["grid_seconds"] = result.seconds
    write_results(frame, out)
    return frame
