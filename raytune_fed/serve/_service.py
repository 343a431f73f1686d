"""A site as an authenticated network service on its own machine.

``serve(site, ...)`` answers ``POST /call`` with the site's :meth:`Party.call`; nothing
else is served.  A request must carry ``Authorization: Bearer <token>`` of one of the
site's analyst credentials (compared in constant time; the credential's name is what the
site charges) and a body of at most the policy's ``max_request_bytes``; the body is a
wire message (JSON header plus raw numeric buffers, :mod:`raytune_fed.federation._wire`),
never unpickled, so a pickle sent here is refused by the message parser without being
loaded.  With a certificate and key the server speaks TLS only.  Nothing a request does
reaches the process's standard streams: the handler turns every exception into a fixed
``500`` reply, and what is worth logging goes to the party's log
(``logging.getLogger("raytune_fed.federation")``), which ``raytune-fed site serve``
writes to a rotated file in the site's directory (:func:`log_to`).

The service's memory is bounded whoever connects: at most ``MAX_BODIES`` request bodies
are read and held at a time, and as many requests are answered at once: each on its own
request thread, the site scoring them in parallel and charging and recording them in one
order (:class:`~raytune_fed.federation.Party`); a body read beyond them would only wait in
memory (``n`` parallel bodies of the largest size would otherwise hold ``n`` times it).
A body must arrive at ``MIN_BYTES_PER_SECOND`` after a ``BODY_GRACE`` of seconds, or its
connection is closed (HTTP 408), so a slow sender holds a body slot only so long.
Connections are not capped (a thread each, as in the standard library): a deployment
facing the open network bounds them in front of the service (a firewall or reverse
proxy), as it would for any service.

Nobody without a token can rotate the log away: what the HTTP layer logs before a request is
authenticated (malformed request lines, failed TLS handshakes, connections dropped while
being refused) is one line of at most ``LOG_LINE`` characters, written for the 1st, 2nd, 4th,
8th, ... of each kind (:class:`_Noted`, as the ledger counts uncharged requests), so ``N``
such connections add ``O(log N)`` short lines and the party's own entries stay in its log.

Why the standard library's ``http.server`` and not Ray Serve: the boundary's whole point
is that the site shares no runtime with the analyst, and a plain process with one
request handler has nothing to configure and nothing that deserialises Python objects;
its throughput (``MAX_BODIES`` requests at a time per site, see ``experiments/bench_sites.py``)
is far above what scoring models allows.
"""

from __future__ import annotations

import errno
import hmac
import logging
import logging.handlers
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.federation import DEFAULT_ANALYST
from raytune_fed.serve._http import CONTENT_TYPE

log = logging.getLogger("raytune_fed.federation")
LOG_BYTES = 1 << 20
LOG_BACKUPS = 3
MAX_BODIES = 2
MIN_BYTES_PER_SECOND = 1 << 16
BODY_GRACE = 60.0
LOG_LINE = 200  # characters of a logged HTTP-layer line (a request line may be 64 KiB)


def log_to(path: str | os.PathLike) -> logging.Handler:
    """Send the parties' log to ``path``, rotated at ``LOG_BYTES`` with ``LOG_BACKUPS`` old files kept."""
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    return handler


def one_thread_per_request() -> Any:
    """Run this process's BLAS and OpenMP pools on one thread (a served party's requests are timed on the
    thread answering them, :class:`~raytune_fed.federation._party.CpuDeadline`, so their work stays on it);
    returns the limiter (its ``restore_original_limits()`` undoes it)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


class _Noted:
    """Log the 1st, 2nd, 4th, ... line of each kind, each cut to ``LOG_LINE`` characters (see the module docstring)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, kind: str, message: str, *, traceback: bool = False) -> None:
        with self._lock:
            n = self._counts[kind] = self._counts.get(kind, 0) + 1
        if n & (n - 1) == 0:
            text = message if len(message) <= LOG_LINE else message[:LOG_LINE] + "..."
            log.info("HTTP: %s (%d such since the service started)", text, n, exc_info=traceback)


