"""The ``raytune-fed`` command line.

Every error we recognise is printed as one line, ``raytune-fed: error: ...``, with exit
code 2 (argparse's usage errors use the same code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from raytune_fed.errors import RaytuneFedError

DEMO = {"dataset": "geo5_sim", "split": "natural", "learners": ("elastic_net",), "pairs": 2, "reps": 1,
        "n_init": 20, "n_iter": 40}


def _csv(text: str) -> tuple[str, ...]:
    items = tuple(t.strip() for t in text.split(",") if t.strip())
    if not items:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _parser() -> argparse.ArgumentParser:
    from raytune_fed import __version__

    p = argparse.ArgumentParser(prog="raytune-fed", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"raytune-fed {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("datasets", help="list the embedded datasets (offline)",
                       description="List the embedded datasets: name, rows, features, classes, sites, source.")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")

    demo = sub.add_parser("demo", help="a reduced RFMS grid on the embedded multi-site dataset",
                          description="Run a reduced RFMS grid (2 openbox/lockbox pairs, 1 replication, elastic "
                                      "net, all methods) on the embedded geo5_sim sites, then write the report.")
    demo.add_argument("--out", default="results/demo", help="output directory (default: %(default)s)")
    _ray_args(demo)

    r = sub.add_parser("rfms", help="run (or resume) an RFMS experiment grid",
                       description="Restrictive federated model selection: every (openbox, lockbox) pair x "
                                   "replications x learners, all methods, scored by dominated hypervolume.")
    r.add_argument("--dataset", default="geo5_sim", help="dataset name, openml:<name|id>, or a CSV/Parquet path")
    r.add_argument("--target", default=None, help="target column (for CSV/Parquet files)")
    r.add_argument("--site-column", default=None, help="site column (for CSV/Parquet files)")
    r.add_argument("--split", default="natural", choices=("natural", "srs", "drc"),
                   help="how sites are formed (default: %(default)s)")
    r.add_argument("--pca-variance", type=float, default=0.1, help="share of variance PCA keeps for DRC")
    r.add_argument("--learners", type=_csv, default=("elastic_net",), help="comma-separated learner names")
    r.add_argument("--methods", type=_csv, default=("lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo"),
                   help="comma-separated method names")
    r.add_argument("--reps", type=int, default=10, help="replications (default: %(default)s)")
    r.add_argument("--pairs", type=int, default=None, help="use only this many of the openbox/lockbox pairs")
    r.add_argument("--n-init", type=int, default=20, help="initial design size (default: %(default)s)")
    r.add_argument("--n-iter", type=int, default=40, help="proposals after the design (default: %(default)s)")
    r.add_argument("--n-folds", type=int, default=10, help="openbox cross-validation folds")
    r.add_argument("--thresholdout-budget", type=int, default=None, help="enforce a Thresholdout budget")
    r.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    r.add_argument("--out", default="results/rfms", help="output directory (default: %(default)s)")
    r.add_argument("--no-report", action="store_true", help="skip the plots and report page")
    _ray_args(r)

    rep = sub.add_parser("report", help="rebuild the plots and report page from a results directory",
                         description="Rebuild PNG plots and index.md/index.html from DIR/results.parquet.")
    rep.add_argument("dir", help="a directory written by `raytune-fed rfms` or `raytune-fed demo`")
    from raytune_fed.federation import _serve_cli
    _serve_cli.add_parser(sub)
    return p


def _ray_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=None,
                   help="Ray cluster address ('auto' inside a cluster); default: a local session or $RAY_ADDRESS")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local session (default: all)")


def _cmd_datasets(args: argparse.Namespace) -> None:
    import json

    from raytune_fed.data import list_datasets

    infos = list_datasets()
    if args.json:
        print(json.dumps([i.__dict__ for i in infos], indent=2))
        return
    print(f"{'name':<22} {'rows':>7} {'features':>8} {'classes':>7} {'sites':>5}  source")
    for i in infos:
        print(f"{i.name:<22} {i.rows:>7} {i.features:>8} {i.classes:>7} {i.sites:>5}  {i.source}")


def _cmd_rfms(args: argparse.Namespace, *, demo: bool = False) -> None:
    from raytune_fed.workflows.rfms import RFMSSettings, format_summary, run_grid, summarize

    if demo:
        conf = dict(DEMO)
        settings = RFMSSettings(dataset=conf["dataset"], split=conf["split"], n_init=conf["n_init"],
                                n_iter=conf["n_iter"])
        learners, reps, pairs, report = conf["learners"], conf["reps"], conf["pairs"], True
    else:
        settings = RFMSSettings(dataset=args.dataset, target=args.target, site_column=args.site_column,
                                split=args.split, pca_variance=args.pca_variance,
                                n_init=args.n_init, n_iter=args.n_iter, n_folds=args.n_folds, seed=args.seed,
                                thresholdout_budget=args.thresholdout_budget, methods=tuple(args.methods))
        learners, reps, pairs, report = args.learners, args.reps, args.pairs, not args.no_report
    frame = run_grid(settings, learners=learners, reps=reps, pairs=pairs, out=args.out, address=args.address,
                     num_cpus=args.num_cpus)
    print(format_summary(summarize(frame)))
    if report:
        from raytune_fed.workflows.rfms import write_report

        page = write_report(args.out, settings)
        print(f"report: {page}")
    print(f"results: {Path(args.out) / 'results.parquet'}, {Path(args.out) / 'summary.json'}")


def _cmd_report(args: argparse.Namespace) -> None:
    from raytune_fed.workflows.rfms import write_report

    print(f"report: {write_report(args.dir)}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "datasets":
            _cmd_datasets(args)
        elif args.command == "demo":
            _cmd_rfms(args, demo=True)
        elif args.command == "rfms":
            _cmd_rfms(args)
        elif args.command == "report":
            _cmd_report(args)
        elif args.command == "site":
            from raytune_fed.federation import _serve_cli
            _serve_cli.run(args)
    except RaytuneFedError as exc:
        print(f"raytune-fed: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("raytune-fed: interrupted; finished units are kept and a rerun resumes", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
