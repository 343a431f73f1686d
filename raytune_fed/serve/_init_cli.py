"""``raytune-fed site init DIR`` and ``raytune-fed party init DIR``: a site owner's set-up in one command.

``site init`` writes into ``DIR`` a commented policy file (every key of
:mod:`raytune_fed.federation._policy`, with a fresh seed; optional keys without a safe
default commented out), fresh tokens for one analyst credential and for the owner (mode
0600, from :mod:`secrets`), and a self-signed TLS certificate for the host the service will
listen on (:mod:`raytune_fed.serve._certs`).  It prints the ``site serve`` command and
the table to put in the analyst's sites file.  A site's defaults answer far less than a grid
asks: ``--for-grid PLAN`` sizes the policy for an analyst's grid from the plan ``raytune-fed
site plan`` wrote (:data:`PLAN_KEYS`: its approved schedule, answers, query budget and finals),
and ``--answers``, ``--lockbox-answers`` and ``--guard-k`` set those keys by hand.
``party init`` does the same for a passive
party (tokens, certificate, the ``party serve`` command; a party has no policy file).
Nothing is overwritten: a ``DIR`` that already holds one of the files is refused.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from raytune_fed.errors import ConfigError
from raytune_fed.federation._policy import CuratorPolicy, FinalPolicy, GuardPolicy, LimitsPolicy, LockboxPolicy, Policy

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
max_units = {max_units:<23} # largest schedule of units it accepts

[budget]                            # what the site answers in its whole life (all sessions, units, restarts)
{answers_line}
# per_analyst = 20                  # each analyst credential's share (default: all of answers)

[analysts.{analyst}]                 # the analyst credential this set-up made (add a table per analyst)
token_file = "{analyst}.token"       # its bearer token: give this file to the analyst, privately
# answers = 20                      # its share (default: [budget] per_analyst)

{schedule_block}

[curator]
inbag_fraction = 0.8                # share of its rows it scores queries on (the rest scores finals)
query_budget = {query_budget:<20} # curator queries over all sessions, answered or refused
mechanisms = ["exact", "thresholdout"]  # how it may answer: the exact loss, or through Thresholdout
finals_per_unit = {curator_finals:<17} # out-of-bag final evaluations per scheduled unit

[lockbox]
finals_per_unit = {lockbox_finals:<17} # final evaluations per scheduled unit (with an approved schedule)
{max_answers_line}

[final]
max_models = {max_models:<22} # models per final evaluation (each is charged one answer)

[thresholdout]                      # the RFMS paper's fso_th, run by the site
threshold = 0.02
sigma = 0.03
gamma = 0.0
# budget = 200                      # over-threshold answers in the site's life (default: unbounded)

[guard]
k = {guard_k:<31} # differencing guard: refuse models fewer than k rows apart, or with
                                    # fewer than k scored rows in a class (0 turns it off)

[limits]
seconds_per_query = 60.0            # CPU seconds a request may use: decoding, validation, scoring
max_request_bytes = 268435456       # largest request message
max_header_bytes = {max_header_bytes:<16} # largest JSON header of a message
sessions_per_unit = {sessions_per_unit:<15} # sessions each analyst credential may open per unit and role
"""


def add_site_init(sub: Any) -> None:
    p = sub.add_parser("init", help="set up a site: a commented policy, fresh tokens, a TLS certificate",
                       description="Write DIR/policy.toml (commented), DIR/<analyst>.token, DIR/owner.token and a "
                                   "self-signed certificate (DIR/cert.pem, DIR/key.pem), then print the serve "
                                   "command and the analyst's sites-file entry.")
    _common(p)
    p.add_argument("--name", default=None, help="the site's name (default: the directory's name)")
    p.add_argument("--analyst", default="analyst", help="name of the analyst credential (default: %(default)s)")
    p.add_argument("--for-grid", default=None, metavar="PLAN",
                   help="size the policy for an analyst's grid: the plan `raytune-fed site plan` wrote (its "
                        "approved schedule, answers, query budget, finals)")
    p.add_argument("--answers", type=int, default=None,
                   help="[budget] answers: losses the site computes in its whole life (default: the plan's, else "
                        "an eighth of its rows)")
    p.add_argument("--lockbox-answers", type=int, default=None,
                   help="[lockbox] max_answers: final evaluations as the lockbox in its life (default: "
                        "finals_per_unit per unit of the approved schedule, else 1)")
    p.add_argument("--guard-k", type=int, default=None,
                   help=f"[guard] k: refuse models fewer than K rows apart or with fewer than K scored rows in a "
                        f"class; 0 turns it off (default: {_DEFAULTS['guard_k']})")
    p.add_argument("--sites-file", default=None,
                   help="also add the site's entry to this analyst's sites file (created if missing), its token "
                        "and certificate named by paths relative to it: for trying the path on one machine")
    p.set_defaults(run=run_site_init)


_DEFAULTS = {"max_units": Policy.max_units, "query_budget": CuratorPolicy.query_budget,
             "curator_finals": CuratorPolicy.finals_per_unit, "lockbox_finals": LockboxPolicy.finals_per_unit,
             "max_models": FinalPolicy.max_models, "guard_k": GuardPolicy.k,
             "max_header_bytes": LimitsPolicy.max_header_bytes, "sessions_per_unit": LimitsPolicy.sessions_per_unit}
