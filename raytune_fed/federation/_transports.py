"""How a client's wire messages reach a party: in-process, a Ray actor, or HTTP(S).

Every transport has ``submit(message) -> pending`` and ``collect(pendings) -> [bytes]``,
so a client can send to several sites first and wait for all answers together (Ray
futures, a thread per HTTP request, eager calls in-process).
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Sequence
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


class ActorTransport:
    """A party inside a Ray actor whose only method is ``call``."""

    kind = "actor"

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def submit(self, message: bytes) -> Any:
        return self.actor.call.remote(message)

    @staticmethod
    def collect(pending: Sequence[Any]) -> list[bytes]:
        import ray

        return list(ray.get(list(pending)))


def read_token(path: str | os.PathLike, what: str = "token") -> str:
    """A bearer token or owner credential from a file (first line, at least 16 characters)."""
    try:
        token = open(path, encoding="utf-8").read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {os.fspath(path)!r}: {exc.strerror}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(f"the {what} file {os.fspath(path)!r} must hold one token of at least 16 characters")
    return token


class HttpTransport:
    """A party served by ``raytune-fed site serve``: POST to ``<url>/call`` with a bearer token.

    One persistent connection per thread; TLS is verified against ``cafile`` (or the
    system's certificates) when the URL is ``https``.
    """

    kind = "service"

    def __init__(self, url: str, token: str, *, cafile: str | None = None, timeout: float = 600.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"a site URL must be http://host:port or https://host:port, got {url!r}")
        self.url, self._token, self.cafile, self.timeout = url, token, cafile, timeout
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
        import http.client

        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": CONTENT_TYPE}
        retry = getattr(self._local, "conn", None) is not None  # a kept-alive connection may have been closed
        while True:
            try:
                conn = self._connection()
                conn.request("POST", "/call", body=message, headers=headers)
                response = conn.getresponse()
                body = response.read()
                break
            except (http.client.HTTPException, OSError) as exc:  # ssl.SSLError is an OSError
                self._drop()
                if retry and isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
                    retry = False
                    continue
                raise QueryRefusedError(f"site at {self.url} is unreachable: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            raise QueryRefusedError(f"site at {self.url} refused the connection: HTTP {response.status}")
        return body

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
