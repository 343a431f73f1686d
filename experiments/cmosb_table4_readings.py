"""Table IV under both readings of the paper's normalisation, from committed Table IV runs.

The paper says only "we normalize the three objectives for each dataset to ensure a fair
comparison".  Two readings (:data:`bench_cmosb_seeds.READINGS`): ``all_rows``, min-max over
every configuration any method evaluated on the dataset (what the workflow's summary.json
ships), and ``natural``, utility loss and privacy leakage on their own [0, 1] scale with the
training cost divided by the largest cost reached; ``own_rows`` (each method over its own
rows) is a check.  Reference point (1, 1, 1) throughout.

This rescoring needs no new trainings: a Table IV JSON of ``experiments/bench_cmosb_table4.py``
holds each method's non-dominated rows and the objectives' range over all rows, and every
reading maps each objective by an increasing function, so the fronts (and their
hypervolumes) are those of all rows.  The multi-seed runs of
``experiments/bench_cmosb_seeds.py`` are scored the same way, by the same function.

    python experiments/cmosb_table4_readings.py      # -> experiments/measured/cmosb_table4_readings.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench_cmosb_seeds import PAPER_TABLE4, READINGS, REFERENCE, readings
from raytune_fed.workflows.cmosb import OBJECTIVES

MEASURED = Path(__file__).parent / "measured"
SOURCES = ("bench_cmosb_table4_synthetic1_paper.json", "bench_cmosb_table4_synthetic2_g20.json")


def score(path: Path) -> dict:
    record = json.loads(path.read_text())
    out = {}
    for dataset, d in record["datasets"].items():
        bounds = np.array([d["bounds"][o] for o in OBJECTIVES], dtype=float)
        fronts = {m: np.array([[r[o] for o in OBJECTIVES] for r in rows], dtype=float)
                  for m, rows in d["fronts"].items()}
        scored = readings(fronts, bounds[:, 0], bounds[:, 1])
        stored = d["hypervolume"]
        if any(abs(scored["all_rows"][m] - stored[m]) > 1e-9 for m in stored):
            raise SystemExit(f"{path.name}: the all_rows reading does not reproduce the stored hypervolumes "
                             f"{stored} (got {scored['all_rows']})")
        out[dataset] = {"source": f"experiments/measured/{path.name}", "command": record.get("command"),
                        "settings": d["settings"], "n_evaluated": d["n_evaluated"],
                        "front_sizes": {m: len(f) for m, f in fronts.items()},
                        "bounds": d["bounds"], "readings": scored, "paper": PAPER_TABLE4.get(dataset),
                        "order": {r: sorted(v, key=v.get, reverse=True) for r, v in scored.items()}}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(MEASURED / "cmosb_table4_readings.json"))
    args = p.parse_args()
    report = {"benchmark": "cmosb_table4_readings", "command": "python experiments/cmosb_table4_readings.py",
              "reference_point": list(REFERENCE), "reading_definitions": READINGS, "shipped": "all_rows",
              "runs": {}}
    for name in SOURCES:
        report["runs"][name.removesuffix(".json")] = score(MEASURED / name)
    Path(args.out).write_text(json.dumps(report, indent=1))
    for run, datasets in report["runs"].items():
        for dataset, d in datasets.items():
            for reading, hv in d["readings"].items():
                print(f"{run} {dataset} {reading:9s} " + "  ".join(f"{m} {v:.3f}" for m, v in hv.items()))
            print(f"{run} {dataset} paper     " + "  ".join(f"{m} {v:.3f}" for m, v in (d["paper"] or {}).items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
