"""Parties as Ray actors, placed by the custom resource ``party:<name>``."""

from __future__ import annotations

from typing import Any

from raytune_fed.runtime import party_placement


def remote_party(cls: type, name: str, *args: Any, num_cpus: float = 0, max_concurrency: int = 1,
                 **kwargs: Any) -> Any:
    """Start ``cls(*args, name=name, **kwargs)`` (:class:`ActiveParty` or :class:`PassiveParty`) as an actor.

    The actor goes to a node declaring ``party:<name>`` when the cluster has one, so a
    party's rows stay on its own machine.  Large arrays may be passed as ``ObjectRef``s
    from ``ray.put``.  ``max_concurrency > 1`` lets one passive party serve several
    training sessions at once.
    """
    import ray

    options = {"num_cpus": num_cpus, "max_concurrency": max_concurrency, **party_placement(name)}
    return ray.remote(cls).options(**options).remote(*args, name=name, **kwargs)
