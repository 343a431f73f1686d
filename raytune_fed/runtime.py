"""The one place that connects to Ray.

``connect()`` starts a single-node session on this machine by default (all its CPUs, no
dashboard) or joins a running cluster when given ``address`` (``"auto"``, ``host:port``
or ``ray://host:port``) or when ``RAY_ADDRESS`` is set.  Ray 2.60 rejects the old
``local_mode=True``: "laptop local mode" is a normal single-node session.

Quiet by default (``quiet=True``): the workers' log lines are not forwarded to this
process (``log_to_driver=False``; they stay in Ray's session logs), Ray's Python loggers
show errors only (the command line also keeps Ray's C++ log lines off its stderr:
:mod:`raytune_fed.cli._stderr`), and Tune prints no tables of its own
(``RAY_AIR_NEW_OUTPUT=0`` unless set, so ``RunConfig(verbose=0)`` is silent).  What
starts is said once, as an INFO record of the ``raytune_fed`` logger (the command line
prints it): a local session and its CPUs, or the cluster joined, and where the dashboard
is.

An address is checked before Ray is touched: its form and port (:func:`check_address`),
then whether a Ray cluster answers there within a few seconds (:func:`probe_address`: the
host resolves, something listens, and it speaks gRPC as a cluster's GCS does), so a wrong
address is one :class:`~raytune_fed.errors.ConfigError` at once instead of ``ray.init``
retrying for minutes.  A start that fails (Ray gives up when its processes do not register
within 30 s, as on a loaded machine) is one :class:`~raytune_fed.errors.ConfigError` saying
what did not start and what to do (:func:`start_failure`), after ``ray.shutdown()`` stops
what it left running.  ``ray.init`` installs its own SIGTERM handler (``sys.exit(15)``);
``connect`` turns a SIGTERM that arrives during ``ray.init`` into the handler the caller had
installed and puts that handler back afterwards, so a command line stops cleanly either way.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Collection, Mapping
from typing import Any

from raytune_fed import _ray_internals
from raytune_fed._address import PROBE_SECONDS, check_address, open_connection, probe_address
from raytune_fed._limits import check_bounded
from raytune_fed.errors import ConfigError

logger = logging.getLogger("raytune_fed")

__all__ = ["PROBE_SECONDS", "SITE_SLIVER", "check_address", "check_num_cpus", "connect", "declared_resources",
           "open_connection", "party_placement", "placement", "probe_address", "site_placement", "start_failure"]

SITE_SLIVER = 0.001
"""How much of ``site:<name>`` a site's actor or cell asks for: any whole unit hosts them all."""

def check_num_cpus(num_cpus: int | None) -> int | None:
    """CPUs of a local session: at least 1, at most what this machine's memory holds worker processes for."""
    return None if num_cpus is None else check_bounded("num_cpus", num_cpus, 1, "cpus")


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
    check_num_cpus(num_cpus)
    if address and (num_cpus is not None or resources):
        raise ConfigError(f"num_cpus and resources apply to a local session only, not to address={address!r}")
    import ray

    if address:  # before reusing a running session too: an address that answers nothing is an error either way
        probe_address(address)
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
                      resources=dict(resources or {}),
                      # Ray runs its workers 15 nice levels below the raylet by default; ours run at the priority the
                      # command was started with (`nice -n 10 raytune-fed ...` lowers all of it), so a busy machine
                      # does not starve the trials while the driver waits on them
                      _system_config={"worker_niceness": 0})
    on_term = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    if address:
        logger.info("Ray: joining the cluster at %s", address)
    else:
        logger.info("Ray: starting a local session with %d CPU%s", kwargs["num_cpus"],
                    "" if kwargs["num_cpus"] == 1 else "s")
    try:
        context = _init(ray, kwargs, on_term if callable(on_term) else None)
    except Exception as exc:
        if type(exc) is not Exception and not isinstance(exc, (ConnectionError, TimeoutError, RuntimeError,
                                                                ValueError)):
            raise  # not Ray's: e.g. what the caller's SIGTERM handler raised
        # Ray raises a bare Exception when its node does not start in time
        _shutdown(ray)  # stop what the failed start left running
        raise ConfigError(start_failure(exc, address, kwargs.get("num_cpus"))) from None
    dashboard = getattr(context, "dashboard_url", None)
    logger.info("Ray: dashboard at http://%s", dashboard) if dashboard else \
        logger.info("Ray: no dashboard (this session runs without one; Ray's logs are under %s)",
                    _session_dir(ray))
    return ray


