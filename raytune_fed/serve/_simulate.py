"""Simulated sites served over the network: ``raytune_fed.federation``'s two deployments plus a third.

:func:`start_sites` takes the arguments of :func:`raytune_fed.federation.start_sites` and one
more deployment, ``"service"``: one ``raytune-fed site serve`` process per site on this
machine (127.0.0.1, a random bearer token each; TLS with a self-signed certificate when
``tls=True``), the deployment whose boundary holds.  Each logs to a rotated file in its
directory (``<ledger>.log``); its standard output is discarded and its standard error
(written to only if it fails to start) goes to ``serve.err`` there, so no process ever blocks
on a pipe nobody reads.  ``"local"`` and ``"actor"`` are the boundary's own
(:func:`raytune_fed.federation.start_sites`).
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

from raytune_fed import federation
from raytune_fed.errors import ConfigError
from raytune_fed.federation import Policy, SimulatedSites, SiteClient
from raytune_fed.federation._simulate import prepare_sites, rows_in_process
from raytune_fed.serve._certs import self_signed_certificate
from raytune_fed.serve._clients import service_client

DEPLOYMENTS = (*federation.DEPLOYMENTS, "service")


def start_sites(sites: Mapping[str, tuple[Any, Any]], *, template: Mapping[str, Any], seed: int,
                workdir: str | os.PathLike, deployment: str = "local", tls: bool = False) -> SimulatedSites:
    """Start every site of ``sites`` (name -> (X, y): arrays, or ``ObjectRef`` s of them) as ``deployment``
    (one of :data:`DEPLOYMENTS`; see the module docstring)."""
    if deployment not in DEPLOYMENTS:
        raise ConfigError(f"unknown site deployment {deployment!r}; known: {list(DEPLOYMENTS)}")
    if deployment != "service":
        return federation.start_sites(sites, template=template, seed=seed, workdir=workdir, deployment=deployment)
    root, owner, policies = prepare_sites(sites, template=template, seed=seed, workdir=workdir)
    certs = self_signed_certificate(root) if tls else None
    pending = {name: _serve(root, policies[name], *rows_in_process(X, y), owner, certs)
               for name, (X, y) in sites.items()}
    clients: dict[str, SiteClient] = {}
    processes: list[Any] = []
    try:
        for name, (proc, url_file, token) in pending.items():
            processes.append(proc)
            clients[name] = service_client(_wait_url(proc, url_file), token=token, name=name,
                                           cafile=None if certs is None else certs[0])
    except BaseException:
        SimulatedSites({}, owner, [p for p, _, _ in pending.values()]).close()
        raise
    return SimulatedSites(clients, owner, processes)


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
