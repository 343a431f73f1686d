"""Simulated sites for experiments: every site of a split started under one policy template.

A grid that simulates sites from one dataset plays every site's owner: it starts each
site with a policy (the template plus the site's name, a seed derived from the grid's
seed and a ledger under ``workdir``) in one of three deployments and hands the analyst's
side only :class:`SiteClient` objects:

* ``"local"`` - :class:`Site` objects in this process;
* ``"actor"`` - Ray actors (:func:`remote_site`), placed on ``site:<name>`` nodes; each
  site's rows travel to its node through Ray's object store (put once, or given as
  ``ObjectRef`` s), never as a file under ``workdir``, and its ledger lives on that node
  (under ``workdir``'s absolute path when the node can create it there);
* ``"service"`` - one ``raytune-fed site serve`` process per site on this machine
  (127.0.0.1, a random bearer token each; TLS with a self-signed certificate when
  ``tls=True``), the deployment whose boundary holds.  Each logs to a rotated file in
  its directory (``<ledger>.log``); its standard output is discarded and its standard
  error (written to only if it fails to start) goes to ``serve.err`` there, so no
  process ever blocks on a pipe nobody reads.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.federation._certs import self_signed_certificate
from raytune_fed.federation._clients import SiteClient
from raytune_fed.federation._policy import Policy

DEPLOYMENTS = ("local", "actor", "service")


class SimulatedSites:
    """Started sites: ``clients`` by name, the owner's ``owner_secret``; ``close()`` stops them."""

    def __init__(self, clients: dict[str, SiteClient], owner_secret: str, processes: list[Any]) -> None:
        self.clients = clients
        self.owner_secret = owner_secret
        self._processes = processes

    def close(self) -> None:
        for client in self.clients.values():  # in-process sites release their ledgers
            party = getattr(client._transport, "party", None)
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
                workdir: str | os.PathLike, deployment: str = "local", tls: bool = False) -> SimulatedSites:
    """Start every site of ``sites`` (name -> (X, y): arrays, or ``ObjectRef`` s of them) as ``deployment``;
    see the module docstring."""
    if deployment not in DEPLOYMENTS:
        raise ConfigError(f"unknown site deployment {deployment!r}; known: {list(DEPLOYMENTS)}")
    workdir = Path(workdir).absolute()  # the same folder for every process this starts, whatever its own
    workdir.mkdir(parents=True, exist_ok=True)
    owner = secrets.token_urlsafe(24)
    policies = {name: site_policy(template, name, seed, workdir) for name in sites}
    clients: dict[str, SiteClient] = {}
    processes: list[Any] = []
    if deployment != "actor":
        sites = {name: _arrays(X, y) for name, (X, y) in sites.items()}
    if deployment == "local":
        from raytune_fed.federation._site import Site

        for name, (X, y) in sites.items():
            clients[name] = SiteClient(Site(X, y, policies[name], owner_secret=owner), name=name)
    elif deployment == "actor":
        from raytune_fed.federation._actors import remote_site

        for name, (X, y) in sites.items():
            clients[name] = SiteClient(remote_site(X, y, policies[name], owner_secret=owner), name=name)
    else:
        certs = self_signed_certificate(workdir) if tls else None
        pending = {name: _serve(workdir, policies[name], X, y, owner, certs) for name, (X, y) in sites.items()}
        try:
            for name, (proc, url_file, token) in pending.items():
                processes.append(proc)
                clients[name] = SiteClient.service(_wait_url(proc, url_file), token=token, name=name,
                                                   cafile=None if certs is None else certs[0])
        except BaseException:
            SimulatedSites({}, owner, [p for p, _, _ in pending.values()]).close()
            raise
    return SimulatedSites(clients, owner, processes)


def _arrays(X: Any, y: Any) -> tuple[Any, Any]:
    """A site's rows as arrays in this process (``ObjectRef`` s resolved)."""
    if any(type(a).__name__ == "ObjectRef" for a in (X, y)):
        import ray

        X, y = (ray.get(a) if isinstance(a, ray.ObjectRef) else a for a in (X, y))
    return X, y


def _serve(workdir: Path, policy: Policy, X: Any, y: Any, owner: str,
           certs: tuple[Path, Path] | None) -> tuple[Any, Path, str]:
    base = workdir / policy.name
    base.mkdir(exist_ok=True)
    (base / "policy.json").write_text(json.dumps(policy.as_mapping()))
    np.savez(base / "rows.npz", X=np.asarray(X, dtype=float), y=np.asarray(y))
    token = secrets.token_urlsafe(24)
    for fname, secret in (("token", token), ("owner", owner)):
        path = base / fname
        path.write_text(secret + "\n")
        path.chmod(0o600)
    url_file = base / "url"
    url_file.unlink(missing_ok=True)
    tls = [] if certs is None else ["--cert", str(certs[0]), "--key", str(certs[1])]
    with open(base / "serve.err", "wb") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen([sys.executable, "-m", "raytune_fed.cli", "site", "serve", "--policy",
                                 str(base / "policy.json"), "--data", str(base / "rows.npz"), "--token-file",
                                 str(base / "token"), "--owner-token-file", str(base / "owner"), "--port", "0",
                                 "--url-file", str(url_file), *tls], stdout=subprocess.DEVNULL, stderr=err)
    return proc, url_file, token


def _wait_url(proc: Any, url_file: Path, limit: float = 600.0) -> str:
    give_up = time.monotonic() + limit
    while not (url_file.exists() and url_file.read_text().strip()):
        if proc.poll() is not None:
            said = (url_file.parent / "serve.err").read_text(errors="replace").strip()[-300:]
            raise ConfigError(f"a site service exited at start: {said}")
        if time.monotonic() > give_up:
            raise ConfigError(f"a site service did not start within {limit:.0f} s")
        time.sleep(0.05)
    return url_file.read_text().strip()
