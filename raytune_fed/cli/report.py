"""``raytune-fed report OUT``: rebuild the report page of a run, whichever workflow wrote it."""

from __future__ import annotations

import argparse
from pathlib import Path

from raytune_fed.errors import ConfigError

WORKFLOWS = {  # the columns that identify each workflow's results.parquet, checked in this order
    "cmosb": {"utility_loss", "training_cost", "privacy_leakage"},
    "pu": {"test_auc", "variant"},
    "rfms": {"hypervolume", "experiment"},
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="rebuild the report page (index.html) of an RFMS, PU or CMOSB run",
                       description="Rebuild the report page of a results directory: index.html (figures embedded), "
                                   "index.md and the PNG figures, from DIR/results.parquet. The workflow that wrote "
                                   "DIR (rfms/demo, pu or cmosb) is recognised from its results.")
    p.add_argument("dir", help="a directory written by `raytune-fed rfms`, `demo`, `pu` or `cmosb`")
    p.set_defaults(run=run)


def recognise(out: str | Path) -> str:
    """Which workflow wrote ``out``: ``"rfms"``, ``"pu"`` or ``"cmosb"`` (from its results' columns)."""
    import pyarrow.parquet as pq

    path = Path(out) / "results.parquet"
    if not path.is_file():
        raise ConfigError(f"no results.parquet in {out}: run a grid (rfms, pu, cmosb) with this --out first, "
                          "or wait until it has finished")
    try:
        columns = set(pq.read_schema(path).names)
    except Exception as exc:  # a truncated or foreign file
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"cannot read {path} (damaged or not a results file): {type(exc).__name__}: {first}") \
            from None
    for name, needed in WORKFLOWS.items():
        if needed <= columns:
            return name
    raise ConfigError(f"{path} was not written by rfms, pu or cmosb: its columns "
                      f"{sorted(columns)[:8]}{' ...' if len(columns) > 8 else ''} match none of them")


def run(args: argparse.Namespace) -> None:
    workflow = recognise(args.dir)
    if workflow == "rfms":
        from raytune_fed.workflows.rfms import write_report
    elif workflow == "pu":
        from raytune_fed.workflows.pu import write_report
    else:
        from raytune_fed.workflows.cmosb import write_report
    print(f"report ({workflow}): {write_report(args.dir)}")
