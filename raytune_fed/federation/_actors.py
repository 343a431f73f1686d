"""A :class:`~raytune_fed.federation.Site` (or any other party) as a Ray actor whose only method is ``call``.

The actor holds the site (rows, policy, ledger) and exposes exactly one method: wire
bytes in, wire bytes out, the same entry point every transport uses.  Nothing returns the
site object, its rows or its labels.  What this does not protect against: inside one Ray
cluster, whoever holds the actor handle can run code in the actor process (Ray unpickles
call arguments before any method runs, and every actor has ``__ray_call__``), so the
actor is a boundary against honest mistakes and protocol-level attacks only.  A site
that must hold against a malicious analyst runs as a network service on its own machine
(``raytune-fed site serve``).

With ``max_restarts`` Ray restarts a dead actor by running its constructor again: the
site reloads its ledger from the policy's ``ledger`` file, so its schedule, sessions,
budget use, sealed answers, Thresholdout stream and guard come back as they were.
"""

from __future__ import annotations

from typing import Any

from raytune_fed.federation._policy import Policy
from raytune_fed.runtime import site_placement


class SiteActor:
    """Ray actor class: ``SiteActor(X, y, policy, owner_secret=None)`` with one method, ``call``."""

    def __init__(self, X: Any, y: Any, policy: Policy, owner_secret: str | None = None) -> None:
        from raytune_fed.federation._site import Site

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


def remote_site(X: Any, y: Any, policy: Policy, *, owner_secret: str | None = None, max_restarts: int = 3) -> Any:
    """Start a :class:`SiteActor` for ``policy.name`` and return its handle.

    The actor reserves no CPU (queries are short predictions; experiment units own the
    cores) and goes to a node declaring ``site:<name>`` when the cluster has one, so the
    rows stay on the site's machine.  ``X`` and ``y`` may be ``ObjectRef``s from
    ``ray.put`` so data is shipped once; arrays are put in the object store here.  The
    returned handle keeps references to them, because Ray needs the constructor's
    arguments again to restart the actor.  Give the policy a ``ledger`` file for restarts
    to keep the site's state.
    """
    import ray

    refs = tuple(a if isinstance(a, ray.ObjectRef) else ray.put(a) for a in (X, y))
    options = {"num_cpus": 0, "max_restarts": max_restarts, "max_task_retries": 0, **site_placement(policy.name)}
    handle = ray.remote(SiteActor).options(**options).remote(*refs, policy, owner_secret)
    handle._site_data = refs  # kept alive with the handle: a restart runs the constructor on them again
    return handle
