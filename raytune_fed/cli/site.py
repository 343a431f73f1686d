"""``raytune-fed site serve``: a restricted data site as an authenticated network service.

The parser and the command live with the sites (:mod:`raytune_fed.federation._serve_cli`);
this module only registers them.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from raytune_fed.federation import _serve_cli

    serve = _serve_cli.add_parser(sub)
    serve.set_defaults(run=_serve_cli.run)
