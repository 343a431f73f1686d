"""A site as an authenticated network service on its own machine.

``serve(site, ...)`` answers ``POST /call`` with the site's :meth:`Party.call`; nothing
else is served.  A request must carry ``Authorization: Bearer <token>`` (compared in
constant time) and a body of at most the policy's ``max_request_bytes``; the body is a
wire message (JSON header plus raw numeric buffers, :mod:`raytune_fed.federation._wire`),
never unpickled, so a pickle sent here is refused by the message parser without being
loaded.  With a certificate and key the server speaks TLS only.

Why the standard library's ``http.server`` and not Ray Serve: the boundary's whole point
is that the site shares no runtime with the analyst, and a plain process with one
request handler has nothing to configure and nothing that deserialises Python objects;
its throughput (one request at a time per site, see ``experiments/bench_sites.py``) is
far above what scoring models allows.
"""

from __future__ import annotations

import hmac
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from raytune_fed.errors import ConfigError
from raytune_fed.federation._transports import CONTENT_TYPE


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: without this, delayed ACKs add ~40 ms
    timeout = 300  # seconds a connection may stay silent (no client holds a handler thread forever)
    server_version = "raytune-fed-site"
    sys_version = ""

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
        server: SiteServer = self.server  # type: ignore[assignment]
        if self.path != "/call":
            return self._reply(404, b"not found\n", close=True)
        given = self.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, server.expected_auth):
            return self._reply(401, b"unauthorised\n", close=True)
        if self.headers.get("Content-Type") != CONTENT_TYPE:
            return self._reply(415, b"unsupported content type\n", close=True)
        length = self.headers.get("Content-Length", "")
        if not length.isdigit():
            return self._reply(411, b"length required\n", close=True)
        if int(length) > server.max_bytes:
            return self._reply(413, b"request too large\n", close=True)
        body = self.rfile.read(int(length))
        self._reply(200, server.site.call(body))

    def do_GET(self) -> None:  # noqa: N802
        self._reply(405, b"only POST /call\n", close=True)

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:  # requests are in the site's ledger
        return


class SiteServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Any, address: tuple[str, int], token: str, max_bytes: int) -> None:
        self.site = site
        self.expected_auth = f"Bearer {token}".encode()
        self.max_bytes = max_bytes
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if isinstance(self.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host}:{port}"


def serve(site: Any, *, token: str, host: str = "127.0.0.1", port: int = 0, certfile: str | None = None,
          keyfile: str | None = None) -> SiteServer:
    """A bound (not yet serving) server for ``site`` (any :class:`~raytune_fed.federation.Party`, e.g. a
    SecureBoost passive party); call ``serve_forever()`` on it."""
    if not isinstance(token, str) or len(token) < 16:
        raise ConfigError("the service token must be a str of at least 16 characters")
    if (certfile is None) != (keyfile is None):
        raise ConfigError("give both a certificate and its key for TLS, or neither")
    server = SiteServer(site, (host, port), token, site.max_request_bytes + (1 << 16))
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
