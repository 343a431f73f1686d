"""``raytune-fed datasets``: the embedded datasets."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list the embedded datasets (offline)",
                       description="List the embedded datasets: name, rows, features, classes, sites, source.")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from raytune_fed.data import list_datasets

    infos = list_datasets()
    if args.json:
        print(json.dumps([i.__dict__ for i in infos], indent=2))
        return
    print(f"{'name':<22} {'rows':>7} {'features':>8} {'classes':>7} {'sites':>5}  source")
    for i in infos:
        print(f"{i.name:<22} {i.rows:>7} {i.features:>8} {i.classes:>7} {i.sites:>5}  {i.source}")
