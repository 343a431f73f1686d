"""``raytune-fed report DIR``: rebuild the plots and report page of an RFMS results directory."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="rebuild the plots and report page from a results directory",
                       description="Rebuild PNG plots and index.md/index.html from DIR/results.parquet.")
    p.add_argument("dir", help="a directory written by `raytune-fed rfms` or `raytune-fed demo`")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from raytune_fed.workflows.rfms import write_report

    print(f"report: {write_report(args.dir)}")
