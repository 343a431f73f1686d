"""``raytune-fed cmosb``: CMOSB against the ES, GS and BO baselines on one vertical task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raytune_fed.cli._options import add_preset_option, csv, preset_epilog
from raytune_fed.cli._stderr import quiet_optuna
from raytune_fed.crypto import SCHEMES

EPILOG = """\
Each method is a Ray Tune experiment whose trials train SecureBoost on two party actors
(the data go to Ray once).  Resuming: a method that finished is stored in OUT/runs/ and is
not run again; an interrupted one is restored from OUT/tune/ (Tuner.restore). A resumed
run must use the same options (OUT/settings.json records them).  Training cost eps_c is
counted operations x seconds per BFV operation (--op-times: fixed reference seconds by
default, so two runs of the same command give the same rows; 'calibrate' measures them on
this machine and keeps them in settings.json), so --he plain gives the same objectives as
bfv up to fixed-point rounding, only faster.  Bad options end with a one-line error and
exit code 2."""


def _point(text: str) -> dict[str, float]:
    out = {}
    for item in csv(text):
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected name=number pairs like n_f=5,d=3, got {item!r}") from None
        if not sep:
            raise argparse.ArgumentTypeError(f"expected name=number pairs like n_f=5,d=3, got {item!r}")
    return out


def _op_times(text: str) -> str | dict:
    """``reference``, ``calibrate`` or a JSON file of seconds per operation (or a run's settings.json)."""
    if text in ("reference", "calibrate"):
        return text
    from raytune_fed.errors import ConfigError

    try:
        values = json.loads(Path(text).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--op-times {text}: cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--op-times {text}: not a JSON file ({exc})") from None
    if isinstance(values, dict) and isinstance(values.get("op_times"), dict):
        values = values["op_times"]  # another run's settings.json
    if not isinstance(values, dict):
        raise ConfigError(f"--op-times {text}: expected a JSON object of seconds per operation, got "
                          f"{type(values).__name__}")
    return values


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cmosb", help="constrained multi-objective SecureBoost tuning (CMOSB) vs ES, GS, BO",
                       description="Tune vertical SecureBoost for utility loss, training cost and privacy leakage "
                                   "with constrained NSGA-II, compare with the baselines by hypervolume.",
                       epilog=preset_epilog(EPILOG, "cmosb"), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_preset_option(p, "cmosb")
    p.add_argument("--dataset", default="synthetic1",
                   help="synthetic1, synthetic2, default_credit or sensorless (OpenML; needs network access once)")
    p.add_argument("--population", type=int, default=20, help="NSGA-II population (default: %(default)s)")
    p.add_argument("--generations", type=int, default=40, help="NSGA-II generations (default: %(default)s)")
    p.add_argument("--max-cost", type=float, default=None, help="constraint: training cost eps_c <= this (seconds)")
    p.add_argument("--max-leakage", type=float, default=None, help="constraint: privacy leakage eps_p <= this")
    p.add_argument("--constraint-handling", default="penalty",
                   help="how CMOSB treats --max-cost/--max-leakage: penalty (the paper's, alpha 20) or domination "
                        "(pymoo's constraint domination) (default: %(default)s)")
    p.add_argument("--baselines", type=csv, default=("es", "gs", "bo"),
                   help="comma-separated baselines among es,gs,bo (default: es,gs,bo)")
    p.add_argument("--he", default="plain", choices=SCHEMES,
                   help="encryption of the trainings: bfv or plain (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="root seed (default: %(default)s)")
    p.add_argument("--grid-levels", type=int, default=2, help="values per parameter of GS (default: %(default)s)")
    p.add_argument("--bo-trials", type=int, default=None,
                   help="trials of each BO run (default: population x generations / 3)")
    p.add_argument("--bo-batch", type=int, default=2,
                   help="trials BO proposes at once, each batch after the previous one finished (default: "
                        "%(default)s)")
    p.add_argument("--op-times", default="reference",
                   help="seconds per BFV operation pricing eps_c: reference (fixed, the default), calibrate (measure "
                        "on this machine) or a JSON file of them (e.g. another run's settings.json)")
    p.add_argument("--attack-sample", type=int, default=1000,
                   help="class-balanced instances the attack clusters (default: %(default)s)")
    p.add_argument("--point", type=_point, action="append", default=[],
                   help="an extra configuration evaluated with ES, e.g. n_f=5,n_l=1,d=3,r=0.8,theta_p=1.0,eta=0.3 "
                        "(repeatable)")
    p.add_argument("--out", default="results/cmosb", help="output directory (default: %(default)s)")
    p.add_argument("--address", default=None,
                   help="Ray cluster address ('auto', host:port, ray://host:port); default: a local session")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local session (default: all)")
    p.set_defaults(run=run, finished_unit="trials")  # what an interrupt says it kept


def cmosb_settings(args: argparse.Namespace):
    """The run's settings from parsed ``cmosb`` arguments, checked."""
    from raytune_fed.workflows.cmosb import CMOSBSettings

    return CMOSBSettings(dataset=args.dataset, population=args.population, generations=args.generations,
                         baselines=tuple(args.baselines), max_cost=args.max_cost, max_leakage=args.max_leakage,
                         he=args.he, seed=args.seed, grid_levels=args.grid_levels, bo_trials=args.bo_trials,
                         n_sample=args.attack_sample, points=tuple(args.point),
                         constraint_handling=args.constraint_handling, bo_batch=args.bo_batch,
                         op_times=_op_times(args.op_times)).check()


def run(args: argparse.Namespace) -> None:
    from raytune_fed.workflows.cmosb import format_summary, run_cmosb, write_outputs

    quiet_optuna()  # BO's searcher lives in this process
    settings = cmosb_settings(args)
    frame = run_cmosb(settings, args.out, address=args.address, num_cpus=args.num_cpus)
    summary = write_outputs(frame, args.out, settings.constraints, command=getattr(args, "command_line", None))
    print(format_summary(summary))
    out = Path(args.out)
    print(f"results: {out / 'results.parquet'}, {out / 'summary.json'}; report: {out / 'index.html'}")
