"""A :class:`~raytune_fed.federation.Site` (or any other party) as a Ray actor whose only method is ``call``.

The actor holds the site (rows, policy, ledger) and exposes exactly one method: wire
bytes in, wire bytes out, the same entry point every transport uses.  Nothing returns the
site object, its rows or its labels, and the handle :func:`remote_site` returns (the one
cells get) carries no reference to the rows.  A simulated site's rows travel with the site,
never as a path on the driver's disk: the driver puts them into Ray's object store once and
passes the actor their ``ObjectRef`` s, which it resolves on its own node, wherever that is
(the driver keeps the objects while it keeps the handle, so a restarted actor finds them
again); a site whose rows already are on its node is given their path there instead.
What this does not protect against: inside one Ray cluster, whoever holds the actor handle
can run code in the actor process (Ray unpickles call arguments before any method runs, and
every actor has ``__ray_call__``), and the object store holds the simulated rows, so the
actor is a boundary against honest mistakes and protocol-level attacks only.  A site that
must hold against a malicious analyst runs as a network service on its own machine
(``raytune-fed site serve``, :mod:`raytune_fed.serve`); :func:`relay_site` gives cells an actor
that holds no data and forwards ``call`` through a :class:`~raytune_fed.federation.Transport` to
such a service.

The ledger is the site's, so it lives on the site's node: at the policy's ``ledger`` path
(made absolute on the driver) when that node can create it there (one machine, a shared
filesystem), else in a folder of the node's own under its Ray session directory, named
after that path (``raytune_fed_sites/<digest>/``), which a restart on the node finds again.
With ``max_restarts`` Ray restarts a dead actor by running its constructor again: the
site resolves its rows again and reloads its ledger, so its schedule, sessions, budget
use, sealed answers, recorded answers and guard come back as they were.  Calls are retried
across the restart (``max_task_retries=-1``): the clients' request numbers make that safe
(a query charged before the crash is answered from the ledger, not charged again).

A site actor is threaded (``max_concurrency``, :data:`SITE_THREADS` by default): up to that
many calls run at once, each on its own thread, and their models are scored in parallel
while the budget, the guard and the ledger keep one order (see
:class:`~raytune_fed.federation.Party`).  The actor runs its BLAS and OpenMP pools on one
thread, so each request's scoring stays on its own thread (its CPU limit counts all of it)
and gives the same answer however many run beside it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.federation._policy import Policy
from raytune_fed.federation._transports import Transport
from raytune_fed.runtime import site_placement

SITE_THREADS = 8
"""Calls a site actor answers at once by default (threads idle when fewer come; the cores of the site's
node bound the speed-up: ``experiments/measured/bench_site_throughput.json``)."""


class SiteActor:
    """Ray actor class: ``SiteActor(rows, policy, owner_secret=None)`` with one method, ``call``.

    ``rows`` is ``[X_ref, y_ref]`` (``ObjectRef`` s the actor resolves on its node) or the path of
    an ``.npz`` with arrays ``X`` and ``y`` on the actor's node.
    """

    def __init__(self, rows: Any, policy: Policy, owner_secret: str | None = None) -> None:
        from threadpoolctl import threadpool_limits

        from raytune_fed.federation._site import Site

        self._one_thread = threadpool_limits(limits=1)  # see the module docstring
        X, y = _rows_here(rows)
        self._site = Site(X, y, _ledger_here(policy), owner_secret=owner_secret)

    def call(self, message: bytes) -> bytes:
        """Answer one wire message (see :meth:`raytune_fed.federation.Party.call`)."""
        return self._site.call(message)


def _rows_here(rows: Any) -> tuple[Any, Any]:
    """A site actor's rows on its node: its ``ObjectRef`` s resolved, or its own ``.npz`` file read."""
    if isinstance(rows, (str, os.PathLike)):
        from raytune_fed.data._files import read_npz

        X, y = read_npz(rows, ("X", "y"))
        return X, y
    import ray

    X, y = ray.get(list(rows))
    return X, y


