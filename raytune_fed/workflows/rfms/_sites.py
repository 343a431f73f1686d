"""Where RFMS meets its data sites.

* :func:`plan_sites` - the driver loads the dataset, splits it into sites and checks, before
  anything starts, that every site can play every role (an in-bag/out-bag split, the
  openbox's cross-validation, at least one feature that is not constant);
* :func:`rfms_site_policy` - the policy template the grid gives the sites it simulates
  (budget and final answers sized from the grid, Thresholdout and the guard from the
  settings);
* :func:`start_sites` - the sites of a plan as restricted
  :class:`~raytune_fed.federation.Site` s, in this process (``"local"``), as Ray actors
  (``"actor"``) or as local network services (``"service"``), or already running
  elsewhere and listed in a sites file by URL; every site is shown the grid's schedule
  (:func:`~raytune_fed.federation.rfms_schedule`) once and checks each request against it;
* :func:`run_with_sites` - the one place a cell talks to its sites: it opens the cell's
  curator and lockbox sessions for the cell's unit, hands the experiment its openbox and
  sessions, and reads the curators' ledgers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError, RaytuneFedError
from raytune_fed.store import describe_os_error
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings

DEPLOYMENTS = ("local", "actor", "service")


@dataclass(frozen=True)
class SitePlan:
    """The dataset split into sites, as the driver simulates it."""

    X: np.ndarray
    y: np.ndarray
    site_of_row: np.ndarray
    site_names: tuple[str, ...]

    def site(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.flatnonzero(self.site_of_row == i)
        return self.X[rows], self.y[rows]


def plan_sites(settings: RFMSSettings, *, n_sites: int = 5) -> SitePlan:
    """Load the dataset and split it into sites (natural, SRS or DRC), checking every site."""
    from raytune_fed.data import load_dataset
    from raytune_fed.simulation import split_sites

    ds = load_dataset(settings.dataset, target=settings.target, site_column=settings.site_column)
    if ds.n_classes != 2:
        raise ConfigError(f"RFMS needs a binary task; dataset {settings.dataset!r} has {ds.n_classes} classes")
    if settings.split == "natural" and ds.sites is None:
        raise ConfigError(f"dataset {settings.dataset!r} has no natural sites; use --split srs or --split drc")
    split = split_sites(ds.X, ds.y, method=settings.split, n_sites=n_sites if ds.sites is None else ds.n_sites,
                        sites=ds.sites, site_names=ds.site_names, pca_variance=settings.pca_variance,
                        seed=settings.seed, dataset=settings.dataset)
    if split.n_sites < 3:
        raise ConfigError(f"RFMS needs at least 3 sites (openbox, curator, lockbox), got {split.n_sites}")
    plan = SitePlan(ds.X, ds.y, split.site_of_row, tuple(split.site_names))
    for i, name in enumerate(plan.site_names):
        _check_site(name, *plan.site(i), settings)
    return plan


def _check_site(name: str, X: np.ndarray, y: np.ndarray, settings: RFMSSettings) -> None:
    """Raise unless site ``name`` can be an openbox, a curator and a lockbox."""
    from raytune_fed.models import stratified_folds
    from raytune_fed.simulation import inbag_outbag

    try:
        inbag, _ = inbag_outbag(y, inbag_fraction=settings.inbag_fraction, seed=0)  # class counts do not depend
        stratified_folds(y[inbag], settings.n_folds, seed=0)                        # on the seed
    except RaytuneFedError as exc:
        raise type(exc)(f"site {name!r} cannot be an openbox or a curator: {exc}") from None
    if X.shape[1] == 0 or not (np.ptp(X, axis=0) > 0).any():
        raise ConfigError(f"site {name!r}: every feature is constant on its {len(y)} rows; the learners drop "
                          f"constant features and would have none left")


def check_sites_choice(sites: Any) -> str | Path:
    """``sites`` as given to :func:`run_grid`: a deployment name or the path of a sites file."""
    if isinstance(sites, str) and sites in DEPLOYMENTS:
        return sites
    if isinstance(sites, (str, os.PathLike)) and str(sites).lower().endswith((".toml", ".json")):
        path = Path(sites)
        if not path.is_file():
            raise ConfigError(f"sites file not found: {os.fspath(path)!r}")
        return path
    raise ConfigError(f"sites must be one of {list(DEPLOYMENTS)} or a .toml/.json sites file, got {sites!r}")


def remote_sites(plan: SitePlan, path: Path, *, reach: bool = False) -> tuple[Any, ...]:
    """Clients for the plan's sites from a sites file, checked (keys, URLs, tokens, CA files); with
    ``reach``, each site must also accept a connection (and a verified TLS handshake) - the grid
    does this before Ray starts, so a wrong URL or certificate is found in seconds."""
    from raytune_fed.serve import check_reachable, load_site_directory

    found = load_site_directory(path)
    missing = [n for n in plan.site_names if n not in found]
    if missing:
        raise ConfigError(f"the sites file {path.name!r} lacks sites {missing} of the dataset's split "
                          f"(it lists {sorted(found)})")
    clients = tuple(found[n] for n in plan.site_names)
    if reach:
        for client in clients:
            check_reachable(client)
    return clients


def rfms_site_policy(settings: RFMSSettings, schedule: Any, n_learners: int, max_retries: int = 2) -> dict:
    """The policy template of the sites an RFMS grid simulates (each site adds its name and seed).

    The grid plays every site's owner, so it sizes what must suffice for the benign methods
    and says so in each site's policy:

    * a query budget of every query the site's curator cells can send (each method that
      needs the remote value asks at most ``n_init + n_iter`` times per cell);
    * final batches of at most what the methods can select (one model per single-objective
      method, a Pareto set of at most ``n_init + n_iter`` per multi-objective one);
    * one final answer per unit and learner, with room for a cell to be retried
      ``max_retries`` times;
    * the grid's schedule as the approved one, so the lockbox answers once per unit and
      learner of that schedule (a site's default is once in its life);
    * a lifetime answer budget of all of that together;
    * the differencing guard's ``k`` and the Thresholdout budget from ``settings``.
    """
    from raytune_fed.workflows.rfms._methods import get_methods

    methods = get_methods(settings.methods)
    n_remote_methods = sum(m.needs_remote for m in methods)
    per_cell = n_remote_methods * (settings.n_init + settings.n_iter)
    units_as_curator = max(sum(len(u.curators) for u in schedule.units), 1)  # over all sites: an upper bound
    finals_per_unit = n_learners * (1 + max_retries)
    max_models = min(sum(1 if m.kind == "single" else settings.n_init + settings.n_iter for m in methods), 256)
    query_budget = max(per_cell * n_learners * units_as_curator * (1 + max_retries), 1)
    finals = (units_as_curator + len(schedule.units)) * finals_per_unit * max_models
    header = len(json.dumps(schedule.as_list(), separators=(",", ":")))
    thresholdout = {} if settings.thresholdout_budget is None else {"budget": settings.thresholdout_budget}
    return {
        "max_units": len(schedule.units),
        "budget": {"answers": query_budget + finals},
        "schedule": {"approved": schedule.digest},
        "curator": {"inbag_fraction": settings.inbag_fraction, "mechanisms": ["exact", "thresholdout"],
                    "query_budget": query_budget, "finals_per_unit": finals_per_unit},
        "lockbox": {"finals_per_unit": finals_per_unit},
        "final": {"max_models": max_models},  # every configuration the methods select, in one batch
        "guard": {"k": settings.guard_k},
        "thresholdout": thresholdout,
        "limits": {"max_header_bytes": min(max(1 << 18, 2 * header + (1 << 12)), 1 << 24),
                   "sessions_per_unit": max(64, 4 * finals_per_unit)},  # room for retried and resumed cells
    }


@dataclass(frozen=True)
class SiteHandles:
    """What a cell needs: each site's rows for when it is the openbox (``ObjectRef`` s on
    Ray, shipped once) and one client per site (local, actor or service)."""

    data: tuple[tuple[Any, Any], ...]
    clients: tuple[Any, ...]
    deployment: str


class StartedSites:
    """Sites started for a grid: ``handles`` for the cells; ``close()`` stops local services."""

    def __init__(self, handles: SiteHandles, simulated: Any = None) -> None:
        self.handles = handles
        self._simulated = simulated

    def close(self) -> None:
        if self._simulated is not None:
            self._simulated.close()

    def __enter__(self) -> StartedSites:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_sites(plan: SitePlan, settings: RFMSSettings, schedule: Any, *, sites: str | Path = "actor",
                n_learners: int = 1, workdir: str | os.PathLike[str], max_retries: int = 2) -> StartedSites:
    """Start (or reach) every site of ``plan`` and declare ``schedule`` to each.

    ``sites`` is a deployment (see :data:`DEPLOYMENTS`; the grid plays the owners and
    writes their ledgers under ``workdir``) or a sites file listing each site of the plan
    by URL (:func:`~raytune_fed.serve.load_site_directory`): those sites run under
    their owners' own policies.  The openbox is the analyst's own data: its rows come
    from the plan in every case.
    """
    from raytune_fed import serve

    sites = check_sites_choice(sites)
    data: tuple[tuple[Any, Any], ...] = tuple(plan.site(i) for i in range(len(plan.site_names)))
    if sites != "local":  # put once: the cells' openbox rows, and a simulated site actor's own
        import ray

        data = tuple((ray.put(X), ray.put(y)) for X, y in data)
    simulated = None
    if isinstance(sites, Path):
        clients, deployment = remote_sites(plan, sites), "service"
    else:
        template = rfms_site_policy(settings, schedule, n_learners, max_retries)
        fresh = not Path(workdir).exists()
        try:
            simulated = serve.start_sites(dict(zip(plan.site_names, data)), template=template,
                                          seed=settings.seed, workdir=workdir, deployment=sites)
        except OSError as exc:  # e.g. a full disk: the sites' files cannot be written
            _abandon(None, workdir, fresh, schedule)
            raise ConfigError(f"cannot start the grid's sites: cannot write their files under {workdir}: "
                              f"{describe_os_error(exc)}") from None
        clients, deployment = tuple(simulated.clients[n] for n in plan.site_names), sites
    try:
        for client in clients:
            client.declare_schedule(schedule)
    except RaytuneFedError as exc:
        disk = _abandon(simulated, workdir, fresh, schedule) if simulated is not None else None
        if disk:  # the site's refusal says only "internal"; the grid plays its owner and can see why
            raise ConfigError(f"cannot start the grid's sites: cannot write their ledgers under {workdir}: "
                              f"{disk}") from None
        raise ConfigError(f"a site did not accept the grid's schedule: {exc}") from None
    return StartedSites(SiteHandles(data, clients, deployment), simulated)


def _abandon(simulated: Any, workdir: str | os.PathLike[str], fresh: bool, schedule: Any) -> str | None:
    """Stop simulated sites that did not start and, if this run made their folder, remove it (their
    ledgers hold no answer yet); what the system says when that folder cannot take the schedule's
    declaration (e.g. ``"no space left on device"``), or None."""
    import shutil
    import tempfile

    if simulated is not None:
        try:
            simulated.close()
        except OSError:  # a ledger that cannot be flushed: the start fails either way
            pass
    problem = None
    try:
        with tempfile.TemporaryFile(dir=workdir) as probe:
            probe.write(bytes(len(json.dumps(schedule.as_list())) + (64 << 10)))
            probe.flush()
    except OSError as exc:
        problem = describe_os_error(exc)
    if fresh:
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            Path(workdir).parent.rmdir()  # OUT/sites, when no earlier run's sites are kept there
        except OSError:
            pass
    return problem


def grid_schedule(specs: Sequence[ExperimentSpec]) -> Any:
    """The schedule a grid declares to its sites once: each role assignment of ``specs`` x its replications."""
    from raytune_fed.federation import rfms_schedule

    first = specs[0]
    assignments = list({(s.openbox, s.lockbox): s for s in specs if s.replication == 0}.values())
    n_reps = 1 + max(s.replication for s in specs)
    return rfms_schedule(first.site_names or tuple(first.site_name(i) for i in range(
        1 + max(max(s.openbox, s.lockbox, *s.curators) for s in specs))), assignments, n_reps)


def unit_of(spec: ExperimentSpec) -> Any:
    """The schedule unit of a cell (its role assignment and replication, by site name)."""
    from raytune_fed.federation import Unit

    return Unit(spec.site_name(spec.openbox), spec.site_name(spec.lockbox),
                tuple(spec.site_name(c) for c in spec.curators), spec.replication)


def run_with_sites(spec: ExperimentSpec, sites: SiteHandles,
                   experiment: Callable[[Any, Sequence[Any], Any], tuple[list[dict], dict]]) -> tuple[list[dict], dict]:
    """Run ``experiment(openbox, curator_sessions, lockbox_session)`` for ``spec`` against its sites.

    Opens one session per curator and one for the lockbox for the cell's unit (the sites
    issue the tokens and refuse a unit they were not scheduled for) and adds the curators'
    ledger query counts (answered or refused) to the experiment's info.  Sessions stay open: closing one is the
    site owner's act, and the ledger keeps them either way.
    """
    from raytune_fed.federation import OpenBox

    s = spec.settings
    seeds = spec.split_seed().spawn(max(len(spec.site_names), spec.openbox + 1, spec.lockbox + 1,
                                        *(c + 1 for c in spec.curators)))
    X, y = sites.data[spec.openbox]
    if sites.deployment != "local":
        import ray

        X, y = ray.get([X, y])
    openbox = OpenBox(X, y, name=spec.site_name(spec.openbox), inbag_fraction=s.inbag_fraction,
                      seed=seeds[spec.openbox])
    unit = unit_of(spec)
    curators = [sites.clients[c].open_session(unit, "curator") for c in spec.curators]
    lockbox = sites.clients[spec.lockbox].open_session(unit, "lockbox")
    rows, info = experiment(openbox, curators, lockbox)
    info["n_ledger_queries"] = [sum(e.kind in ("query", "refused") for e in c.ledger().entries) for c in curators]
    return rows, info