def _gone(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a connection's failure (a dropped client, a failed TLS handshake), not the service's."""
    return isinstance(exc, (OSError, EOFError))


_BIND_ERRORS: dict[int | None, str] = {  # keyed like OSError.errno, which may be None
    errno.EADDRINUSE: "the address is in use (does another service listen there?)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)"}


def _listen_error(host: str, port: int, exc: OSError) -> ConfigError:
    if isinstance(exc, socket.gaierror):
        reason = f"the host name does not resolve to an IPv4 address ({exc.strerror})"
    else:
        reason = _BIND_ERRORS.get(exc.errno, exc.strerror or str(exc))
    return ConfigError(f"cannot listen on {host}:{port}: {reason}")


def check_listen(host: str, port: int) -> None:
    """Raise :class:`ConfigError` unless a service can listen on ``host:port`` (``port`` 0: any free port).

    Binds a socket the way the server will and closes it, so a port in use, an address
    that is not this machine's or a host name that does not resolve is reported before
    the data is loaded.
    """
    check_int("--port", port, 0, 65535)
    if not isinstance(host, str) or not host:
        raise ConfigError(f"--host must be a host name or address, got {host!r}")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server does
            probe.bind((host, port))
    except (OSError, UnicodeError) as exc:
        raise _listen_error(host, port, exc if isinstance(exc, OSError) else socket.gaierror(str(exc))) from None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: without this, delayed ACKs add ~40 ms
    timeout = 300  # seconds a connection may stay silent (no client holds a handler thread forever)
    server_version = "raytune-fed-site"
    sys_version = ""
    server: SiteServer  # the server that made this handler

    def _reply(self, status: int, body: bytes, *, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE if status == 200 else "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        try:
            self._post()
        except Exception as exc:  # noqa: BLE001 - nothing a request does may kill its thread or reach stderr
            if _gone(exc):  # the client went away (e.g. while its missing token was refused): one line
                self.server.noted(f"gone: {type(exc).__name__}", f"a connection dropped: {type(exc).__name__}")
            else:
                self.server.noted(f"failed: {type(exc).__name__}", f"a request to {self.path[:100]!r} failed in "
                                  f"the HTTP layer", traceback=True)
            try:
                self._reply(500, b"internal error\n", close=True)
            except Exception:  # noqa: BLE001 - the connection is gone
                self.close_connection = True

    def _post(self) -> None:
        server: SiteServer = self.server  # type: ignore[assignment]
        if self.path != "/call":
            return self._reply(404, b"not found\n", close=True)
        analyst = server.analyst_of(self.headers.get("Authorization", ""))
        if analyst is None:
            return self._reply(401, b"unauthorised\n", close=True)
        if self.headers.get("Content-Type") != CONTENT_TYPE:
            return self._reply(415, b"unsupported content type\n", close=True)
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            return self._reply(411, b"length required\n", close=True)
        if int(length) > server.max_bytes:
            return self._reply(413, b"request too large\n", close=True)
        with server.bodies:
            body = self._body(int(length))
            if body is None:
                return self._reply(408, b"request body too slow\n", close=True)
            reply = server.site.call(body, analyst=analyst)
        self._reply(200, reply)

    def _body(self, n: int) -> bytes | None:
        """The request body, or ``None`` if it does not arrive in time (see the module docstring)."""
        give_up = time.monotonic() + BODY_GRACE + n / MIN_BYTES_PER_SECOND
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            left = give_up - time.monotonic()
            if left <= 0:
                return None
            self.connection.settimeout(min(left, self.timeout))
            read = self.rfile.readinto1(view[got:got + (1 << 20)])
            if not read:
                return None
            got += read
        self.connection.settimeout(self.timeout)
        return bytes(buf)

    def do_GET(self) -> None:  # noqa: N802
        self._reply(405, b"only POST /call\n", close=True)

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # requests are in the site's ledger
        return

    def log_error(self, format: str, *args: Any) -> None:  # e.g. a malformed request line: the log, not stderr
        kind = f"{format} {args[0]}" if args and isinstance(args[0], int) else format  # e.g. "code 400"
        self.server.noted(kind, format % args)


class SiteServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # connections waiting to be accepted (the standard library's 5 resets a burst)

    def __init__(self, site: Any, address: tuple[str, int], tokens: Mapping[str, str], max_bytes: int) -> None:
        self.site = site
        self._auth = [(f"Bearer {token}".encode(), name) for name, token in tokens.items()]
        self.max_bytes = max_bytes
        self.bodies = threading.BoundedSemaphore(MAX_BODIES)
        self.noted = _Noted()
        super().__init__(address, _Handler)

    def analyst_of(self, authorization: str) -> str | None:
        """The credential named by an ``Authorization`` header, or ``None`` (every token compared, in constant time)."""
        given = authorization.encode("utf-8", "replace")
        found = None
        for expected, name in self._auth:
            if hmac.compare_digest(given, expected):
                found = name
        return found

    def handle_error(self, request: Any, client_address: Any) -> None:  # never on stderr, never a flood
        exc = sys.exc_info()[1]
        if _gone(exc):  # e.g. a client speaking plain HTTP to the TLS service: one line, not a traceback
            reason = getattr(exc, "reason", None) or type(exc).__name__
            self.noted(f"connection: {reason}", f"a connection failed: {type(exc).__name__} ({reason})")
        else:
            self.noted(f"connection: {type(exc).__name__}", "a connection failed", traceback=True)

    @property
    def url(self) -> str:
        host, port = cast(tuple[str, int], self.server_address[:2])  # an AF_INET server: the host is a str
        scheme = "https" if isinstance(self.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host}:{port}"


def serve(site: Any, *, token: str | None = None, tokens: Mapping[str, str] | None = None, host: str = "127.0.0.1",
          port: int = 0, certfile: str | None = None, keyfile: str | None = None) -> SiteServer:
    """A bound (not yet serving) server for ``site`` (any :class:`~raytune_fed.federation.Party`, e.g. a
    SecureBoost passive party); call ``serve_forever()`` on it.

    ``tokens`` maps analyst credential names to bearer tokens; ``token`` alone is the
    credential ``DEFAULT_ANALYST``.
    """
    tokens = dict(tokens or {})
    if token is not None:
        tokens.setdefault(DEFAULT_ANALYST, token)
    if not tokens or any(not isinstance(t, str) or len(t) < 16 for t in tokens.values()):
        raise ConfigError("the service needs at least one token, each a str of at least 16 characters")
    if len(set(tokens.values())) != len(tokens):
        raise ConfigError("two analyst credentials share a token; give each its own")
    if (certfile is None) != (keyfile is None):
        raise ConfigError("give both a certificate and its key for TLS, or neither")
    check_int("port", port, 0, 65535)
    try:
        server = SiteServer(site, (host, port), tokens, site.max_request_bytes + (1 << 16))
    except OSError as exc:
        raise _listen_error(host, port, exc) from None
    if certfile is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            server.server_close()
            raise ConfigError(f"cannot load the TLS certificate {certfile!r} and key {keyfile!r}: {exc}") from None
        # the handshake happens in the connection's own thread, so a silent client cannot stall accept()
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    return server
