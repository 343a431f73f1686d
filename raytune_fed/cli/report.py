"""``raytune-fed report OUT``: rebuild the report page of a run, whichever workflow wrote it.

On a grid that is still running or stopped incomplete the page is built from its
``results.partial.parquet`` and says so ("partial: N of M cells; missing: ...")."""

from __future__ import annotations

import argparse

from raytune_fed.workflows._results import WORKFLOWS, recognise  # noqa: F401 (kept importable from here)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="rebuild the report page (index.html) of an RFMS, PU or CMOSB run",
                       description="Rebuild the report page of a results directory: index.html (figures embedded), "
                                   "index.md and the PNG figures, from DIR/results.parquet. The workflow that wrote "
                                   "DIR (rfms/demo, pu or cmosb) is recognised from its results. On a grid that is "
                                   "still running or stopped incomplete the page is built from "
                                   "DIR/results.partial.parquet and marked partial (cells done, cells missing).")
    p.add_argument("dir", help="a directory written by `raytune-fed rfms`, `demo`, `pu` or `cmosb`")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from raytune_fed._checks import check_output_dir
    from raytune_fed.workflows._results import partial_of, results_file

    workflow = recognise(args.dir)
    partial = partial_of(results_file(args.dir))
    check_output_dir(args.dir)  # the page goes beside the results: a read-only folder is one line, not a traceback
    if workflow == "rfms":
        from raytune_fed.workflows.rfms import write_report

        page = write_report(args.dir)
    elif workflow == "pu":
        from raytune_fed.workflows.pu import write_report as write_pu_report

        page = write_pu_report(args.dir)
    else:
        from raytune_fed.workflows.cmosb import write_report as write_cmosb_report

        page = write_cmosb_report(args.dir)
    what = workflow if partial is None else f"{workflow}, partial: {partial.n_done} of {partial.n_total} {partial.unit}"
    print(f"report ({what}): {page}")
