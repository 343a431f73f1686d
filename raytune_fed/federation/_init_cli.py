"""``raytune-fed site init DIR`` and ``raytune-fed party init DIR``: a site owner's set-up in one command.

``site init`` writes into ``DIR`` a commented policy file (every key of
:mod:`raytune_fed.federation._policy`, with a fresh seed; optional keys without a safe
default commented out), fresh tokens for one analyst credential and for the owner (mode
0600, from :mod:`secrets`), and a self-signed TLS certificate for the host the service will
listen on (:mod:`raytune_fed.federation._certs`).  It prints the ``site serve`` command and
the table to put in the analyst's sites file.  ``party init`` does the same for a passive
party (tokens, certificate, the ``party serve`` command; a party has no policy file).
Nothing is overwritten: a ``DIR`` that already holds one of the files is refused.
"""

from __future__ import annotations

import argparse
import re
import secrets
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")

POLICY_TEMPLATE = """\
# Policy of the restricted data site {name!r}: what its owner allows. Read by
# `raytune-fed site serve --policy` at start; the analyst chooses none of it.
# Every key is optional except name and seed; an unknown key is an error.
# Keys commented out keep their default. Documented in raytune_fed/federation/_policy.py.

name = "{name}"                      # the site's name in the analyst's schedules and sites file
roles = ["curator", "lockbox"]      # roles it may play: curator (answers a model's loss), lockbox (final only)
seed = {seed}                       # its own random root (in-bag split, Thresholdout noise); keep it secret
ledger = "{name}.ledger.jsonl"       # append-only, hash-chained ledger of every answer (relative to this file)
log = "{name}.log"                   # the service's log, rotated
max_units = 200                     # largest schedule of units it accepts

[budget]                            # what the site answers in its whole life (all sessions, units, restarts)
# answers = 20                      # every loss it computes from its rows; default: an eighth of its rows
# per_analyst = 20                  # each analyst credential's share (default: all of answers)

[analysts.{analyst}]                 # the analyst credential this set-up made (add a table per analyst)
token_file = "{analyst}.token"       # its bearer token: give this file to the analyst, privately
# answers = 20                      # its share (default: [budget] per_analyst)

# [schedule]
# approved = "<sha-256 digest>"      # the one schedule the owner approves (then the lockbox may answer
                                    # finals_per_unit per unit of it, and no other schedule is accepted)

[curator]
inbag_fraction = 0.8                # share of its rows it scores queries on (the rest scores finals)
query_budget = 1000                 # curator queries over all sessions, answered or refused
mechanisms = ["exact", "thresholdout"]  # how it may answer: the exact loss, or through Thresholdout
finals_per_unit = 1                 # out-of-bag final evaluations per scheduled unit

[lockbox]
finals_per_unit = 1                 # final evaluations per scheduled unit (with an approved schedule)
# max_answers = 1                   # final evaluations in the site's life (default: 1 without an approved schedule)

[final]
max_models = 8                      # models per final evaluation (each is charged one answer)

[thresholdout]                      # the RFMS paper's fso_th, run by the site
threshold = 0.02
sigma = 0.03
gamma = 0.0
# budget = 200                      # over-threshold answers in the site's life (default: unbounded)

[guard]
k = 5                               # differencing guard: refuse models fewer than k rows apart, or with
                                    # fewer than k scored rows in a class (0 turns it off)

[limits]
seconds_per_query = 60.0            # CPU seconds a request may use: decoding, validation, scoring
max_request_bytes = 268435456       # largest request message
max_header_bytes = 262144           # largest JSON header of a message
sessions_per_unit = 64              # sessions each analyst credential may open per unit and role
"""


def add_site_init(sub: Any) -> None:
    p = sub.add_parser("init", help="set up a site: a commented policy, fresh tokens, a TLS certificate",
                       description="Write DIR/policy.toml (commented), DIR/<analyst>.token, DIR/owner.token and a "
                                   "self-signed certificate (DIR/cert.pem, DIR/key.pem), then print the serve "
                                   "command and the analyst's sites-file entry.")
    _common(p)
    p.add_argument("--name", default=None, help="the site's name (default: the directory's name)")
    p.add_argument("--analyst", default="analyst", help="name of the analyst credential (default: %(default)s)")
    p.set_defaults(run=run_site_init)


def add_party_init(sub: Any) -> None:
    p = sub.add_parser("init", help="set up a passive party: fresh tokens and a TLS certificate",
                       description="Write DIR/active.token, DIR/owner.token and a self-signed certificate "
                                   "(DIR/cert.pem, DIR/key.pem), then print the serve command and what the "
                                   "active party needs.")
    _common(p)
    p.add_argument("--name", default=None, help="the party's name (default: the directory's name)")
    p.set_defaults(run=run_party_init)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="directory to write (created; must not hold these files yet)")
    p.add_argument("--host", default="127.0.0.1",
                   help="host name or address the analyst reaches the service at (the certificate's name; "
                        "default: %(default)s)")
    p.add_argument("--port", type=int, default=8443, help="port the service will listen on (default: %(default)s)")


