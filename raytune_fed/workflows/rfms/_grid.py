"""The RFMS grid: its cells, how one cell runs, and the composition on the grid engine.

Parallel grain: one cell (role assignment x replication x learner, every method) is one
Ray task holding one CPU (more in the grid's tail, for parallel CV folds: ``long_tail``); it
drives its searchers through their ask/tell cores in-process and talks to long-lived
restricted sites (one :class:`~raytune_fed.federation.Site` per site: a Ray actor, a network
service or, without Ray, an object in this process).  So Ray costs one task per cell and about a millisecond per
curator query, never a Tune trial per evaluation.  Storing, resuming, retrying, placing
and progress are the grid engine's (:mod:`raytune_fed.grid`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from raytune_fed._checks import check_int, check_unique
from raytune_fed.errors import ConfigError
from raytune_fed.grid import (
    CellResult,
    Executor,
    Progress,
    RayExecutor,
    Unplaceable,
    check_grid_size,
    check_retry_options,
    plan_cells,
    run_cells,
    wait_for_declared,
)
from raytune_fed.runtime import check_address, check_num_cpus
from raytune_fed.store import ResultStore, write_atomic
from raytune_fed.workflows._results import PartialResults, remove_partial
from raytune_fed.workflows.rfms._refusals import check_answered
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


def check_site_bounds(settings: RFMSSettings, plan: Any) -> None:
    """``n_folds`` and ``guard_k`` within what every site's in-bag rows allow (never silently lowered).

    The openbox cross-validates its in-bag rows in ``n_folds`` stratified folds (each needs a row of
    each class); the guard refuses a model that puts fewer than ``guard_k`` of a curator's in-bag rows
    in a class, so with ``guard_k`` above half of them it would refuse every query.
    """
    import numpy as np

    from raytune_fed.simulation import inbag_outbag

    inbags = {}
    for i, name in enumerate(plan.site_names):
        _, y = plan.site(i)
        inbag, _ = inbag_outbag(y, inbag_fraction=settings.inbag_fraction, seed=0)  # counts do not depend on it
        inbags[name] = y[inbag]
    rarest = {name: int(np.unique(y, return_counts=True)[1].min()) for name, y in inbags.items()}
    name = min(rarest, key=lambda n: rarest[n])
    if settings.n_folds > rarest[name]:
        raise ConfigError(f"n_folds must be at most {rarest[name]}, got {settings.n_folds}: site {name!r} has "
                          f"{rarest[name]} in-bag rows of its rarer class and every fold needs one")
    smallest = min(inbags, key=lambda n: len(inbags[n]))
    top = len(inbags[smallest]) // 2
    if settings.guard_k > top:
        raise ConfigError(f"guard_k must be at most {top}, got {settings.guard_k}: site {smallest!r} scores "
                          f"{len(inbags[smallest])} in-bag rows, so no model could put {settings.guard_k} of them "
                          f"in each class and the guard would refuse every query")


def build_grid(settings: RFMSSettings, *, n_sites: int, learners: Sequence[str], n_reps: int,
               n_pairs: int | None = None, site_names: Sequence[str] = (),
               site_actors: bool = True) -> list[ExperimentSpec]:
    """Every (openbox, lockbox) pair (or ``n_pairs`` of them) x replications x learners (``site_actors``:
    the cells query sites that are Ray actors)."""
    from raytune_fed.simulation import role_assignments

    learners = _check_learners(learners)
    n_reps = check_int("n_reps", n_reps, 1)
    roles = role_assignments(n_sites)
    if n_pairs is not None:
        n_pairs = check_int("n_pairs", n_pairs, 1, len(roles))
        roles = _spread(roles, n_pairs)
    check_grid_size(len(roles) * n_reps * len(learners),
                    f"{len(roles)} openbox/lockbox pairs x {n_reps} replications x {len(learners)} learners")
    return [ExperimentSpec(settings, r.openbox, r.lockbox, tuple(r.curators), rep, learner, tuple(site_names),
                           site_actors)
            for rep in range(n_reps) for r in roles for learner in learners]


def _spread(roles: list[Any], k: int) -> list[Any]:
    """``k`` role assignments with distinct openboxes first (so small runs vary the openbox)."""
    out: list[Any] = []
    used: set[Any] = set()
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


PLACEMENT_FILE = "placement.json"


def pin_sites(out: str | Path, site_names: Sequence[str], placement_timeout: float,
              progress: Progress | None = None) -> list[str]:
    """Decide, on the connected cluster, whether the grid's site actors are pinned to their nodes; the
    ``site:<name>`` resources that must be declared but are not (after waiting ``placement_timeout``).

    A grid is pinned when a node declares ``site:<name>`` for any of its sites (a live node, or a
    node type the autoscaler can start), or when an earlier run of it was (``OUT/placement.json``
    remembers): then every site's actor, and every cell whose openbox it is, may run only on a
    node declaring that site, so a site no node declares makes every cell unplaceable instead of
    moving its rows elsewhere.  Otherwise (a laptop, an unlabelled cluster) sites and cells run on
    any node.  A site only the autoscaler offers is not waited for here: its actor's demand is
    what makes the autoscaler start its node.
    """
    from raytune_fed.cluster import offered_resources
    from raytune_fed.runtime import declared_resources

    path = Path(out) / PLACEMENT_FILE
    wanted = [f"site:{name}" for name in site_names]
    offered = offered_resources()
    declared = declared_resources(offered)
    recorded: list[str] = []
    if path.exists():
        try:
            recorded = json.loads(path.read_text())["pinned"]
            if not isinstance(recorded, list) or not all(isinstance(r, str) for r in recorded):
                raise TypeError("'pinned' is not a list of resource names")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path} is not a placement record (damaged?): {exc}; delete it to let the grid "
                              f"decide again from the nodes' resources") from None
    if not recorded and not any(declared.get(r, 0.0) > 0 for r in wanted):
        return []  # nothing declares this grid's sites: they run anywhere
    pinned = sorted(set(recorded) | set(wanted))
    if pinned != recorded:
        write_atomic(path, lambda p: Path(p).write_text(json.dumps({"pinned": pinned}, indent=1)))
    return wait_for_declared([r for r in pinned if r not in offered], placement_timeout,
                             progress.note if progress is not None else None)


def _no_sites_started(spec: ExperimentSpec) -> CellResult:
    """``run_cell`` while no site runs (nothing to run, or no cell can be placed): executors never call it then."""
    raise RuntimeError(f"cell {spec.label} cannot run: the grid's sites were not started")


def run_grid(settings: RFMSSettings, *, learners: Sequence[str], n_reps: int = 1, n_pairs: int | None = None,
             out: str | Path, address: str | None = None, num_cpus: int | None = None,
             progress: Progress | None = None, recompute_damaged: bool = False, placement_timeout: float = 600.0,
             max_retries: int = 2, sites: str | Path = "actor", long_tail: bool = True) -> pd.DataFrame:
    """Run (or resume) an RFMS grid; writes ``results.parquet`` and ``summary.json`` under ``out``.

    While it runs, and when it stops incomplete, ``out/results.partial.parquet`` holds the rows
    of the cells stored so far (see :mod:`raytune_fed.workflows._results`); it is removed once
    ``results.parquet`` is written.

    Everything is checked before Ray starts: the arguments, the output directory, the
    dataset and every site.  ``sites`` is where the data sites run: ``"local"`` (in this
    process; the cells then run here one after another, without Ray), ``"actor"`` (Ray
    actors), ``"service"`` (local network services), or a sites file of running sites by
    URL (see :func:`~raytune_fed.workflows.rfms.start_sites`).  Simulated sites start
    afresh on every run, their ledgers under ``out/sites/``.  See
    :func:`raytune_fed.grid.run_cells` for what happens to failed, unplaceable and damaged
    cells.  ``long_tail`` lends idle cores to the last cells (their CV folds run in
    parallel; the rows do not change).  ``utilisation.json`` (a measurement, kept apart
    from the summary, which reruns reproduce) and ``frame.attrs["utilisation"]`` say how
    busy the cluster's cores were while the cells of this call ran, tail included;
    ``frame.attrs["usage"]`` has each cell's CPU seconds, cores and wall seconds by ``cell_key``.
    """
    from raytune_fed.grid import InProcessExecutor
    from raytune_fed.runtime import connect
    from raytune_fed.workflows.rfms._sites import check_sites_choice, grid_schedule, remote_sites

    check_address(address)
    check_num_cpus(num_cpus)
    check_retry_options(max_retries, placement_timeout)
    sites = check_sites_choice(sites)
    executor: Executor = InProcessExecutor() if sites == "local" else \
        RayExecutor(max_retries=max_retries, placement_timeout=placement_timeout, long_tail=long_tail)
    _check_learners(learners)
    check_int("n_reps", n_reps, 1)
    store = ResultStore(out)
    plan = plan_sites(settings)
    check_site_bounds(settings, plan)
    specs = build_grid(settings, n_sites=len(plan.site_names), learners=learners, n_reps=n_reps, n_pairs=n_pairs,
                       site_names=plan.site_names, site_actors=sites == "actor")
    if isinstance(sites, Path):
        remote_sites(plan, sites)  # the file is checked before Ray starts
    run_cell: Callable[[ExperimentSpec], CellResult] = _no_sites_started
    started, n_cores = None, 0
    if plan_cells(specs, store, recompute_damaged=recompute_damaged).todo:  # else neither Ray nor sites start
        if isinstance(sites, Path):
            remote_sites(plan, sites, reach=True)  # every site answers, before Ray starts
        if sites != "local":
            import ray

            connect(address, num_cpus)
            n_cores = int(ray.cluster_resources().get("CPU", 0))
            missing = pin_sites(out, plan.site_names, placement_timeout, progress) if sites == "actor" else []
            if missing:
                executor = Unplaceable(
                    f"no live node declares {', '.join(repr(r) for r in missing)}: this grid's sites are pinned to "
                    f"the nodes that declare them (recorded in {Path(out) / PLACEMENT_FILE}), so their rows never "
                    f"go to another node; waited {placement_timeout:.0f} s (placement_timeout)")
        if not isinstance(executor, Unplaceable):
            workdir = Path(out) / "sites" / time.strftime("%Y%m%dT%H%M%S")
            started = start_sites(plan, settings, grid_schedule(specs), sites=sites, n_learners=len(set(learners)),
                                  workdir=workdir, max_retries=max_retries)
            run_cell = RunCell(started.handles)
    try:
        result = run_cells(specs, run_cell, store, executor, recompute_damaged=recompute_damaged, progress=progress,
                           name="rfms", on_partial=PartialResults(out))
    finally:
        if started is not None:
            started.close()
    frame = result.frame()
    frame.attrs["grid_seconds"] = result.seconds
    frame.attrs["usage"] = {key: {"cpu_seconds": u.cpu_seconds, "cores": u.cores, "wall_seconds": u.end - u.start}
                            for key, u in result.usage_by_key().items()}
    write_results(frame, out)
    remove_partial(out)  # results.parquet is complete: the partial file has done its work
    if result.usages and n_cores:
        used = frame.attrs["utilisation"] = result.utilisation(n_cores)
        write_atomic(Path(out) / "utilisation.json", lambda p: Path(p).write_text(json.dumps(used, indent=2)))
    check_answered(frame)  # sites that refused every query or withheld every final: no silent empty result
    return frame
