"""The analyst's handles on served sites: bearer tokens, service clients, a sites file, reachability.

:func:`service_client` is a :class:`~raytune_fed.federation.SiteClient` whose transport is
an :class:`~raytune_fed.serve.HttpTransport` to a site served by ``raytune-fed site serve``;
:func:`load_site_directory` reads several by name from a TOML or JSON file and
:func:`check_reachable` checks that one answers (a TCP connection and, for ``https``, a
verified TLS handshake) without sending a request.
"""

from __future__ import annotations

import os
from pathlib import Path

from raytune_fed.errors import ConfigError
from raytune_fed.federation import SiteClient
from raytune_fed.serve._http import HttpTransport


def read_token(path: str | os.PathLike, what: str = "token") -> str:
    """A bearer token or owner credential from a file (first line, at least 16 characters)."""
    try:
        token = open(path, encoding="utf-8").read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {os.fspath(path)!r}: {exc.strerror}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(f"the {what} file {os.fspath(path)!r} must hold one token of at least 16 characters")
    return token


def service_client(url: str, *, token: str | None = None, token_file: str | os.PathLike | None = None,
                   cafile: str | os.PathLike | None = None, name: str | None = None,
                   timeout: float = 600.0, restart_wait: float = 600.0) -> SiteClient:
    """A client for a site served at ``url`` with the analyst's bearer token (a request that
    meets the service restarting is sent again for up to ``restart_wait`` seconds)."""
    if (token is None) == (token_file is None):
        raise ConfigError("give exactly one of token= and token_file=")
    token = read_token(token_file) if token_file is not None else token
    if token is None:  # one of the two was given (checked above)
        raise ConfigError("give exactly one of token= and token_file=")
    transport = HttpTransport(url, token, cafile=None if cafile is None else os.fspath(cafile), timeout=timeout,
                              restart_wait=restart_wait)
    return SiteClient(transport, name=name or url)


def check_reachable(client: SiteClient, timeout: float = 5.0) -> None:
    """Raise :class:`ConfigError` unless a served site accepts a connection within ``timeout`` s and,
    for ``https``, completes a TLS handshake verified against its CA file; sends no request (a site
    in this process or an actor passes)."""
    import ssl
    from urllib.parse import urlsplit

    from raytune_fed.runtime import open_connection

    transport = client.transport
    if not isinstance(transport, HttpTransport):
        return
    url, cafile = transport.url, transport.cafile
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    where = f"cannot reach site {client.name!r} at {url}"
    if parts.hostname is None:  # HttpTransport refuses such a URL when built
        raise ConfigError(f"{where}: the URL names no host")
    with open_connection(parts.hostname, parts.port or (443 if tls else 80), timeout, where) as conn:
        if not tls:
            return
        try:
            ssl.create_default_context(cafile=cafile).wrap_socket(conn, server_hostname=parts.hostname).close()
        except ssl.SSLCertVerificationError as exc:
            against = f"cafile {cafile!r}" if cafile else "the system's certificates (no cafile given)"
            raise ConfigError(f"{where}: its certificate does not verify against {against}: "
                              f"{exc.verify_message}") from None
        except OSError as exc:  # ssl.SSLError included: e.g. the port speaks plain HTTP
            why = getattr(exc, "reason", None) or exc.strerror or str(exc) or type(exc).__name__
            raise ConfigError(f"{where}: the TLS handshake failed ({why})") from None


SITE_KEYS = {"url": True, "token_file": True, "cafile": False}
"""The keys of a sites file's ``[sites.<name>]`` table, and whether each is required."""


def load_site_directory(path: str | os.PathLike) -> dict[str, SiteClient]:
    """Clients for remote sites listed in a TOML or JSON file::

        [sites.site0]
        url = "https://site0.example.org:8443"
        token_file = "tokens/site0"       # the analyst's bearer token, relative to this file
        cafile = "certs/site0.pem"        # optional: the site's certificate (self-signed)

    Everything is checked without contacting a site: the keys, the URL and its port, the token
    file and the CA file (readable, and a PEM certificate).  :func:`check_reachable`
    then checks that each site answers.
    """
    import json
    import tomllib

    path = Path(path)
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the sites file {os.fspath(path)!r}: {exc}") from None
    sites = data.get("sites") if isinstance(data, dict) else None
    if not isinstance(sites, dict) or not sites:
        raise ConfigError(f"the sites file {path.name!r} must have a [sites.<name>] table per site")
    if set(data) != {"sites"}:
        raise ConfigError(f"the sites file {path.name!r} has unknown key(s) {sorted(set(data) - {'sites'})}; it "
                          f"holds only [sites.<name>] tables")
    known = sorted(SITE_KEYS)
    out = {}
    for name, entry in sites.items():
        where = f"the sites file {path.name!r}: sites.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a table with the keys {known}, got {entry!r}")
        unknown = sorted(set(entry) - set(SITE_KEYS))
        missing = [k for k, required in SITE_KEYS.items() if required and k not in entry]
        if unknown or missing:
            raise ConfigError(f"{where} has unknown key(s) {unknown}; known: {known}" if unknown else
                              f"{where} lacks {missing} (url and token_file are required, cafile is optional)")
        bad = [k for k, v in entry.items() if not (isinstance(v, str) and v.strip())]
        if bad:
            raise ConfigError(f"{where}: {bad[0]} must be a non-empty string, got {entry[bad[0]]!r}")
        resolve = lambda p: p if os.path.isabs(p) else os.fspath(path.parent.resolve() / p)  # noqa: E731
        cafile = resolve(entry["cafile"]) if "cafile" in entry else None
        if cafile is not None:
            _check_cafile(cafile, where)
        try:
            out[name] = service_client(entry["url"], token_file=resolve(entry["token_file"]), cafile=cafile,
                                      name=name)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return out


def _check_cafile(cafile: str, where: str) -> None:
    """``cafile`` is readable and holds a PEM certificate (what TLS verifies the site against)."""
    import ssl

    try:
        ssl.create_default_context(cafile=cafile)
    except ssl.SSLError as exc:
        raise ConfigError(f"{where}: cafile {cafile!r} holds no PEM certificate ({exc.reason or exc})") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read cafile {cafile!r}: {exc.strerror or exc}") from None
