"""``raytune-fed party serve``: a SecureBoost passive party as an authenticated network service.

The parser and the command live with the parties
(:mod:`raytune_fed.federation.parties._serve_cli`); this module only registers them.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from raytune_fed.federation.parties import _serve_cli

    serve = _serve_cli.add_parser(sub)
    serve.set_defaults(run=_serve_cli.run)