"""What a written policy says where neither a plan nor an option sets it: the policy's own defaults."""

PLAN_KEYS = {"max_units": None, "budget": ("answers",), "schedule": ("approved",),
             "curator": ("query_budget", "finals_per_unit"), "lockbox": ("finals_per_unit",),
             "final": ("max_models",), "limits": ("max_header_bytes", "sessions_per_unit")}
"""The policy keys a grid's plan (``raytune-fed site plan``) sizes: section -> keys (``None``: a top-level key)."""


def read_plan(path: str | os.PathLike) -> dict[str, Any]:
    """The policy values of a plan file written by ``raytune-fed site plan``, checked by ``Policy`` later."""
    import json

    shown = f"--for-grid {os.fspath(path)!r}"
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"{shown} is not a plan (not JSON: {exc})") from None
    policy = data.get("policy") if isinstance(data, dict) else None
    if not (isinstance(policy, dict) and set(policy) == set(PLAN_KEYS) and all(
            isinstance(policy[s], int) if keys is None else isinstance(policy[s], dict) and set(policy[s]) == set(keys)
            for s, keys in PLAN_KEYS.items())):
        raise ConfigError(f"{shown} is not a plan written by `raytune-fed site plan` (its 'policy' must hold "
                          f"exactly {sorted(PLAN_KEYS)}, with their keys)")
    return policy


def _policy_values(plan: dict[str, Any] | None, answers: int | None, lockbox_answers: int | None,
                   guard_k: int | None) -> dict[str, Any]:
    """What fills the template: the policy's defaults, then the plan, then the options."""
    for option, value in (("--answers", answers), ("--lockbox-answers", lockbox_answers), ("--guard-k", guard_k)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{option} must be an integer >= 0, got {value!r}")
    v: dict[str, int | str] = dict(_DEFAULTS)
    if plan is not None:
        v.update(max_units=plan["max_units"], query_budget=plan["curator"]["query_budget"],
                 curator_finals=plan["curator"]["finals_per_unit"], lockbox_finals=plan["lockbox"]["finals_per_unit"],
                 max_models=plan["final"]["max_models"], max_header_bytes=plan["limits"]["max_header_bytes"],
                 sessions_per_unit=plan["limits"]["sessions_per_unit"])
        answers = plan["budget"]["answers"] if answers is None else answers
    if guard_k is not None:
        v["guard_k"] = guard_k
    v["answers_line"] = ("# answers = 20                      # every loss it computes from its rows; default: an "
                         "eighth of its rows" if answers is None else
                         f"answers = {answers:<25} # every loss it computes from its rows, in its whole life")
    v["max_answers_line"] = ("# max_answers = 1                   # final evaluations in the site's life (default: 1 "
                             "without an approved schedule)" if lockbox_answers is None else
                             f"max_answers = {lockbox_answers:<21} # final evaluations as the lockbox in its life")
    v["schedule_block"] = (
        '# [schedule]\n# approved = "<sha-256 digest>"      # the one schedule the owner approves (then the lockbox '
        'may answer\n                                    # finals_per_unit per unit of it, and no other schedule is '
        'accepted)' if plan is None else
        f'[schedule]                          # the one schedule the owner approves: the lockbox answers\n'
        f'approved = "{plan["schedule"]["approved"]}"\n'
        f'                                    # finals_per_unit per unit of it, and no other schedule is accepted')
    return v


def _check_sites_file(path: str, name: str) -> None:
    """The analyst's sites file is TOML (or not there yet) and does not list site ``name`` yet."""
    import tomllib

    try:
        listed = tomllib.loads(Path(path).read_text() if Path(path).is_file() else "").get("sites", {})
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--sites-file {path!r} cannot be read as TOML ({exc})") from None
    if name in listed:
        raise ConfigError(f"--sites-file {path!r} already lists site {name!r}; nothing was written")


def _add_to_sites_file(path: str, name: str, url: str, token: Path, cert: Path) -> None:
    """Append the site's ``[sites.<name>]`` table to an analyst's sites file (paths relative to it)."""
    sites = Path(path)
    text = sites.read_text() if sites.is_file() else ""
    rel = lambda p: os.path.relpath(p.resolve(), sites.resolve().parent)  # noqa: E731
    sites.parent.mkdir(parents=True, exist_ok=True)
    with sites.open("a") as f:
        f.write(f'{"" if not text or text.endswith(chr(10)) else chr(10)}[sites.{name}]\nurl = "{url}"\n'
                f'token_file = "{rel(token)}"\ncafile = "{rel(cert)}"\n')


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


def _check_dir(directory: str) -> None:
    """DIR names a directory: an empty name would write into the current one."""
    if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory).strip():
        raise ConfigError(f"DIR must name the directory to set up, got {directory!r}")


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


