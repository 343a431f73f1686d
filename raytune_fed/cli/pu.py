"""``raytune-fed pu``: a PU model-selection grid (ODE and its baselines), its results and report page."""

from __future__ import annotations

import argparse
from pathlib import Path

from raytune_fed.cli._options import GRID_EPILOG, add_grid_options, add_preset_option, csv, grid_options, preset_epilog
from raytune_fed.cli._stderr import quiet_optuna


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(t) for t in csv(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pu", help="run (or resume) a PU model-selection grid (ODE and baselines)",
                       description="Positive-unlabelled model selection (ODE, Wei et al. 2022): every dataset x "
                                   "label frequency c x method x replication. Writes results.parquet, summary.json "
                                   "and the report page (index.html, index.md) with the paper's Tables 2 and 6 "
                                   "(4 and 5 when the grid runs several schedules or --compare-control-variate) and "
                                   "Figures 3-5.",
                       epilog=preset_epilog(GRID_EPILOG, "pu"), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_preset_option(p, "pu")
    p.add_argument("--dataset", type=csv, default=("twonorm",),
                   help="comma-separated dataset names, openml:<name|id>, or CSV/Parquet paths (default: twonorm)")
    p.add_argument("--target", default=None, help="target column (for CSV/Parquet files)")
    p.add_argument("--positive", default=None, metavar="NAME",
                   help="the positive class of a multi-class dataset, one against the rest (default: the "
                        "largest class of satimage and texture; needed for any other multi-class dataset)")
    p.add_argument("--c", type=_floats, default=(0.01,), help="label frequencies in (0, 1] (default: 0.01)")
    p.add_argument("--methods", type=csv, default=("ode", "upu", "nnpu", "wsvm", "supervised"),
                   help="comma-separated: ode, upu, nnpu, wsvm, supervised (default: all)")
    p.add_argument("--evaluator", type=csv, default=("ipm",),
                   help="ODE's evaluator(s): ipm, auc (comma-separated; default: ipm)")
    p.add_argument("--schedule", type=csv, default=("selfpaced",),
                   help="ODE's schedule(s): sh, log, exp, linear, selfpaced (default: selfpaced)")
    p.add_argument("--control-variate", action=argparse.BooleanOptionalAction, default=True,
                   help="ODE with the control variate (default: on)")
    p.add_argument("--cv-reading", default="normalised",
                   help="the control variate as shipped (normalised: eq. 13's mean of 1 enforced, eta shrunk, off "
                        "with few labelled rows) or as the paper writes it (odds)")
    p.add_argument("--compare-control-variate", action=argparse.BooleanOptionalAction, default=False,
                   help="run ODE both with and without the control variate (Table 5; default: off)")
    p.add_argument("--budget-samples", type=int, default=None,
                   help="ODE's sample budget B in rows (default: --budget-factor x N)")
    p.add_argument("--budget-factor", type=float, default=1.0,
                   help="B = this x N, N the rows of the PU data (default: %(default)s, the paper's B = N)")
    p.add_argument("--rung-sampling", default="balanced",
                   help="the rows a rung trains on: labelled and unlabelled rows alternate until the labelled run out "
                        "(balanced, default), each prefix holds the labelled share of the training rows "
                        "(proportional), or a uniformly random prefix (uniform)")
    p.add_argument("--budget-seconds", type=float, default=None, help="ODE's training-time budget B' (default: none)")
    p.add_argument("--asynchronous", action=argparse.BooleanOptionalAction, default=False,
                   help="ODE's ASHA-like asynchronous halving (default: off)")
    p.add_argument("--reps", type=int, default=10, help="replications (default: %(default)s, the paper's count)")
    p.add_argument("--supervised-trials", type=int, default=30, help="TPE trials of the supervised baseline")
    p.add_argument("--baseline-configs", type=int, default=None,
                   help="thin the uPU/nnPU baselines to this many configurations (reduced runs; default: all)")
    p.add_argument("--prior", default="tice",
                   help="class prior for uPU/nnPU training and the baselines' risks: TIcE's estimate (default) or "
                        "the split's true prior (an oracle, for diagnosis)")
    p.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    p.add_argument("--no-report", action="store_true", help="skip the figures and report page")
    add_grid_options(p, "results/pu")
    p.set_defaults(run=run)


def pu_settings(args: argparse.Namespace):
    """The grid's settings from parsed ``pu`` arguments (checked when built)."""
    from raytune_fed.workflows.pu import PUGridSettings

    cvs = (True, False) if args.compare_control_variate else (args.control_variate,)
    return PUGridSettings(datasets=args.dataset, cs=args.c, methods=args.methods, evaluators=args.evaluator,
                          schedules=args.schedule, control_variates=cvs, cv_reading=args.cv_reading,
                          budget_samples=args.budget_samples,
                          budget_factor=args.budget_factor, rung_sampling=args.rung_sampling,
                          budget_seconds=args.budget_seconds, asynchronous=args.asynchronous, n_reps=args.reps,
                          seed=args.seed, supervised_trials=args.supervised_trials,
                          baseline_configs=args.baseline_configs, target=args.target, prior=args.prior,
                          positive=args.positive)


def run(args: argparse.Namespace) -> None:
    from raytune_fed.workflows.pu import format_summary, run_grid, write_report

    quiet_optuna()  # the supervised baseline tunes with Optuna
    frame = run_grid(pu_settings(args), **grid_options(args))
    print(format_summary(frame))
    if not args.no_report:
        print(f"report: {write_report(args.out, frame, command=args.command_line)}")
    print(f"results: {Path(args.out) / 'results.parquet'}, {Path(args.out) / 'summary.json'}")
