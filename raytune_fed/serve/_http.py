"""The HTTP(S) transport: a client's wire messages to a party served by ``raytune-fed site serve``.

:class:`HttpTransport` implements the boundary's
:class:`~raytune_fed.federation.Transport` protocol (``send``, ``submit``, ``collect``) over
``POST <url>/call`` with a bearer token, so a :class:`~raytune_fed.federation.SiteClient`, a
:class:`~raytune_fed.federation.parties.PassiveClient` or a
:func:`~raytune_fed.federation.relay_site` actor reaches a served party the same way as one
in this process.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from raytune_fed.errors import ConfigError, QueryRefusedError

CONTENT_TYPE = "application/x-raytune-fed"
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="site-http")
        return _POOL


# the service went away (stopped, restarted, a kept-alive connection it closed): the same message again is safe
_GONE = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
         http.client.RemoteDisconnected, http.client.IncompleteRead, ssl.SSLEOFError, ssl.SSLZeroReturnError)


class HttpTransport:
    """A party served by ``raytune-fed site serve``: POST to ``<url>/call`` with a bearer token.

    One persistent connection per thread; TLS is verified against ``cafile`` (or the
    system's certificates) when the URL is ``https``.  While the service is away (its
    owner restarts it, the connection drops mid-request) the same message is sent again
    until it answers, for at most ``restart_wait`` seconds, once the service has answered
    this transport at least once (before that, a refused or dropped connection is a wrong
    URL, scheme or port, and fails at once): a charged request carries its
    request number, so the restarted site answers it from its ledger if it was answered
    before the restart, and otherwise computes it once (never charged twice, never a
    second, different answer).  A reply that is not the service's (TLS verification
    failing, HTTP errors such as a revoked token) is not retried, nor is a refusal that
    arrives while the message is still being sent (the service answers ``413`` to a message
    over its size limit and closes the connection mid-upload): the transport reads that
    reply before it would resend, and fails at once with its status.
    """

    kind = "service"

    def __init__(self, url: str, token: str, *, cafile: str | None = None, timeout: float = 600.0,
                 restart_wait: float = 600.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"a site URL must be http://host:port or https://host:port, got {url!r}")
        try:
            port = parts.port
        except ValueError:  # "Port out of range 0-65535", or not a number
            port = 0
        if port == 0:
            raise ConfigError(f"the port of site URL {url!r} must be a number in [1, 65535]")
        self.url, self._token, self.cafile, self.timeout = url, token, cafile, timeout
        self.restart_wait = restart_wait
        self._answered = False  # the service has replied to this transport (a restart can then be waited for)
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_local")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            parts = urlsplit(self.url)
            if parts.hostname is None:  # checked in __init__
                raise ConfigError(f"a site URL must be http://host:port or https://host:port, got {self.url!r}")
            if parts.scheme == "https":
                context = ssl.create_default_context(cafile=self.cafile)
                conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=self.timeout, context=context)
            else:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=self.timeout)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._local.conn = conn
        return conn

    def send(self, message: bytes) -> bytes:
        """The service's reply to ``message`` (sent again across a restart, see the class docstring)."""
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": CONTENT_TYPE}
        give_up, pause = None, 0.05
        while True:
            try:
                conn = self._connection()
                try:
                    conn.request("POST", "/call", body=message, headers=headers)
                except _GONE:  # closed mid-upload: the service may have answered (a 413) before it closed
                    response = self._early_reply(conn)
                    if response is None:
                        raise
                else:
                    response = conn.getresponse()
                body = response.read()
                self._answered = True
                break
            except (http.client.HTTPException, OSError) as exc:  # ssl.SSLError is an OSError
                self._drop()
                now = time.monotonic()
                give_up = now + self.restart_wait if give_up is None else give_up
                if not (self._answered and isinstance(exc, _GONE)) or now > give_up:
                    raise QueryRefusedError(f"site at {self.url} is unreachable: {type(exc).__name__}: {exc}") \
                        from None
                time.sleep(pause)
                pause = min(2 * pause, 2.0)
        if response.status != 200:
            self._drop()
            said = body[:200].decode("utf-8", "replace").strip()
            raise QueryRefusedError(f"site at {self.url} refused the request: HTTP {response.status} ({said}; the "
                                    f"message was {len(message):,} bytes)")
        return body

    @staticmethod
    def _early_reply(conn: Any) -> Any:
        """The reply a service sent before closing a connection whose upload it refused, or ``None``."""
        try:
            response = conn.getresponse()
        except (http.client.HTTPException, OSError):
            return None
        return response if 400 <= response.status < 500 else None

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def submit(self, message: bytes) -> Future:
        return _pool().submit(self.send, message)

    @staticmethod
    def collect(pending: Sequence[Future]) -> list[bytes]:
        return [f.result() for f in pending]