def _ledger_here(policy: Policy) -> Policy:
    """``policy`` with a ledger this node keeps: its own path when this node can create it there, else a
    folder of this node's own named after that path (see the module docstring)."""
    if policy.ledger is None:  # the actor's caller refuses a policy without one
        raise ConfigError(f"site {policy.name!r}: a site actor needs a policy with a ledger")
    path = Path(policy.ledger)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if os.access(path.parent, os.W_OK | os.X_OK):
            return policy
    except OSError:  # another machine's folder: read-only, not ours, or not there
        pass
    here = Path(_node_folder()) / "raytune_fed_sites" / hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    here.mkdir(mode=0o700, parents=True, exist_ok=True)
    return policy.with_ledger(here / path.name)


def _node_folder() -> str:
    """This node's Ray session directory (the system's temporary folder outside a Ray worker)."""
    from raytune_fed._ray_internals import current_node

    node = current_node()
    return node.get_session_dir_path() if node is not None else tempfile.gettempdir()


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
    """Ray actor class holding no data: ``SiteRelay(transport)`` forwards each ``call`` through
    ``transport`` (a :class:`~raytune_fed.federation.Transport`, e.g. the HTTP one to a site served by
    ``raytune-fed site serve``, :class:`raytune_fed.serve.HttpTransport`, which carries the analyst's token)."""

    def __init__(self, transport: Transport) -> None:
        if not isinstance(transport, Transport):
            raise ConfigError(f"a SiteRelay forwards through a transport (send, submit, collect), "
                              f"got {type(transport).__name__}")
        self._transport = transport

    def call(self, message: bytes) -> bytes:
        """Forward one wire message; the party's reply, unchanged."""
        return self._transport.send(message)


def remote_site(X: Any, y: Any, policy: Policy, *, owner_secret: str | None = None, max_restarts: int = 3,
                max_concurrency: int = SITE_THREADS) -> Any:
    """Start a :class:`SiteActor` for ``policy.name`` and return its handle.

    ``X`` and ``y`` are the site's rows: arrays (put into Ray's object store here, once) or
    ``ObjectRef`` s already there; the actor resolves them on its node, and the driver keeps
    them for as long as it keeps the returned handle (a restarted actor needs them), which
    carries no reference to them.  Or ``X`` is the path of an ``.npz`` with arrays ``X`` and
    ``y`` already on the site's node and ``y`` is ``None``.  The actor reserves no CPU
    (queries are short predictions; experiment units own the cores) and goes to a node
    declaring ``site:<name>`` when the cluster has one.  The policy needs a ``ledger`` (a
    restart reloads the site's state from it), which lives on the site's node (see the
    module docstring).  ``max_concurrency`` calls are answered at once (1: one at a time).
    """
    import ray

    from raytune_fed._checks import check_int

    check_int(f"site {policy.name!r}: max_concurrency", max_concurrency, 1, 1024)
    if policy.ledger is None:
        raise ConfigError(f"site {policy.name!r}: a site actor needs a policy with a ledger (a restarted actor "
                          f"without one would start with a fresh budget)")
    policy = policy.with_ledger(Path(policy.ledger).absolute())  # a relative path means this process's folder
    if y is None:
        rows: Any = os.fspath(X)
    else:
        rows = [a if isinstance(a, ray.ObjectRef) else ray.put(np.asarray(a)) for a in (X, y)]
    options = {"num_cpus": 0, "max_restarts": max_restarts, "max_task_retries": -1 if max_restarts else 0,
               "max_concurrency": max_concurrency, **site_placement(policy.name)}
    handle = ray.remote(SiteActor).options(**options).remote(rows, policy, owner_secret)
    if y is not None:
        weakref.finalize(handle, _release, rows)  # the rows' objects live as long as this handle
    return handle


def _release(rows: list) -> None:
    """Drops the driver's last references to a site's rows (called once its handle is gone)."""
    rows.clear()


def relay_site(transport: Transport) -> Any:
    """A :class:`SiteRelay` actor forwarding through ``transport`` (pickled into the actor): a handle
    for cells that holds no data, reaching the site only through its transport, e.g.
    ``relay_site(HttpTransport(url, token, cafile=...))`` for a served site (see the README's trust model)."""
    import ray

    if not isinstance(transport, Transport):
        raise ConfigError(f"relay_site forwards through a transport (send, submit, collect), "
                          f"got {type(transport).__name__}")
    options = {"num_cpus": 0, "max_restarts": 3, "max_task_retries": -1}
    return ray.remote(SiteRelay).options(**options).remote(transport)
