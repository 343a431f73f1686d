"""``raytune-fed rfms`` (an RFMS grid) and ``raytune-fed demo`` (a reduced one)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypedDict

from raytune_fed.cli._options import (
    GRID_EPILOG,
    HelpFormatter,
    add_grid_options,
    add_preset_option,
    csv,
    grid_options,
    preset_epilog,
)
from raytune_fed.simulation import SPLIT_METHODS


class _Demo(TypedDict):
    dataset: str
    split: str
    learners: tuple[str, ...]
    n_pairs: int
    n_reps: int
    n_init: int
    n_iter: int


DEMO: _Demo = {"dataset": "geo5_sim", "split": "natural", "learners": ("elastic_net",), "n_pairs": 2, "n_reps": 1,
               "n_init": 20, "n_iter": 40}


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="a reduced RFMS grid on the embedded multi-site dataset",
                          description="Run a reduced RFMS grid (2 openbox/lockbox pairs, 1 replication, elastic "
                                      "net, all methods) on the embedded geo5_sim sites, then write the report.",
                          epilog=GRID_EPILOG, formatter_class=HelpFormatter)
    add_grid_options(demo, "results/demo")
    _add_site_options(demo)
    demo.set_defaults(run=run_demo)

    r = sub.add_parser("rfms", help="run (or resume) an RFMS experiment grid",
                       description="Restrictive federated model selection: every (openbox, lockbox) pair x "
                                   "replications x learners, all methods, scored by dominated hypervolume.",
                       epilog=preset_epilog(GRID_EPILOG, "rfms"), formatter_class=HelpFormatter)
    add_preset_option(r, "rfms")
    r.add_argument("--dataset", default="geo5_sim", help="dataset name, openml:<name|id>, or a CSV/Parquet path")
    r.add_argument("--target", default=None, help="target column (for CSV/Parquet files)")
    r.add_argument("--site-column", default=None, help="site column (for CSV/Parquet files)")
    r.add_argument("--split", default="natural", choices=SPLIT_METHODS,
                   help="how sites are formed (default: %(default)s)")
    r.add_argument("--pca-variance", type=float, default=0.1, help="share of variance PCA keeps for DRC")
    r.add_argument("--learners", type=csv, default=("elastic_net",),
                   help="comma-separated, among {learners} (default: elastic_net)")
    r.add_argument("--methods", type=csv, default=None,
                   help="comma-separated, among {methods} (default: all; see the README's glossary)")
    r.add_argument("--reps", type=int, default=10, help="replications (default: %(default)s)")
    r.add_argument("--pairs", type=int, default=None, help="use only this many of the openbox/lockbox pairs")
    r.add_argument("--n-init", type=int, default=20, help="initial design size (default: %(default)s)")
    r.add_argument("--n-iter", type=int, default=40, help="proposals after the design (default: %(default)s)")
    r.add_argument("--n-folds", type=int, default=10, help="openbox cross-validation folds")
    r.add_argument("--thresholdout-budget", type=int, default=None, help="enforce a Thresholdout budget")
    r.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    r.add_argument("--no-report", action="store_true", help="skip the plots and report page")
    add_grid_options(r, "results/rfms")
    _add_site_options(r)
    r.set_defaults(run=run_rfms)


def _add_site_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--guard-k", type=int, default=0,
                   help="differencing guard of the simulated sites: refuse models fewer than K rows apart or with "
                        "fewer than K rows in a class (0 turns it off; default: %(default)s)")
    p.add_argument("--sites", default="actor", metavar="MODE|FILE",
                   help="where the data sites run: 'local' (in this process, cells one after another, no Ray), "
                        "'actor' (Ray actors), 'service' (local authenticated network services), or a .toml/.json "
                        "sites file listing running sites by URL (default: %(default)s)")


def run_demo(args: argparse.Namespace) -> None:
    from raytune_fed.workflows.rfms import RFMSSettings

    settings = RFMSSettings(dataset=DEMO["dataset"], split=DEMO["split"], n_init=DEMO["n_init"],
                            n_iter=DEMO["n_iter"], guard_k=args.guard_k)
    _run(args, settings, DEMO["learners"], DEMO["n_reps"], DEMO["n_pairs"], report=True)


def rfms_settings(args: argparse.Namespace):
    """The grid's settings from parsed ``rfms`` arguments (also read by ``site plan`` and ``site rows``)."""
    from raytune_fed.workflows.rfms import RFMSSettings

    methods = RFMSSettings.methods if args.methods is None else tuple(args.methods)  # the class default if none
    return RFMSSettings(dataset=args.dataset, target=args.target, site_column=args.site_column,
                        split=args.split, pca_variance=args.pca_variance, n_init=args.n_init,
                        n_iter=args.n_iter, n_folds=args.n_folds, seed=args.seed,
                        thresholdout_budget=args.thresholdout_budget, guard_k=args.guard_k, methods=methods)


def run_rfms(args: argparse.Namespace) -> None:
    _run(args, rfms_settings(args), args.learners, args.reps, args.pairs, report=not args.no_report)


def _run(args: argparse.Namespace, settings, learners, n_reps, n_pairs, *, report: bool) -> None:
    from raytune_fed.workflows.rfms import format_summary, run_grid, summarize, write_report
    from raytune_fed.workflows.rfms._refusals import EmptyResultError

    empty = None
    try:
        frame = run_grid(settings, learners=learners, n_reps=n_reps, n_pairs=n_pairs, sites=args.sites,
                         **grid_options(args))
    except EmptyResultError as exc:  # the rows are written: show them and the report, then end non-zero
        frame, empty = exc.frame, exc
    print(format_summary(summarize(frame)))
    if report:
        print(f"report: {write_report(args.out, settings, command=args.command_line)}")
    print(f"results: {Path(args.out) / 'results.parquet'}, {Path(args.out) / 'summary.json'}")
    if empty is not None:
        raise empty
