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
retrying for minutes.  ``ray.init`` installs its own SIGTERM handler (``sys.exit(15)``);
``connect`` turns a SIGTERM that arrives during ``ray.init`` into the handler the caller had
installed and puts that handler back afterwards, so a command line stops cleanly either way.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
from typing import Any, Collection, Mapping

from raytune_fed._limits import check_bounded
from raytune_fed.errors import ConfigError

logger = logging.getLogger("raytune_fed")

SITE_SLIVER = 0.001
"""How much of ``site:<name>`` a site's actor or cell asks for: any whole unit hosts them all."""

PROBE_SECONDS = 5.0
"""How long :func:`probe_address` waits for a connection, and then for the cluster's first answer."""

_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.\-]+:[0-9]+|ray://[A-Za-z0-9_.\-]+)$")
_CLIENT_PORT = 10001  # Ray Client's default port (ray://host)
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS


def check_address(address: str | None) -> str | None:
    """``None`` (a local session, or ``$RAY_ADDRESS``), ``"auto"``, ``host:port`` or ``ray://host[:port]``,
    with a port in [1, 65535]."""
    if address is None:
        return None
    if not isinstance(address, str) or not _ADDRESS.match(address.strip()):
        raise ConfigError(f"Ray address must be 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    address = address.strip()
    endpoint = _endpoint(address)
    if endpoint is not None and not 1 <= endpoint[1] <= 65535:
        raise ConfigError(f"the port of Ray address {address!r} must be in [1, 65535], got {endpoint[1]}")
    return address


def _endpoint(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``ray://`` address (None for ``auto`` and ``local``)."""
    if address in ("auto", "local"):
        return None
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", str(_CLIENT_PORT))
    return host, int(port)


def check_num_cpus(num_cpus: int | None) -> int | None:
    """CPUs of a local session: at least 1, at most what this machine's memory holds worker processes for."""
    return None if num_cpus is None else check_bounded("num_cpus", num_cpus, 1, "cpus")


def probe_address(address: str | None, timeout: float = PROBE_SECONDS) -> None:
    """Raise :class:`ConfigError` unless a Ray cluster answers at ``address`` within ``timeout`` seconds.

    ``None`` and ``"local"`` (a session of our own) pass; ``"auto"`` is resolved the way
    ``ray.init`` resolves it.  The host must resolve, something must accept a connection on
    the port, and it must answer an HTTP/2 greeting as a gRPC server (a cluster's GCS, or a
    Ray Client server) does; with ``RAY_USE_TLS`` set only the connection is checked.
    """
    address = check_address(address)
    if address is None or address == "local":
        return
    if address == "auto":
        from ray._private.services import canonicalize_bootstrap_address_or_die

        try:
            resolved = canonicalize_bootstrap_address_or_die("auto")
        except (ConnectionError, ValueError) as exc:
            raise ConfigError(f"--address auto finds no Ray cluster on this machine: {str(exc).splitlines()[0]}") \
                from None
        probe_address(resolved, timeout)
        return
    host, port = _endpoint(address)
    where = f"cannot reach the Ray cluster at {address!r}"
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{where}: the host name does not resolve ({getattr(exc, 'strerror', None) or exc})") \
            from None
    try:
        conn = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise ConfigError(f"{where}: nothing listens there (connection refused)") from None
    except socket.timeout:
        raise ConfigError(f"{where}: no connection within {timeout:g} s") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        try:
            conn.settimeout(timeout)
            conn.sendall(_HTTP2_PREFACE)
            head = _read(conn, 9)  # the server's first frame header: length (3), type (1), flags, stream id
        except OSError:
            head = b""
    if len(head) < 9 or head[3] != 4:  # a gRPC server opens with a SETTINGS frame (type 4)
        raise ConfigError(f"{where}: something listens there but it is not a Ray cluster (no gRPC answer "
                          f"within {timeout:g} s)")


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


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
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray session"
        lines = str(exc).strip().splitlines()
        raise ConfigError(f"cannot start or reach {where}: {type(exc).__name__}: {lines[0] if lines else ''}") \
            from None
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
