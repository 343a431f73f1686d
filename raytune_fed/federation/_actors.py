"""A :class:`~raytune_fed.federation.Site` (or any other party) as a Ray actor whose only method is ``call``.

The actor holds the site (rows, policy, ledger) and exposes exactly one method: wire
bytes in, wire bytes out, the same entry point every transport uses.  Nothing returns the
site object, its rows or its labels, and the handle :func:`remote_site` returns (the one
cells get) carries no reference to the rows: the actor reads them from the site's own
``.npz`` file on its node, so Ray's object store never holds them.  What this does not
protect against: inside one Ray cluster, whoever holds the actor handle can run code in
the actor process (Ray unpickles call arguments before any method runs, and every actor
has ``__ray_call__``), so the actor is a boundary against honest mistakes and
protocol-level attacks only.  A site that must hold against a malicious analyst runs as
a network service on its own machine (``raytune-fed site serve``); :func:`relay_site`
gives cells an actor that holds no data and forwards ``call`` to such a service.

With ``max_restarts`` Ray restarts a dead actor by running its constructor again: the
site reloads its rows from its file and its ledger from the policy's ``ledger`` file, so
its schedule, sessions, budget use, sealed answers, recorded answers and guard come back
as they were.  Calls are retried across the restart (``max_task_retries=-1``): the
clients' request numbers make that safe (a query charged before the crash is answered
from the ledger, not charged again).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.federation._policy import Policy
from raytune_fed.runtime import site_placement


class SiteActor:
    """Ray actor class: ``SiteActor(rows_file, policy, owner_secret=None)`` with one method, ``call``.

    ``rows_file`` is an ``.npz`` with arrays ``X`` and ``y`` on the actor's node.
    """

    def __init__(self, rows_file: str, policy: Policy, owner_secret: str | None = None) -> None:
        from raytune_fed.data._files import read_npz
        from raytune_fed.federation._site import Site

        X, y = read_npz(rows_file, ("X", "y"))
        self._site = Site(X, y, policy, owner_secret=owner_secret)

    def call(self, message: bytes) -> bytes:
        """Answer one wire message (see :meth:`raytune_fed.federation.Party.call`)."""
        return self._site.call(message)


class PartyActor:
    """Ray actor class for any other :class:`~raytune_fed.federation.Party` type:
    ``PartyActor(party_cls, *args, **kwargs)`` builds ``party_cls(*args, **kwargs)``; its one method is ``call``."""

    def __init__(self, party_cls: type, *args: Any, **kwargs: Any) -> None:
        from raytune_fed.federation._party import Party

        if not (isinstance(party_cls, type) and issubclass(party_cls, Party)):
            raise TypeError(f"PartyActor runs a Party subclass, got {party_cls!r}")
        self._party = party_cls(*args, **kwargs)

    def call(self, message: bytes) -> bytes:
        """Answer one wire message (see :meth:`raytune_fed.federation.Party.call`)."""
        return self._party.call(message)


class SiteRelay:
    """Ray actor class holding no data: ``SiteRelay(url, token, cafile=None)`` forwards each
    ``call`` to a site served by ``raytune-fed site serve``, with the analyst's bearer token."""

    def __init__(self, url: str, token: str, cafile: str | None = None) -> None:
        from raytune_fed.federation._transports import HttpTransport

        self._http = HttpTransport(url, token, cafile=cafile)

    def call(self, message: bytes) -> bytes:
        """Forward one wire message to the service; its reply, unchanged."""
        return self._http._post(message)


def rows_file(X: Any, y: Any, policy: Policy) -> Path:
    """Write a simulated site's rows beside its ledger (``<ledger>.rows.npz``, owner-only) and return the path."""
    import ray

    if policy.ledger is None:
        raise ConfigError(f"site {policy.name!r}: a site actor needs a policy with a ledger (a restarted actor "
                          f"without one would start with a fresh budget), and keeps its rows beside it")
    X, y = (ray.get(a) if isinstance(a, ray.ObjectRef) else a for a in (X, y))
    path = Path(policy.ledger + ".rows.npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        np.savez(f, X=np.asarray(X, dtype=float), y=np.asarray(y))
    return path


def remote_site(X: Any, y: Any, policy: Policy, *, owner_secret: str | None = None, max_restarts: int = 3) -> Any:
    """Start a :class:`SiteActor` for ``policy.name`` and return its handle.

    ``X`` and ``y`` are the site's rows (arrays, or ``ObjectRef`` s from ``ray.put``):
    they are written to ``<ledger>.rows.npz`` and the actor reads that file, so neither
    the handle nor Ray's object store keeps them; or ``X`` is the path of an ``.npz`` with
    arrays ``X`` and ``y`` already on the site's node and ``y`` is ``None``.  The actor
    reserves no CPU (queries are short predictions; experiment units own the cores) and
    goes to a node declaring ``site:<name>`` when the cluster has one.  The policy needs
    a ``ledger``: a restart reloads the site's state from it.
    """
    import ray

    if y is None:
        path = Path(X)
    else:
        path = rows_file(X, y, policy)
    if policy.ledger is None:
        raise ConfigError(f"site {policy.name!r}: a site actor needs a policy with a ledger")
    options = {"num_cpus": 0, "max_restarts": max_restarts, "max_task_retries": -1 if max_restarts else 0,
               **site_placement(policy.name)}
    return ray.remote(SiteActor).options(**options).remote(os.fspath(path), policy, owner_secret)


def relay_site(url: str, token: str, *, cafile: str | os.PathLike | None = None) -> Any:
    """A :class:`SiteRelay` actor for the site served at ``url``: a handle for cells that holds
    no data, reaching the site only through its service (see the README's trust model)."""
    import ray

    options = {"num_cpus": 0, "max_restarts": 3, "max_task_retries": -1}
    return ray.remote(SiteRelay).options(**options).remote(url, token, None if cafile is None else os.fspath(cafile))
