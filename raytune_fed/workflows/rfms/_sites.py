"""Where RFMS meets its data sites.

* :func:`plan_sites` - the driver loads the dataset, splits it into sites and checks, before
  anything starts, that every site can play every role (an in-bag/out-bag split, the
  openbox's cross-validation, at least one feature that is not constant);
* :func:`start_sites` - one long-lived :class:`~raytune_fed.federation.SiteHost` actor per
  site, its rows shipped to Ray once;
* :func:`run_with_sites` - the one place a cell talks to its sites: it opens the cell's
  curator and lockbox sessions, hands the experiment its openbox and clients, reads the
  curators' ledgers and closes the sessions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from raytune_fed.errors import ConfigError, RaytuneFedError
from raytune_fed.workflows.rfms._spec import ExperimentSpec, RFMSSettings


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
                        seed=settings.seed)
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


@dataclass(frozen=True)
class SiteHandles:
    """What a cell needs to reach the sites on Ray: each site's rows (shipped once) and its actor."""

    data: tuple[tuple[Any, Any], ...]
    hosts: tuple[Any, ...]


def start_sites(plan: SitePlan) -> SiteHandles:
    """One :class:`SiteHost` actor per site (placed on its ``site:<name>`` node when there is one)."""
    import ray

    from raytune_fed.federation.legacy import SiteHost, remote_site

    data = tuple(tuple(ray.put(a) for a in plan.site(i)) for i in range(len(plan.site_names)))
    hosts = tuple(remote_site(SiteHost, name, *data[i]) for i, name in enumerate(plan.site_names))
    return SiteHandles(data, hosts)


def run_with_sites(spec: ExperimentSpec, sites: SiteHandles,
                   experiment: Callable[[Any, Sequence[Any], Any], tuple[list[dict], dict]]) -> tuple[list[dict], dict]:
    """Run ``experiment(openbox, curators, lockbox)`` for ``spec`` against its sites.

    Opens one session per curator and one for the lockbox (a fresh id per attempt, so a
    cell whose worker died can be retried), adds the curators' ledger query counts to the
    experiment's info and closes the sessions.
    """
    import ray

    from raytune_fed.federation.legacy import OpenBox, SiteClient

    s = spec.settings
    seeds = spec.split_seed().spawn(max(len(spec.site_names), spec.openbox + 1, spec.lockbox + 1,
                                        *(c + 1 for c in spec.curators)))
    X, y = ray.get(list(sites.data[spec.openbox]))
    openbox = OpenBox(X, y, name=spec.site_name(spec.openbox), inbag_fraction=s.inbag_fraction,
                      seed=seeds[spec.openbox])
    session = f"rfms-{spec.key}-{uuid.uuid4().hex[:12]}"
    curator_hosts = [sites.hosts[c] for c in spec.curators]
    lockbox_host = sites.hosts[spec.lockbox]
    opened = [h.open_session.remote(session, "curator", seed=seeds[c], inbag_fraction=s.inbag_fraction)
              for h, c in zip(curator_hosts, spec.curators)]
    opened.append(lockbox_host.open_session.remote(session, "lockbox"))
    ray.get(opened)
    try:
        rows, info = experiment(openbox, [SiteClient(h, session) for h in curator_hosts],
                                SiteClient(lockbox_host, session))
        ledgers = ray.get([h.ledger.remote(session) for h in curator_hosts])
        info["n_ledger_queries"] = [sum(e.kind == "query" for e in led.entries) for led in ledgers]
    finally:  # best effort: a dead site must not hide the error that ended the experiment
        closing = [h.close_session.remote(session) for h in [*curator_hosts, lockbox_host]]
        ray.wait(closing, num_returns=len(closing), timeout=60)
    return rows, info