def _check_name(what: str, name: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(f"{what} must be letters, digits, '_', '.' or '-', got {name!r}")
    return name


def _check_host(host: str) -> str:
    """An IP address or a DNS host name (what a certificate can name)."""
    import ipaddress

    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not (0 < len(host) <= 253 and all(_HOST_LABEL.match(label) for label in host.rstrip(".").split("."))):
        raise ConfigError(f"--host must be a host name or an IP address, got {host!r}")
    return host


def _prepare(directory: str, files: list[str], port: int, host: str) -> Path:
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be in 1..65535, got {port}")
    _check_host(host)
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{directory!r} exists and is not a directory")
    taken = [f for f in files if (out / f).exists()]
    if taken:
        raise ConfigError(f"{directory!r} already holds {', '.join(taken)}; nothing was written (use a new "
                          "directory, or remove them to start over)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {directory!r}: {exc.strerror}") from None
    return out


def _secret(path: Path) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(secrets.token_urlsafe(32) + "\n")


def _url(host: str, port: int) -> str:
    return f"https://{'[' + host + ']' if ':' in host else host}:{port}"


def site_init(directory: str, *, name: str | None = None, analyst: str = "analyst", host: str = "127.0.0.1",
              port: int = 8443) -> dict[str, Any]:
    """Write a site's set-up files into ``directory``; return their paths and the sites-file entry."""
    from raytune_fed.federation._certs import self_signed_certificate
    from raytune_fed.federation._policy import load_policy

    name = _check_name("the site's name", name or Path(directory).resolve().name)
    analyst = _check_name("the analyst's name", analyst)
    if analyst == "owner":
        raise ConfigError("the analyst credential cannot be named 'owner' (owner.token is the owner's)")
    files = ["policy.toml", f"{analyst}.token", "owner.token", "cert.pem", "key.pem"]
    out = _prepare(directory, files, port, host)
    policy = out / "policy.toml"
    policy.write_text(POLICY_TEMPLATE.format(name=name, seed=secrets.randbelow(2**31 - 1) + 1, analyst=analyst))
    load_policy(policy)  # the file written is one `site serve` accepts
    _secret(out / f"{analyst}.token")
    _secret(out / "owner.token")
    cert, key = self_signed_certificate(out, host, days=825)
    entry = (f'[sites.{name}]\nurl = "{_url(host, port)}"\ntoken_file = "tokens/{name}"      '
             f'# a copy of {analyst}.token\ncafile = "certs/{name}.pem"        # a copy of cert.pem')
    return {"name": name, "dir": out, "policy": policy, "token": out / f"{analyst}.token",
            "owner_token": out / "owner.token", "cert": cert, "key": key, "sites_entry": entry}


def run_site_init(args: argparse.Namespace) -> None:
    made = site_init(args.dir, name=args.name, analyst=args.analyst, host=args.host, port=args.port)
    d = made["dir"]
    print(f"site {made['name']!r} set up in {d}: policy.toml, {made['token'].name}, owner.token, cert.pem, key.pem")
    print(f"1. Read and edit {made['policy']} (budgets, roles, guard) before serving.")
    print("2. Serve the site's rows (a .csv/.parquet table with --target, or an .npz with X and y):")
    print(f"   raytune-fed site serve --policy {made['policy']} --data ROWS --target LABEL "
          f"--owner-token-file {made['owner_token']} --cert {made['cert']} --key {made['key']} "
          f"--host {args.host if args.host in ('127.0.0.1', 'localhost', '::1') else '0.0.0.0'} --port {args.port}")
    print(f"3. Give the analyst {made['token']} and {made['cert']} (privately); their sites file gets:")
    print(made["sites_entry"])


def party_init(directory: str, *, name: str | None = None, host: str = "127.0.0.1",
               port: int = 8443) -> dict[str, Any]:
    """Write a passive party's set-up files into ``directory``."""
    from raytune_fed.federation._certs import self_signed_certificate

    name = _check_name("the party's name", name or Path(directory).resolve().name)
    out = _prepare(directory, ["active.token", "owner.token", "cert.pem", "key.pem"], port, host)
    _secret(out / "active.token")
    _secret(out / "owner.token")
    cert, key = self_signed_certificate(out, host, days=825)
    return {"name": name, "dir": out, "token": out / "active.token", "owner_token": out / "owner.token",
            "cert": cert, "key": key, "url": _url(host, port)}


def run_party_init(args: argparse.Namespace) -> None:
    made = party_init(args.dir, name=args.name, host=args.host, port=args.port)
    print(f"party {made['name']!r} set up in {made['dir']}: active.token, owner.token, cert.pem, key.pem")
    print("1. Serve the party's columns (a .csv/.parquet table, or an .npz with X), one row per aligned id:")
    print(f"   raytune-fed party serve --name {made['name']} --data COLUMNS --token-file {made['token']} "
          f"--owner-token-file {made['owner_token']} --ledger {made['dir'] / (made['name'] + '.ledger.jsonl')} "
          f"--cert {made['cert']} --key {made['key']} --port {args.port}")
    print(f"2. Give the active party {made['token']} and {made['cert']} (privately); it reaches the party at "
          f"{made['url']} (HttpTransport(url, token, cafile=...)). The owner admits each training with "
          f"owner.token.")
