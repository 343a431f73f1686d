"""The one place that connects to Ray.

``connect()`` starts a single-node session on this machine by default (all its CPUs, no
dashboard) or joins a running cluster when given ``address`` (``"auto"`` or
``ray://host:port``) or when ``RAY_ADDRESS`` is set.  Ray 2.60 rejects the old
``local_mode=True``: "laptop local mode" is a normal single-node session.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from raytune_fed.errors import ConfigError


def connect(address: str | None = None, num_cpus: int | None = None, *, resources: dict[str, float] | None = None,
            quiet: bool = True) -> Any:
    """Return the ``ray`` module with a session up; reuse one that is already running.

    ``resources`` declares custom resources of a local session, e.g. ``{"site:site0": 1}``
    so that :func:`site_placement` pins that site's actor here.
    """
    import ray

    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING if quiet else logging.INFO,
        "log_to_driver": True,
        # the workers import the package from the driver's environment
        # one BLAS/OpenMP thread per task: an experiment unit holds one CPU
        "runtime_env": {"env_vars": {"PYTHONWARNINGS": "ignore::DeprecationWarning", "OMP_NUM_THREADS": "1",
                                     "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}},
    }
    if address:
        if num_cpus is not None or resources:
            raise ConfigError(f"num_cpus and resources apply to a local session only, not to address={address!r}")
        ray.init(address=address, **kwargs)
    else:
        n = num_cpus if num_cpus is not None else (os.cpu_count() or 1)
        if n < 1:
            raise ConfigError(f"num_cpus must be >= 1, got {n!r}")
        ray.init(num_cpus=n, resources=dict(resources or {}), **kwargs)
    return ray


def placement(kind: str, name: str) -> dict[str, Any]:
    """Actor options that pin an actor to nodes offering the custom resource ``<kind>:<name>``.

    On a cluster whose nodes declare ``<kind>:<name>`` (``site:hospital1``,
    ``party:bank``) the actor (and so its data) lives there; where no node declares it,
    the actor may run anywhere (a laptop or an unlabelled cluster).  Needs a connected
    session.
    """
    import ray

    if not isinstance(kind, str) or not kind or ":" in kind:
        raise ConfigError(f"a placement kind must be a non-empty name without ':', got {kind!r}")
    key = f"{kind}:{name}"
    if ray.cluster_resources().get(key, 0) > 0:
        return {"resources": {key: 0.001}}
    return {}


def site_placement(site_name: str) -> dict[str, Any]:
    """Actor options that pin a site's actor to nodes offering ``site:<name>`` (see :func:`placement`)."""
    return placement("site", site_name)


def party_placement(party_name: str) -> dict[str, Any]:
    """Actor options that pin a vertical-learning party's actor to nodes offering ``party:<name>``."""
    return placement("party", party_name)