def start_failure(exc: BaseException, address: str | None, num_cpus: int | None) -> str:
    """One line for a failed ``ray.init``: what did not start (or answer), Ray's own first line, and,
    when Ray gave up waiting for its processes (``"... timed out during startup ..."``), what to do."""
    where = f"the Ray cluster at {address!r}" if address else "a local Ray session"
    lines = str(exc).strip().splitlines()
    said = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
    if "timed out" not in said.lower() and not isinstance(exc, TimeoutError):
        return f"cannot start or reach {where}: {said}"
    todo = "run the same command again when it is less busy"
    if not address and (num_cpus or 0) > 1:
        todo += f", or give the session fewer CPUs than {num_cpus} (--num-cpus)"
    return (f"{where} did not start in time ({said}); this machine may be too loaded for Ray to start its "
            f"processes{_load()}: {todo}")


def _load() -> str:
    """`` (load average 3.2 on 2 CPUs)``, or nothing where the system does not say."""
    try:
        return f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count() or 1} CPUs)"
    except (OSError, AttributeError):
        return ""


def _shutdown(ray: Any) -> None:
    """``ray.shutdown()`` after a failed start; its own failure adds nothing to the first one."""
    try:
        ray.shutdown()
    except Exception:  # noqa: BLE001
        pass


def _session_dir(ray: Any) -> str:
    try:
        return _ray_internals.session_dir()
    except AttributeError:
        return "Ray's temporary directory"


def _init(ray: Any, kwargs: dict[str, Any], on_term: Any) -> Any:
    """``ray.init(**kwargs)``; a SIGTERM that arrives meanwhile goes to ``on_term``, the caller's handler.

    ``ray.init`` replaces the SIGTERM handler twice while it starts (``sys.exit(15)``, then
    its node's ``sys.exit(1)`` after stopping what it started), and the exit can surface
    from inside ``ray.init`` or be swallowed by it.  So the signal is noticed through the
    interpreter's wakeup file descriptor (written for every signal a Python handler
    catches, whichever handler that is): after ``ray.init`` ends, normally or not, the
    caller's handler is put back and, if SIGTERM came, called (the command line's raises
    ``KeyboardInterrupt``, exit code 143).
    """
    if on_term is None:  # not the main thread, or the caller handles SIGTERM by default: nothing to hand over
        return ray.init(**kwargs)
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    try:
        try:
            context = ray.init(**kwargs)
        except SystemExit:
            if not _received(read, signal.SIGTERM):
                raise
            signal.signal(signal.SIGTERM, on_term)
            on_term(signal.SIGTERM, None)
            raise
        finally:
            signal.set_wakeup_fd(previous)
            signal.signal(signal.SIGTERM, on_term)
        if _received(read, signal.SIGTERM):
            on_term(signal.SIGTERM, None)
        return context
    finally:
        os.close(read)
        os.close(write)


def _received(read: int, signum: int) -> bool:
    """Whether the wakeup pipe ``read`` holds ``signum`` (drains it)."""
    seen = b""
    while True:
        try:
            chunk = os.read(read, 512)
        except BlockingIOError:
            break
        if not chunk:
            break
        seen += chunk
    return signum in seen


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


def declared_resources(offered: Collection[str] | None = None) -> dict[str, float]:
    """The connected cluster's resources: its live nodes' totals, plus 1 of each custom resource that
    only a node type its autoscaler can start declares (``raytune-fed cluster announce``), so work
    pinned to it waits for that node and its demand makes the autoscaler start one.  ``offered``: those
    node types' resources when the caller has read them already (``cluster.offered_resources``)."""
    import ray

    if offered is None:
        from raytune_fed.cluster import offered_resources

        offered = offered_resources()
    declared = dict(ray.cluster_resources())
    for resource in offered:
        declared.setdefault(resource, 1.0)
    return declared


def site_placement(site_name: str, declared: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Options that pin a site's actor or tasks to nodes offering ``site:<name>`` (see :func:`placement`)."""
    return placement("site", site_name, declared)


def party_placement(party_name: str) -> dict[str, Any]:
    """Actor options that pin a vertical-learning party's actor to nodes offering ``party:<name>``."""
    return placement("party", party_name)
