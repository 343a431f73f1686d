"""``make demo`` run several times, on this checkout and on another revision: is its table the same?

    python tools/demo_repeat.py --runs 2 --before d8d2749 --out experiments/measured/demo_repeat.json

Each run is ``raytune-fed demo --out DIR`` (what ``make demo`` runs: 2 openbox/lockbox pairs,
1 replication, elastic net, sites as Ray actors) in a fresh output directory.  For every run
it records the printed table's numbers (mean hypervolume per method, from
``summary.json``) and, per cell and method, the selected configurations and the three
out-of-bag losses, so two runs can be compared row by row.  ``--before REV`` repeats the
runs on that revision's code (``experiments/_revisions.py``).  The JSON says which rows
differ between any two runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))  # _revisions


def one_run(out: Path) -> dict:
    """One ``raytune-fed demo`` on the package this interpreter imports; its table and rows."""
    import pandas as pd

    start = time.time()
    cpu = os.times()
    subprocess.run([sys.executable, "-m", "raytune_fed.cli", "demo", "--out", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    summary = json.loads((out / "summary.json").read_text())
    frame = pd.read_parquet(out / "results.parquet").sort_values(["experiment", "method"])
    rows = {f"{r.experiment}/{r.method}": {"selected": r.selected, "hypervolume": r.hypervolume,
                                           "openbox_outbag": list(r.openbox_outbag),
                                           "curator_outbag": list(r.curator_outbag),
                                           "lockbox_loss": list(r.lockbox_loss)}
            for r in frame.itertuples()}
    return {"summary": summary, "rows": rows, "wall_seconds": round(time.time() - start, 1),
            "cpu_seconds_children": round(after.children_user + after.children_system
                                          - cpu.children_user - cpu.children_system, 1)}


def differing(runs: list[dict]) -> list[str]:
    """Rows (cell/method) whose values differ between any two runs."""
    keys = sorted(set().union(*(r["rows"] for r in runs)))
    return [k for k in keys if len({json.dumps(r["rows"].get(k), sort_keys=True) for r in runs}) > 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--before", default=None, help="also run on this git revision")
    parser.add_argument("--here", action="store_true", help="only this package (used for --before)")
    parser.add_argument("--out", default="results/demo_repeat.json")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        now = [one_run(Path(tmp) / f"now{i}") for i in range(args.runs)]
    if args.here:
        out.write_text(json.dumps({"runs": now}))
        return
    result = {"command": "python tools/demo_repeat.py " + " ".join(sys.argv[1:]),
              "load_average_at_end": os.getloadavg(), "now": {"runs": now, "differing_rows": differing(now)}}
    if args.before:
        from _revisions import checkout, run_script

        with checkout(args.before) as tree:
            before = run_script(tree, __file__, ["--here", "--runs", str(args.runs)])["runs"]
        result["before"] = {"revision": args.before, "runs": before, "differing_rows": differing(before)}
        result["before_vs_now_differing_rows"] = differing([before[0], now[0]])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
