"""Site classes as Ray actors, placed by custom resources ``site:<name>``."""

from __future__ import annotations

from typing import Any

from raytune_fed.runtime import site_placement


def remote_site(cls: type, name: str, *args: Any, **kwargs: Any) -> Any:
    """Start ``cls(*args, name=name, **kwargs)`` as a Ray actor for site ``name``.

    Works for every site class (:class:`SiteHost`, :class:`OpenBox`, :class:`Curator`,
    :class:`Lockbox`); the same classes run in-process in tests.

    The actor reserves no CPU (site queries are short predictions; the experiment units
    own the cores) and goes to a node declaring ``site:<name>`` when the cluster has one,
    so a site's rows can stay on its own machine.  Array arguments may be ``ObjectRef``s
    from ``ray.put`` so data is shipped once.
    """
    import ray

    options = {"num_cpus": 0, "name": None, **site_placement(name)}
    return ray.remote(cls).options(**options).remote(*args, name=name, **kwargs)
