"""The one place that connects to Ray.

``connect()`` starts a single-node session on this machine by default (all its CPUs, no
dashboard) or joins a running cluster when given ``address`` (``"auto"``, ``host:port``
or ``ray://host:port``) or when ``RAY_ADDRESS`` is set.  Ray 2.60 rejects the old
``local_mode=True``: "laptop local mode" is a normal single-node session.

An address is checked before Ray is touched, and a cluster that cannot be reached is one
:class:`~raytune_fed.errors.ConfigError`, not a traceback.

Quiet by default (``quiet=True``): the workers' log lines are not forwarded to this
process (``log_to_driver=False``; they stay in Ray's session logs), Ray's Python loggers
show errors only (the command line also keeps Ray's C++ log lines off its stderr:
:mod:`raytune_fed.cli._stderr`), and Tune prints no tables of its own
(``RAY_AIR_NEW_OUTPUT=0`` unless set, so ``RunConfig(verbose=0)`` is silent).  What
starts is said once, as an INFO record of the ``raytune_fed`` logger (the command line
prints it): a local session and its CPUs, or the cluster joined, and where the dashboard
is.  ``ray.init`` installs its own
SIGTERM handler (``sys.exit``); ``connect`` puts back a handler the caller had installed,
so a command line can turn SIGTERM into a clean stop.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from typing import Any, Mapping

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError

logger = logging.getLogger("raytune_fed")

SITE_SLIVER = 0.001
"""How much of ``site:<name>`` a site's actor or cell asks for: any whole unit hosts them all."""

_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.\-]+:[0-9]{1,5}|ray://[A-Za-z0-9_.\-]+)$")


def check_address(address: str | None) -> str | None:
    """``None`` (a local session, or ``$RAY_ADDRESS``), ``"auto"``, ``host:port`` or ``ray://host[:port]``."""
    if address is None:
        return None
    if not isinstance(address, str) or not _ADDRESS.match(address.strip()):
        raise ConfigError(f"Ray address must be 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    return address.strip()


def connect(address: str | None = None, num_cpus: int | None = None, *, resources: dict[str, float] | None = None,
            quiet: bool = True) -> Any:
    """Return the ``ray`` module with a session up; reuse one that is already running.

    Without ``address`` (and without ``$RAY_ADDRESS``) a new local session starts, even if a
    cluster started with ``ray start`` runs on this machine (``address="auto"`` joins that
    one).  ``resources`` declares custom resources of a local session, e.g.
    ``{"site:site0": 1}`` so that :func:`site_placement` pins that site's actor here.
    """
    address = check_address(address)
    env_address = os.environ.get("RAY_ADDRESS") or None
    if address is None and env_address is not None:
        try:
            address = check_address(env_address)
        except ConfigError as exc:
            raise ConfigError(f"$RAY_ADDRESS: {exc}") from None
    if num_cpus is not None:
        check_int("num_cpus", num_cpus, 1)
    if address and (num_cpus is not None or resources):
        raise ConfigError(f"num_cpus and resources apply to a local session only, not to address={address!r}")
    import ray

    if ray.is_initialized():
        return ray
    if quiet:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")          # Tune's own tables off with verbose=0
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.ERROR if quiet else logging.INFO,
        "log_to_driver": not quiet,
        # the workers import the package from the driver's environment
        # one BLAS/OpenMP thread per task: a cell holds one CPU
        "runtime_env": {"env_vars": {"PYTHONWARNINGS": "ignore::DeprecationWarning", "OMP_NUM_THREADS": "1",
                                     "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}},
    }
    if address:
        kwargs["address"] = address
    else:  # a new session of our own, even when a `ray start` cluster runs on this machine
        kwargs.update(address="local", num_cpus=num_cpus if num_cpus is not None else (os.cpu_count() or 1),
                      resources=dict(resources or {}))
    on_term = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    if address:
        logger.info("Ray: joining the cluster at %s", address)
    else:
        logger.info("Ray: starting a local session with %d CPU%s", kwargs["num_cpus"],
                    "" if kwargs["num_cpus"] == 1 else "s")
    try:
        context = ray.init(**kwargs)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray session"
        lines = str(exc).strip().splitlines()
        raise ConfigError(f"cannot start or reach {where}: {type(exc).__name__}: {lines[0] if lines else ''}") \
            from None
    if callable(on_term):
        signal.signal(signal.SIGTERM, on_term)
    dashboard = getattr(context, "dashboard_url", None)
    logger.info("Ray: dashboard at http://%s", dashboard) if dashboard else \
        logger.info("Ray: no dashboard (this session runs without one; Ray's logs are under %s)",
                    _session_dir(ray))
    return ray


def _session_dir(ray: Any) -> str:
    try:
        return ray._private.worker.global_worker.node.get_session_dir_path()
    except AttributeError:
        return "Ray's temporary directory"


def placement(kind: str, name: str, declared: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Actor or task options that pin work to nodes offering the custom resource ``<kind>:<name>``.

    On a cluster whose nodes declare ``<kind>:<name>`` (``site:hospital1``, ``party:bank``)
    the actor (and so its data) lives there; where no node declares it, the work may run
    anywhere (a laptop or an unlabelled cluster).  ``declared`` is the cluster's resources
    (by default read from the connected session: its live nodes, and the node types its
    autoscaler can start, :func:`declared_resources`).
    """
    if not isinstance(kind, str) or not kind or ":" in kind:
        raise ConfigError(f"a placement kind must be a non-empty name without ':', got {kind!r}")
    key = f"{kind}:{name}"
    if declared is None:
        declared = declared_resources()
    if declared.get(key, 0) > 0:
        return {"resources": {key: SITE_SLIVER}}
    return {}


def declared_resources() -> dict[str, float]:
    """The connected cluster's resources: its live nodes' totals, plus 1 of each custom resource that
    only a node type its autoscaler can start declares (``raytune-fed cluster announce``), so work
    pinned to it waits for that node and its demand makes the autoscaler start one."""
    import ray

    from raytune_fed.cluster import offered_resources

    declared = dict(ray.cluster_resources())
    for resource in offered_resources():
        declared.setdefault(resource, 1.0)
    return declared


def site_placement(site_name: str, declared: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Options that pin a site's actor or tasks to nodes offering ``site:<name>`` (see :func:`placement`)."""
    return placement("site", site_name, declared)


def party_placement(party_name: str) -> dict[str, Any]:
    """Actor options that pin a vertical-learning party's actor to nodes offering ``party:<name>``."""
    return placement("party", party_name)
