"""An RFMS grid from Python: start the sites as network services, run every cell against them, close them.

The dataset ``geo5_sim`` has five sites. Each cell picks an openbox (the analyst's own
site, where it trains), a lockbox (asked once, for the final evaluation) and three
curators (asked only for a model's loss). Here each site runs as its own
``raytune-fed site serve`` process with a random token, as a site owner would run it;
the cells talk to them only through sessions the sites issue.

Run: python examples/rfms_grid.py  (under a minute; starts a local Ray session to hold the openbox rows)
"""

import tempfile

import pandas as pd

from raytune_fed.runtime import connect
from raytune_fed.workflows.rfms import (
    RFMSSettings,
    build_grid,
    format_summary,
    grid_schedule,
    plan_sites,
    run_experiment,
    run_with_sites,
    start_sites,
    summarize,
)


def main():
    settings = RFMSSettings(dataset="geo5_sim", n_init=4, n_iter=2, n_folds=3, methods=("lso", "fso5", "fmo"))
    plan = plan_sites(settings)                       # the five sites, checked before anything starts
    cells = build_grid(settings, n_sites=len(plan.site_names), learners=["elastic_net"], n_reps=1, n_pairs=2,
                       site_names=plan.site_names)
    connect(num_cpus=2)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        # start: one service per site, each told the grid's schedule of units once
        with start_sites(plan, settings, grid_schedule(cells), sites="service", workdir=workdir) as sites:
            for cell in cells:
                cell_rows, info = run_with_sites(
                    cell, sites.handles,
                    lambda openbox, curators, lockbox: run_experiment(cell, openbox, curators, lockbox))  # noqa: B023
                print(f"cell openbox={plan.site_names[cell.openbox]} lockbox={plan.site_names[cell.lockbox]}: "
                      f"{info['n_ledger_queries']} curator queries in the sites' ledgers")
                rows += cell_rows
        # closed: the site processes have stopped here; their ledgers were under workdir
    frame = pd.DataFrame(rows)
    print(format_summary(summarize(frame)))
    return frame


if __name__ == "__main__":
    main()
