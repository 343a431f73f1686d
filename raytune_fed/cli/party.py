"""``raytune-fed party serve``: a SecureBoost passive party as an authenticated network service.

The parser and the command live with the network stack
(:mod:`raytune_fed.serve._party_cli`); this module only registers them.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from raytune_fed.serve import _party_cli

    serve = _party_cli.add_parser(sub)
    serve.set_defaults(run=_party_cli.run)
