"""How a client's wire messages reach a party: in-process, a Ray actor, or HTTP(S).

Every transport has ``submit(message) -> pending`` and ``collect(pendings) -> [bytes]``,
so a client can send to several sites first and wait for all answers together (Ray
futures, a thread per HTTP request, eager calls in-process).
"""

from __future__ import annotations

import http.client
import os
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


class LocalTransport:
    """A party object in this process (tests, small simulations)."""

    kind = "local"

    def __init__(self, party: Any) -> None:
        self.party = party

    def submit(self, message: bytes) -> bytes:
        return self.party.call(message)

    @staticmethod
    def collect(pending: Sequence[Any]) -> list[bytes]:
        return list(pending)


class _ActorCall:
    """One message sent to an actor: its future, and what is needed to send it again."""

    def __init__(self, actor: Any, message: bytes, wait: float) -> None:
        self.actor, self.message, self.wait = actor, message, wait
        self.ref = actor.call.remote(message)

    def result(self) -> bytes:
        """The reply; while the actor restarts, the same message again (safe: see the module docstring)."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        start = time.monotonic()
        while True:
            try:
                return ray.get(self.ref)
            except RayActorError as exc:
                # restarting: wait for it; died (a call lost with the process, or for good): a short while, since
                # a restarted actor answers again and one that is gone fails the same way at once
                limit = self.wait if isinstance(exc, ActorUnavailableError) else min(self.wait, 60.0)
                if time.monotonic() - start > limit:
                    raise QueryRefusedError(f"a site actor is unavailable ({type(exc).__name__}) "
                                            f"after {limit:.0f} s") from None
                time.sleep(0.2)
                self.ref = self.actor.call.remote(self.message)


class ActorTransport:
    """A party inside a Ray actor whose only method is ``call``.

    A call that meets the actor restarting is sent again until it is back (at most
    ``restart_wait`` seconds): the site's request numbers make a message sent twice cost
    once (Ray itself retries calls already queued, ``max_task_retries=-1``).
    """

    kind = "actor"

    def __init__(self, actor: Any, *, restart_wait: float = 600.0) -> None:
        self.actor, self.restart_wait = actor, restart_wait

    def submit(self, message: bytes) -> _ActorCall:
        return _ActorCall(self.actor, message, self.restart_wait)

    @staticmethod
    def collect(pending: Sequence[_ActorCall]) -> list[bytes]:
        import ray

        try:
            return list(ray.get([p.ref for p in pending]))
        except ray.exceptions.RayActorError:
            return [p.result() for p in pending]


def read_token(path: str | os.PathLike, what: str = "token") -> str:
    """A bearer token or owner credential from a file (first line, at least 16 characters)."""
    try:
        token = open(path, encoding="utf-8").read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {os.fspath(path)!r}: {exc.strerror}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(f"the {what} file {os.fspath(path)!r} must hold one token of at least 16 characters")
    return token


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
        import http.client

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

    def _post(self, message: bytes) -> bytes:
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
        return _pool().submit(self._post, message)

    @staticmethod
    def collect(pending: Sequence[Future]) -> list[bytes]:
        return [f.result() for f in pending]
