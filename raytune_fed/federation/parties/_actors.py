"""Parties as Ray actors, placed by the custom resource ``party:<name>``."""

from __future__ import annotations

from typing import Any

from raytune_fed.runtime import party_placement


def remote_party(cls: type, name: str, *args: Any, num_cpus: float = 0, max_concurrency: int = 1,
                 max_restarts: int = 0, **kwargs: Any) -> Any:
    """Start ``cls(*args, name=name, **kwargs)`` (:class:`ActiveParty` or :class:`PassiveParty`) as an actor.

    A :class:`PassiveParty` (any :class:`~raytune_fed.federation.Party`) runs inside a
    :class:`~raytune_fed.federation.PartyActor` whose only method is ``call`` (wire bytes
    in and out; reach it with :class:`PassiveClient`).  The :class:`ActiveParty` is the
    analyst's own party and runs as a plain actor (``train``, ``info``, ``close_session``;
    none returns its key, labels or models).  The actor goes to a node declaring
    ``party:<name>`` when the cluster has one, so a party's rows stay on its own machine.
    Large arrays may be passed as ``ObjectRef``s from ``ray.put``.  ``max_concurrency > 1``
    lets one party serve several training sessions at once; with ``max_restarts`` a
    passive party with a ``ledger`` file comes back refusing the tokens it issued before.
    """
    import ray

    from raytune_fed.federation._actors import PartyActor
    from raytune_fed.federation._party import Party

    options = {"num_cpus": num_cpus, "max_concurrency": max_concurrency, "max_restarts": max_restarts,
               "max_task_retries": 0, **party_placement(name)}
    if isinstance(cls, type) and issubclass(cls, Party):
        return ray.remote(PartyActor).options(**options).remote(cls, *args, name=name, **kwargs)
    return ray.remote(cls).options(**options).remote(*args, name=name, **kwargs)
