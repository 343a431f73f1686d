"""Simulated sites for experiments: every site of a split started under one policy template.

A grid that simulates sites from one dataset plays every site's owner: it starts each
site with a policy (the template plus the site's name, a seed derived from the grid's
seed and a ledger under ``workdir``) in one of two deployments and hands the analyst's
side only :class:`SiteClient` objects:

* ``"local"`` - :class:`Site` objects in this process;
* ``"actor"`` - Ray actors (:func:`remote_site`), placed on ``site:<name>`` nodes; each
  site's rows travel to its node through Ray's object store (put once, or given as
  ``ObjectRef`` s), never as a file under ``workdir``, and its ledger lives on that node
  (under ``workdir``'s absolute path when the node can create it there).

A third deployment, one ``raytune-fed site serve`` process per site (the deployment whose
boundary holds), belongs to the network stack: :func:`raytune_fed.serve.start_sites` starts
all three and returns the same :class:`SimulatedSites`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError
from raytune_fed.federation._clients import SiteClient
from raytune_fed.federation._policy import Policy

DEPLOYMENTS = ("local", "actor")


class SimulatedSites:
    """Started sites: ``clients`` by name, the owner's ``owner_secret``; ``close()`` stops them (and
    ``processes``, each with ``terminate()`` and ``wait(timeout)``, e.g. ``subprocess.Popen``)."""

    def __init__(self, clients: dict[str, SiteClient], owner_secret: str, processes: list[Any]) -> None:
        self.clients = clients
        self.owner_secret = owner_secret
        self._processes = processes

    def close(self) -> None:
        for client in self.clients.values():  # in-process sites release their ledgers
            party = getattr(client.transport, "party", None)
            if party is not None:
                party.stop()
        for proc in self._processes:
            proc.terminate()
        for proc in self._processes:
            proc.wait(timeout=60)
        self._processes = []

    def __enter__(self) -> SimulatedSites:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def site_policy(template: Mapping[str, Any], name: str, seed: int, workdir: str | os.PathLike) -> Policy:
    """The policy of simulated site ``name``: ``template`` plus its name, seed and ledger file."""
    from raytune_fed.random import derive, seed_int

    if {"name", "seed", "ledger"} & set(template):
        raise ConfigError("a policy template sets neither name, seed nor ledger (each site gets its own)")
    data = {**template, "name": name, "seed": seed_int(derive(seed, "site", name)),
            "ledger": os.fspath(Path(workdir) / f"{name}.ledger.jsonl")}
    return Policy.from_mapping(data)


def start_sites(sites: Mapping[str, tuple[Any, Any]], *, template: Mapping[str, Any], seed: int,
                workdir: str | os.PathLike, deployment: str = "local") -> SimulatedSites:
    """Start every site of ``sites`` (name -> (X, y): arrays, or ``ObjectRef`` s of them) as ``deployment``;
    see the module docstring."""
    if deployment not in DEPLOYMENTS:
        raise ConfigError(f"unknown site deployment {deployment!r}; known: {list(DEPLOYMENTS)} (served sites: "
                          f"raytune_fed.serve.start_sites)")
    workdir, owner, policies = prepare_sites(sites, template=template, seed=seed, workdir=workdir)
    clients: dict[str, SiteClient] = {}
    if deployment == "local":
        from raytune_fed.federation._site import Site

        for name, (X, y) in sites.items():
            X, y = rows_in_process(X, y)
            clients[name] = SiteClient(Site(X, y, policies[name], owner_secret=owner), name=name)
    else:
        from raytune_fed.federation._actors import remote_site

        for name, (X, y) in sites.items():
            clients[name] = SiteClient(remote_site(X, y, policies[name], owner_secret=owner), name=name)
    return SimulatedSites(clients, owner, [])


def prepare_sites(sites: Mapping[str, Any], *, template: Mapping[str, Any], seed: int,
                  workdir: str | os.PathLike) -> tuple[Path, str, dict[str, Policy]]:
    """The absolute ``workdir`` (created), a fresh owner secret and each site's policy (:func:`site_policy`)."""
    workdir = Path(workdir).absolute()  # the same folder for every process this starts, whatever its own
    workdir.mkdir(parents=True, exist_ok=True)
    owner = secrets.token_urlsafe(24)
    return workdir, owner, {name: site_policy(template, name, seed, workdir) for name in sites}


def rows_in_process(X: Any, y: Any) -> tuple[Any, Any]:
    """A site's rows as arrays in this process (``ObjectRef`` s resolved)."""
    if any(type(a).__name__ == "ObjectRef" for a in (X, y)):
        import ray

        X, y = (ray.get(a) if isinstance(a, ray.ObjectRef) else a for a in (X, y))
    return X, y
