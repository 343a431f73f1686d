"""``raytune-fed site serve``: start a site as an authenticated network service.

The owner runs this on the site's machine with its policy, its data and its secrets: the
analysts' bearer tokens (``--token-file`` for the credential named ``analyst``, and a
``token_file`` per ``[analysts.<name>]`` table of the policy) and, optionally, its own
credential for closing sessions (``--owner-token-file``).  The service logs to the
policy's ``log`` file (rotated; by default beside the ledger), never to its standard
streams once it listens.  The data is a ``.csv``/``.csv.gz``/``.parquet`` table
with ``--target`` naming the label column, or an ``.npz`` with arrays ``X`` and ``y``
(read with ``allow_pickle=False``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    site = subparsers.add_parser("site", help="run a restricted data site",
                                 description="Run a restricted data site for RFMS under its owner's policy.")
    sub = site.add_subparsers(dest="site_command", required=True, metavar="SITE_COMMAND")
    from raytune_fed.serve._init_cli import add_site_init

    add_site_init(sub)
    s = sub.add_parser("serve", help="serve a site over HTTP(S) with a bearer token",
                       description="Serve a site as an authenticated network service (POST /call).")
    s.add_argument("--policy", required=True, help="the site's policy file (.toml or .json)")
    s.add_argument("--data", required=True, help="the site's rows: .csv/.csv.gz/.parquet (with --target) or .npz")
    s.add_argument("--target", default=None, help="label column of a table file")
    s.add_argument("--token-file", default=None,
                   help="file holding the bearer token of the analyst credential 'analyst' (needed unless the "
                        "policy names analysts with token files)")
    s.add_argument("--owner-token-file", default=None, help="file holding the owner's credential")
    add_listen_arguments(s)
    return s


def add_listen_arguments(s: argparse.ArgumentParser) -> None:
    """Where and how a served party listens (shared by ``site serve`` and ``party serve``)."""
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    s.add_argument("--port", type=int, default=8443, help="port (0 picks a free one; default: %(default)s)")
    s.add_argument("--cert", default=None, help="TLS certificate (PEM); with --key the service speaks TLS only")
    s.add_argument("--key", default=None, help="TLS private key (PEM)")
    s.add_argument("--url-file", default=None, help="write the service's URL to this file once it listens")


def check_listen_arguments(args: argparse.Namespace) -> None:
    """Where the service listens and the URL file, checked before anything is loaded (nothing is created)."""
    from raytune_fed._checks import check_new_file
    from raytune_fed.errors import ConfigError
    from raytune_fed.serve._service import check_listen

    check_listen(args.host, args.port)
    if (args.cert is None) != (args.key is None):
        raise ConfigError("give both a certificate and its key for TLS (--cert and --key), or neither")
    for option, path in (("--cert", args.cert), ("--key", args.key)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{option} {path!r}: no such file")
    if args.url_file:
        check_new_file("--url-file", args.url_file)


def serve_until_stopped(party: Any, token: str | None, args: argparse.Namespace, banner: str, *,
                        tokens: dict[str, str] | None = None, log_file: str | None = None, what: str = "the party",
                        ledger: str | None = None) -> None:
    """Serve ``party`` with the listen arguments; print ``banner`` (``{url}`` filled in), write the URL file.

    ``log_file``: where the party's log goes (rotated) while it serves.  Ctrl-C or SIGTERM stop it:
    the command line then says that ``what`` stopped, where, and what its ``ledger`` kept
    (``args.stop_message``).
    """
    from raytune_fed.serve._service import log_to, one_thread_per_request, serve

    one_thread_per_request()  # a request's CPU limit counts the thread answering it: keep its work there
    server = serve(party, token=token, tokens=tokens, host=args.host, port=args.port, certfile=args.cert,
                   keyfile=args.key)
    if log_file is not None:
        try:
            log_to(log_file)
        except OSError as exc:
            server.server_close()
            from raytune_fed.errors import ConfigError

            raise ConfigError(f"cannot write the log file {log_file!r}: {exc.strerror}") from None
    print(banner.format(url=server.url), flush=True)
    kept = (f"its ledger {ledger} keeps every session and answer, and the same command serves on from them"
            if ledger else "it kept no ledger: its sessions and answers are gone, and the same command starts afresh")
    args.stop_message = f"{what} stopped serving on {server.url}; {kept}"
    if args.url_file:
        Path(args.url_file).write_text(server.url + "\n")
    try:
        server.serve_forever()
    finally:
        server.server_close()
        sys.stdout.flush()


def _load_data(path: str, target: str | None) -> tuple[Any, Any]:
    from raytune_fed.data._files import load_file, read_npz

    if path.lower().endswith(".npz"):
        X, y = read_npz(path, ("X", "y"))
        return X, y
    ds = load_file(path, target=target)
    return ds.X, ds.y


def run(args: argparse.Namespace) -> None:
    from raytune_fed._checks import check_new_file
    from raytune_fed.errors import ConfigError
    from raytune_fed.federation import DEFAULT_ANALYST, Site, load_policy
    from raytune_fed.serve._clients import read_token

    check_listen_arguments(args)
    policy = load_policy(args.policy)
    for what, path in (("ledger", policy.ledger), ("log", getattr(policy, "log_file", None))):
        if path is not None:
            check_new_file(what, path)
    tokens = {name: read_token(a.token_file, f"token of analyst {name!r}")
              for name, a in policy.analysts.items() if a.token_file is not None}
    if args.token_file:
        if DEFAULT_ANALYST in tokens:
            raise ConfigError(f"--token-file is the credential {DEFAULT_ANALYST!r}, which the policy's "
                              f"[analysts.{DEFAULT_ANALYST}] already gives a token file")
        tokens[DEFAULT_ANALYST] = read_token(args.token_file, "token")
    if not tokens:
        raise ConfigError("give --token-file, or name analysts with token files in the policy ([analysts.<name>])")
    owner = read_token(args.owner_token_file, "owner token") if args.owner_token_file else None
    if owner is not None and owner in tokens.values():
        raise ConfigError("the owner's credential must differ from every analyst's token")
    X, y = _load_data(args.data, args.target)
    site = Site(X, y, policy, owner_secret=owner)
    serve_until_stopped(site, None, args, f"site {policy.name!r} serving on {{url}} ({len(y)} rows, "
                                          f"{site.n_features} features)", tokens=tokens, log_file=policy.log_file,
                        what=f"site {policy.name!r}", ledger=policy.ledger)