@contextmanager
def _all_or_nothing(out: Path, files: list[str]) -> Iterator[None]:
    """The set-up files are written together: if one cannot be (a full disk), none is kept."""
    try:
        yield
    except OSError as exc:
        from raytune_fed.store import describe_os_error

        for f in files:
            (out / f).unlink(missing_ok=True)
        raise ConfigError(f"cannot write the set-up files into {os.fspath(out)!r}: {describe_os_error(exc)}; "
                          f"none was kept") from None


def _secret(path: Path) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(secrets.token_urlsafe(32) + "\n")


def _url(host: str, port: int) -> str:
    return f"https://{'[' + host + ']' if ':' in host else host}:{port}"


def site_init(directory: str, *, name: str | None = None, analyst: str = "analyst", host: str = "127.0.0.1",
              port: int = 8443, for_grid: str | os.PathLike | None = None, answers: int | None = None,
              lockbox_answers: int | None = None, guard_k: int | None = None,
              sites_file: str | None = None) -> dict[str, Any]:
    """Write a site's set-up files into ``directory``; return their paths and the sites-file entry.

    ``for_grid``: a plan of ``raytune-fed site plan`` sizes the policy for that grid; ``answers``,
    ``lockbox_answers`` and ``guard_k`` set ``[budget] answers``, ``[lockbox] max_answers`` and
    ``[guard] k`` (over the plan's); ``sites_file``: also list the site in that analyst's sites file.
    """
    from raytune_fed.federation import load_policy
    from raytune_fed.serve._certs import self_signed_certificate

    _check_dir(directory)
    name = _check_name("the site's name", name or Path(directory).resolve().name)
    analyst = _check_name("the analyst's name", analyst)
    if analyst == "owner":
        raise ConfigError("the analyst credential cannot be named 'owner' (owner.token is the owner's)")
    values = _policy_values(None if for_grid is None else read_plan(for_grid), answers, lockbox_answers, guard_k)
    if sites_file is not None:
        _check_sites_file(sites_file, name)
    files = ["policy.toml", f"{analyst}.token", "owner.token", "cert.pem", "key.pem"]
    out = _prepare(directory, files, port, host)
    policy = out / "policy.toml"
    with _all_or_nothing(out, files):
        policy.write_text(POLICY_TEMPLATE.format(name=name, seed=secrets.randbelow(2**31 - 1) + 1, analyst=analyst,
                                                 **values))
        load_policy(policy)  # the file written is one `site serve` accepts
        _secret(out / f"{analyst}.token")
        _secret(out / "owner.token")
        cert, key = self_signed_certificate(out, host, days=825)
    if sites_file is not None:
        _add_to_sites_file(sites_file, name, _url(host, port), out / f"{analyst}.token", cert)
    entry = (f'[sites.{name}]\nurl = "{_url(host, port)}"\ntoken_file = "tokens/{name}"      '
             f'# a copy of {analyst}.token\ncafile = "certs/{name}.pem"        # a copy of cert.pem')
    return {"name": name, "dir": out, "policy": policy, "token": out / f"{analyst}.token",
            "owner_token": out / "owner.token", "cert": cert, "key": key, "sites_entry": entry}


def run_site_init(args: argparse.Namespace) -> None:
    made = site_init(args.dir, name=args.name, analyst=args.analyst, host=args.host, port=args.port,
                     for_grid=args.for_grid, answers=args.answers, lockbox_answers=args.lockbox_answers,
                     guard_k=args.guard_k, sites_file=args.sites_file)
    d = made["dir"]
    print(f"site {made['name']!r} set up in {d}: policy.toml, {made['token'].name}, owner.token, cert.pem, key.pem")
    sized = f"sized for the grid of {args.for_grid}" if args.for_grid else "not sized for a grid (see --for-grid)"
    print(f"1. Read and edit {made['policy']} (budgets, roles, guard; {sized}) before serving.")
    print("2. Serve the site's rows (a .csv/.parquet table with --target, or an .npz with X and y):")
    print(f"   raytune-fed site serve --policy {made['policy']} --data ROWS --target LABEL "
          f"--owner-token-file {made['owner_token']} --cert {made['cert']} --key {made['key']} "
          f"--host {args.host if args.host in ('127.0.0.1', 'localhost', '::1') else '0.0.0.0'} --port {args.port}")
    print(f"3. Give the analyst {made['token']} and {made['cert']} (privately); their sites file gets:")
    print(made["sites_entry"])
    if args.sites_file:
        print(f"   (added to {args.sites_file}, naming {made['token'].name} and cert.pem where they are)")


def party_init(directory: str, *, name: str | None = None, host: str = "127.0.0.1",
               port: int = 8443) -> dict[str, Any]:
    """Write a passive party's set-up files into ``directory``."""
    from raytune_fed.serve._certs import self_signed_certificate

    _check_dir(directory)
    name = _check_name("the party's name", name or Path(directory).resolve().name)
    files = ["active.token", "owner.token", "cert.pem", "key.pem"]
    out = _prepare(directory, files, port, host)
    with _all_or_nothing(out, files):
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
          f"{made['url']} (raytune_fed.serve.HttpTransport(url, token, cafile=...)). The owner admits each "
          f"training with owner.token.")
