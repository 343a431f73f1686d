"""``raytune-fed site``: a restricted data site's commands.

``site serve`` and ``site init`` live with the network stack (:mod:`raytune_fed.serve._serve_cli`,
:mod:`raytune_fed.serve._init_cli`); this module registers them and the two commands that
read an analyst's grid, which sit above the sites: ``site plan FILE rfms ...`` (the grid's
schedule digest and the policy values that let a site answer the whole grid, for ``site init
--for-grid``) and ``site rows DIR rfms ...`` (each site's rows of the grid's split, for ``site
serve --data``).  Both take the ``rfms`` command itself, so they describe exactly the grid it runs.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    from raytune_fed.serve import _serve_cli

    serve = _serve_cli.add_parser(sub)
    serve.set_defaults(run=_serve_cli.run)
    commands = next(a for a in sub.choices["site"]._actions if isinstance(a, argparse._SubParsersAction))
    plan = commands.add_parser(
        "plan", help="the schedule digest and policy sizes of an analyst's rfms grid (for site init --for-grid)",
        description="Print the schedule digest of the grid `raytune-fed rfms ...` runs and write FILE: the policy "
                    "values (answers, query budget, finals, approved schedule) with which each of its sites "
                    "answers the whole grid. Give it to the site owners: `site init DIR --for-grid FILE`.")
    plan.add_argument("file", help="the plan to write (JSON)")
    plan.add_argument("grid", nargs=argparse.REMAINDER, help="the grid's command: rfms and its options")
    plan.set_defaults(run=run_plan)
    rows = commands.add_parser(
        "rows", help="write each site's rows of an rfms grid's split as DIR/<site>.npz (for site serve --data)",
        description="Write DIR/<site>.npz (arrays X and y) for every site of the dataset's split as `raytune-fed "
                    "rfms ...` makes it: the rows `site serve --data` serves, to try the path on one machine.")
    rows.add_argument("dir", help="directory to write (must not hold these files yet)")
    rows.add_argument("grid", nargs=argparse.REMAINDER, help="the grid's command: rfms and its options")
    rows.set_defaults(run=run_rows)


def _grid(argv: list[str]) -> Any:
    """The parsed ``rfms`` command (parsed by the real parser, so its options and checks are rfms's own)."""
    from raytune_fed.cli import rfms
    from raytune_fed.cli._options import Parser
    from raytune_fed.errors import ConfigError

    if not argv or argv[0] != "rfms":
        raise ConfigError(f"give the grid's command after the file: rfms and its options, got {' '.join(argv)!r}")
    parser = Parser(prog="raytune-fed")
    rfms.register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser.parse_args(argv)


def run_plan(args: argparse.Namespace) -> None:
    import json
    import shlex
    from pathlib import Path

    from raytune_fed._checks import check_new_file
    from raytune_fed.cli.rfms import rfms_settings
    from raytune_fed.workflows.rfms._site_plan import grid_site_plan

    check_new_file("FILE", args.file)
    grid = _grid(args.grid)
    plan = grid_site_plan(rfms_settings(grid), learners=grid.learners, n_reps=grid.reps, n_pairs=grid.pairs,
                          max_retries=grid.max_retries)
    Path(args.file).write_text(json.dumps({"grid": "raytune-fed " + shlex.join(args.grid), **plan}, indent=1) + "\n")
    p = plan["policy"]
    print(f"schedule digest: {plan['digest']}")
    print(f"{plan['n_units']} units over the sites {', '.join(plan['sites'])}; each site answers at most "
          f"{p['budget']['answers']} losses ({p['curator']['query_budget']} curator queries, finals of at most "
          f"{p['final']['max_models']} models, {p['lockbox']['finals_per_unit']} per unit and role)")
    print(f"plan: {args.file} (each owner: raytune-fed site init DIR --for-grid {args.file})")


def run_rows(args: argparse.Namespace) -> None:
    from raytune_fed.cli.rfms import rfms_settings
    from raytune_fed.workflows.rfms._site_plan import export_site_rows

    paths = export_site_rows(rfms_settings(_grid(args.grid)), args.dir)
    for name, path in paths.items():
        print(f"{name}: {path}")
