"""``raytune-fed party serve``: a SecureBoost passive party as an authenticated network service.

The party's owner runs this on the party's machine with its feature columns and two
secrets: the active party's bearer token (``--token-file``) and its own credential
(``--owner-token-file``), with which it admits each training (``new_session``) and reads
a session's view.  The columns come from a ``.csv``/``.csv.gz``/``.parquet`` table (every
column, or ``--columns``; no labels: a passive party holds none) or an ``.npz`` with an
array ``X`` (read with ``allow_pickle=False``); rows are the aligned instance ids, in
order.  The service answers ``POST /call`` with :meth:`PassiveParty.call
<raytune_fed.federation.Party.call>`, so it refuses exactly what the object refuses.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from raytune_fed.serve._serve_cli import add_listen_arguments, check_listen_arguments, serve_until_stopped

MAX_SESSIONS = 10 ** 9


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    party = subparsers.add_parser("party", help="run a vertical-learning party",
                                  description="Run a SecureBoost passive party under its owner's control.")
    sub = party.add_subparsers(dest="party_command", required=True, metavar="PARTY_COMMAND")
    from raytune_fed.serve._init_cli import add_party_init

    add_party_init(sub)
    s = sub.add_parser("serve", help="serve a passive party over HTTP(S) with a bearer token",
                       description="Serve a SecureBoost passive party as an authenticated network service "
                                   "(POST /call).")
    s.add_argument("--data", required=True, help="the party's columns: .csv/.csv.gz/.parquet or .npz (array X)")
    s.add_argument("--columns", default=None, help="comma-separated columns of a table file (default: all)")
    s.add_argument("--name", default="passive", help="the party's name (default: %(default)s)")
    s.add_argument("--token-file", required=True, help="file holding the active party's bearer token")
    s.add_argument("--owner-token-file", required=True, help="file holding the owner's credential")
    s.add_argument("--ledger", default=None, help="append-only ledger file (kept across restarts)")
    s.add_argument("--max-sessions", type=int, default=None, help="cap on the sessions the party ever issues")
    s.add_argument("--max-bins", type=int, default=32,
                   help="the most bins per feature a training may ask for (default: %(default)s)")
    s.add_argument("--bin-privacy", type=float, default=1.0,
                   help="epsilon of the geometric mechanism that moves every row's bin once before any answer "
                        "(default: %(default)s; 0 switches it off)")
    from raytune_fed.federation.parties._passive_party import (
        MAX_TREES_PER_REQUEST,
        MAX_TREES_PER_SESSION,
        SECONDS_PER_REQUEST,
    )

    s.add_argument("--max-trees", type=int, default=MAX_TREES_PER_SESSION,
                   help="the most trees one training (session) may grow (default: %(default)s)")
    s.add_argument("--max-trees-per-request", type=int, default=MAX_TREES_PER_REQUEST,
                   help="the most trees one request may name: a round's trees, one per class (default: %(default)s)")
    s.add_argument("--seconds-per-request", type=float, default=SECONDS_PER_REQUEST,
                   help="CPU seconds one request may use (default: %(default)s)")
    s.add_argument("--max-request-bytes", type=int, default=1 << 30,
                   help="the largest request message read (default: %(default)s)")
    s.add_argument("--seed", type=int, default=None,
                   help="seed of the masks, candidate orders and moved bins (default: drawn from the owner "
                        "credential, so they stay secret and the same across restarts)")
    add_listen_arguments(s)
    return s


def load_party_features(path: str, columns: str | None) -> Any:
    """The feature block of ``path`` (``columns``: comma-separated names, tables only)."""
    import numpy as np

    from raytune_fed.data._files import load_features, read_npz
    from raytune_fed.errors import DatasetError

    if path.lower().endswith(".npz"):
        if columns is not None:
            raise DatasetError(f"--columns names columns of a table; {os.fspath(path)!r} is an .npz (array X)")
        (X,) = read_npz(path, ("X",))
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1 or X.dtype.kind not in "iuf":
            raise DatasetError(f"{os.fspath(path)!r}: X must be a numeric 2-D array with >= 2 rows and >= 1 "
                               f"column, got {X.dtype} of shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise DatasetError(f"{os.fspath(path)!r}: X holds {int(np.sum(~np.isfinite(X)))} missing or infinite "
                               f"values")
        return X.astype(np.float64)
    names = None if columns is None else [c.strip() for c in columns.split(",")]
    return load_features(path, columns=names)


def run(args: argparse.Namespace) -> None:
    from raytune_fed._checks import MAX_SEED, check_float, check_int, check_new_file
    from raytune_fed.federation.parties import PassiveParty
    from raytune_fed.serve._clients import read_token

    if args.max_sessions is not None:
        check_int("--max-sessions", args.max_sessions, 1, MAX_SESSIONS)
    if args.seed is not None:
        check_int("--seed", args.seed, 0, MAX_SEED)
    check_int("--max-bins", args.max_bins, 2, 256)
    check_float("--bin-privacy", args.bin_privacy, 0.0)
    check_int("--max-trees", args.max_trees, 1, 1 << 20)
    check_int("--max-trees-per-request", args.max_trees_per_request, 1, 1 << 13)
    if not check_float("--seconds-per-request", args.seconds_per_request, 0.0) > 0:
        from raytune_fed.errors import ConfigError

        raise ConfigError(f"--seconds-per-request must be > 0, got {args.seconds_per_request}")
    check_int("--max-request-bytes", args.max_request_bytes, 1 << 10, 1 << 31)
    check_listen_arguments(args)
    if args.ledger is not None:
        check_new_file("--ledger", args.ledger)
    token = read_token(args.token_file, "token")
    owner = read_token(args.owner_token_file, "owner token")
    if owner == token:
        from raytune_fed.errors import ConfigError

        raise ConfigError("the owner's credential must differ from the active party's token")
    X = load_party_features(args.data, args.columns)
    from raytune_fed.federation.parties._passive_party import seed_of_owner

    seed = args.seed if args.seed is not None else seed_of_owner(owner)
    party = PassiveParty(X, name=args.name, seed=seed, max_sessions=args.max_sessions, ledger=args.ledger,
                         owner_secret=owner, max_bins=args.max_bins,
                         bin_privacy=args.bin_privacy if args.bin_privacy > 0 else None, max_trees=args.max_trees,
                         max_trees_per_request=args.max_trees_per_request,
                         seconds_per_request=args.seconds_per_request, max_request_bytes=args.max_request_bytes)
    serve_until_stopped(party, token, args, f"party {args.name!r} serving on {{url}} ({X.shape[0]} rows, "
                                            f"{X.shape[1]} features)", what=f"party {args.name!r}", ledger=args.ledger)
