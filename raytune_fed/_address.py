"""Ray addresses checked before Ray is touched: the form and port (:func:`check_address`), then
whether a Ray cluster answers there within a few seconds (:func:`probe_address`).

Shared by :mod:`raytune_fed.runtime` (which connects) and :mod:`raytune_fed.cluster` (which
announces node types to a running cluster), so neither imports the other for it.
"""

from __future__ import annotations

import os
import re
import socket

from raytune_fed import _ray_internals
from raytune_fed.errors import ConfigError

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
        try:
            resolved = _ray_internals.canonical_gcs_address("auto")
        except (ConnectionError, ValueError) as exc:
            raise ConfigError(f"--address auto finds no Ray cluster on this machine: {str(exc).splitlines()[0]}") \
                from None
        probe_address(resolved, timeout)
        return
    endpoint = _endpoint(address)
    if endpoint is None:  # "auto" and "local" were handled above
        raise RuntimeError(f"no endpoint for the address {address!r}")
    host, port = endpoint
    where = f"cannot reach the Ray cluster at {address!r}"
    with open_connection(host, port, timeout, where) as conn:
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


def open_connection(host: str, port: int, timeout: float, where: str) -> socket.socket:
    """A TCP connection to ``host:port``, or a :class:`ConfigError` that starts with ``where`` and says why
    not: the host name does not resolve, nothing listens (refused), no answer within ``timeout`` s."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"{where}: the host name does not resolve ({getattr(exc, 'strerror', None) or exc})") \
            from None
    try:
        return socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise ConfigError(f"{where}: nothing listens there (connection refused)") from None
    except TimeoutError:
        raise ConfigError(f"{where}: no connection within {timeout:g} s") from None
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data
