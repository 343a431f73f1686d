"""What the README's workflow commands and the CLI's presets cost on this machine.

Runs each command below as its own process (``raytune-fed ...``, from an empty output
directory under ``--work``, so nothing is resumed) and records its wall seconds, the CPU
seconds of every process it started (Ray's workers included, through a cgroup when one can
be made), the load average before and after (as ``uptime`` shows it) and its exit code.
Commands that take hours are not run: their cost is estimated from measured per-cell or
per-trial costs (this run's, and the stored ``experiments/measured/bench_grid_paper.json``,
``bench_rfms_sites.json``), and each estimate says from what.

Measured:

* ``rfms_quick``, ``pu_quick``, ``cmosb_quick``: ``raytune-fed <workflow> --preset quick``;
* ``cmosb_readme``: the README's CMOSB command (population 8 x 5 generations, ES, GS, BO);
* ``pu_readme_slice``: the README's PU command at one c (0.01) and one replication of its
  three: a sixth of its cells, each method on each dataset (the estimate scales it by 6);
* ``pu_table2_slice``: ``--preset table2 --reps 1``, a tenth of the preset's cells (the
  per-cell cost of an ODE cell for every ODE-only PU preset);
* ``pu_baselines_slice``: ``--preset baselines --reps 1``, a tenth of the preset's cells.
* ``readme_python_rfms``, ``readme_python_pu``, ``readme_python_cmosb``: the first Python
  block of the README's RFMS, PU and CMOSB sections, read from README.md and run as written.

Estimated (not run): the README's RFMS command (400 cells), ``rfms --preset slice`` /
``paper`` / ``guard``, the README's PU command at full size, the PU paper presets, and the
CMOSB paper presets (per trial of ``cmosb_readme``).

    python experiments/bench_preset_costs.py                       # everything (about 15 min on 2 cores)
    python experiments/bench_preset_costs.py --only rfms_quick,pu_quick,cmosb_quick
    python experiments/bench_preset_costs.py --only readme_python_pu --append      # add to the stored record
    python experiments/bench_preset_costs.py --estimate-from experiments/measured/preset_costs.json  # estimates only
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import ROOT, Benchmark, CpuGroup  # noqa: E402

MEASURED = ROOT / "experiments" / "measured"

# name -> (what it is, the command's arguments after ``raytune-fed``; --out is added)
COMMANDS: dict[str, tuple[str, list[str]]] = {
    "rfms_quick": ("rfms --preset quick", ["rfms", "--preset", "quick"]),
    "pu_quick": ("pu --preset quick", ["pu", "--preset", "quick"]),
    "cmosb_quick": ("cmosb --preset quick", ["cmosb", "--preset", "quick"]),
    "cmosb_readme": ("the README's CMOSB command",
                     ["cmosb", "--dataset", "synthetic1", "--population", "8", "--generations", "5"]),
    "pu_readme_slice": ("the README's PU command at c = 0.01 and 1 replication (1/6 of its cells)",
                        ["pu", "--dataset", "twonorm,spambase", "--c", "0.01", "--methods",
                         "ode,upu,nnpu,wsvm,supervised", "--reps", "1"]),
    "pu_table2_slice": ("pu --preset table2 --reps 1 (1/10 of its cells)", ["pu", "--preset", "table2", "--reps", "1"]),
    "pu_baselines_slice": ("pu --preset baselines --reps 1 (1/10 of its cells)",
                           ["pu", "--preset", "baselines", "--reps", "1"]),
}


# the README's Python blocks of the workflows' sections, run as written (``python -c BLOCK``)
README_SECTIONS = {"readme_python_rfms": "## RFMS", "readme_python_pu": "## PU model selection",
                   "readme_python_cmosb": "## CMOSB"}


def readme_block(name: str) -> str:
    """The first Python block of the README section ``README_SECTIONS[name]``."""
    text = (ROOT / "README.md").read_text()
    start = text.index("\n" + README_SECTIONS[name])
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else len(text)]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    if not blocks:
        raise ValueError(f"README section {README_SECTIONS[name]!r} has no Python block")
    return blocks[0]


def _executable() -> list[str]:
    script = Path(sys.executable).parent / "raytune-fed"
    return [str(script)] if script.exists() else [sys.executable, "-m", "raytune_fed.cli"]


def _cells(out: Path) -> int | None:
    """Rows of the run's results.parquet (cells for PU, evaluated configurations for CMOSB)."""
    import pandas as pd

    path = out / "results.parquet"
    return len(pd.read_parquet(path)) if path.exists() else None


def run_command(name: str, work: Path) -> dict:
    out = work / name
    shutil.rmtree(out, ignore_errors=True)  # from empty: a resumed run would cost nothing
    if name in README_SECTIONS:
        what, argv = f"the README's Python block in {README_SECTIONS[name][3:]}", ["python", "-c", "<block>"]
        command = [sys.executable, "-c", readme_block(name)]
    else:
        what, argv = COMMANDS[name]
        command = [*_executable(), *argv, "--out", str(out)]
    group = CpuGroup(f"raytune-fed-preset-{uuid.uuid4().hex[:8]}")
    started_utc = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          preexec_fn=group.join if group.path is not None else None)
    wall = time.monotonic() - start
    load_after = os.getloadavg()
    cpu = group.cpu_seconds() if group.path is not None else None
    if group.path is not None:
        group.kill_all()  # Ray's leftovers of this command, if any
    shown = " ".join(argv) if name in README_SECTIONS else "raytune-fed " + " ".join(argv)
    record = {"what": what, "command": shown, "started_utc": started_utc, "exit_code": done.returncode,
              "wall_seconds": round(wall, 1), "cpu_seconds": None if cpu is None else round(cpu, 1),
              "cpu_source": group.kind or "not measured (no writable cgroup)",
              "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in load_after], "results_rows": _cells(out),
              "summary": done.stdout.strip().splitlines()[-12:]}
    if done.returncode != 0:
        record["stderr_tail"] = done.stderr.strip().splitlines()[-5:]
    print(json.dumps({name: {k: record[k] for k in ("wall_seconds", "cpu_seconds", "exit_code", "results_rows",
                                                    "load_average_before", "load_average_after")}}), flush=True)
    return record


def _hours(seconds: float) -> float:
    return round(seconds / 3600, 2)


def estimates(measured: dict) -> dict:
    """The costs of the commands not run, each with what it is estimated from."""
    out: dict = {}
    paper = json.loads((MEASURED / "bench_grid_paper.json").read_text())
    proj = paper["projection"]
    unit = proj["mean_unit_seconds"]                       # one-core wall seconds per unit, 20 + 40 evaluations
    unit_cpu = proj["from_cpu_seconds"]["mean_unit_seconds"]
    readme_rfms = {"elastic_net": 200, "svm": 200}          # 20 pairs x 10 replications per learner
    low = sum(n * unit_cpu[k] for k, n in readme_rfms.items()) / 2
    high = sum(n * unit[k] for k, n in readme_rfms.items()) / 2
    out["rfms_readme"] = {
        "command": "raytune-fed rfms --dataset geo5_sim --learners elastic_net,svm --reps 10",
        "cells": 400, "wall_hours_on_2_cores": [_hours(low), _hours(high)],
        "from": "bench_grid_paper.json: mean one-core seconds per unit at 20 + 40 evaluations (elastic net "
                f"{unit_cpu['elastic_net']:.0f}-{unit['elastic_net']:.0f} s, SVM {unit_cpu['svm']:.0f}-"
                f"{unit['svm']:.0f} s; from CPU seconds - from wall seconds), 400 units over 2 cores"}
    run = paper["runs"][proj["from_run"]]
    out["rfms_slice"] = {"command": "raytune-fed rfms --preset slice", "cells": 12,
                         "wall_hours_on_2_cores": [_hours(run["wall_seconds"])] * 2,
                         "from": f"bench_grid_paper.json: the same 12 units took {run['wall_seconds']:.0f} s on 2 "
                                 f"cores (load {paper['environment']['load_average'][0]:.1f} at its start)"}
    two = proj["cores"]["2"]
    out["rfms_paper"] = {"command": "raytune-fed rfms --preset paper", "cells": 600,
                         "wall_hours_on_2_cores": [round(proj["from_cpu_seconds"]["cores"]["2"]["long_tail_hours"], 1),
                                                   round(two["long_tail_hours"], 1)],
                         "from": "bench_grid_paper.json's projection of the 600-unit grid on 2 cores (from unit CPU "
                                 "seconds - from unit wall seconds)"}
    sites = json.loads((MEASURED / "bench_rfms_sites.json").read_text())
    walls = [s["wall_seconds"] for s in sites["grids"]["geo5_sim_natural"].values()]
    out["rfms_guard"] = {"command": "raytune-fed rfms --preset guard", "cells": 2,
                         "wall_hours_on_2_cores": [_hours(min(walls)), _hours(max(walls))],
                         "from": "bench_rfms_sites.json: its geo5_sim grids (the three site setups) took "
                                 f"{min(walls):.0f}-{max(walls):.0f} s at load 25-60"}
    # below: [low, high] = [from the CPU seconds of every process (over 2 cores for a grid, whose cells run two at a
    # time; as they are for CMOSB, whose trials run one at a time), from the wall seconds at the load measured]
    pu = measured.get("pu_readme_slice")
    if pu and pu["exit_code"] == 0 and pu["cpu_seconds"]:
        out["pu_readme"] = {"command": "raytune-fed pu --dataset twonorm,spambase --c 0.01,0.1 --methods "
                                       "ode,upu,nnpu,wsvm,supervised --reps 3",
                            "cells": 60, "wall_hours_on_2_cores": [_hours(6 * pu["cpu_seconds"] / 2),
                                                                   _hours(6 * pu["wall_seconds"])],
                            "from": f"6 x this run's pu_readme_slice ({pu['cpu_seconds']:.0f} CPU-s, "
                                    f"{pu['wall_seconds']:.0f} s wall for 10 of its 60 cells, one per dataset x "
                                    "method; c = 0.1 costs about as much as c = 0.01: the grids fit on the same "
                                    "rows)"}
    t2 = measured.get("pu_table2_slice")
    if t2 and t2["exit_code"] == 0 and t2["results_rows"] and t2["cpu_seconds"]:
        n = t2["results_rows"]
        cpu, wall = t2["cpu_seconds"] / n / 2, t2["wall_seconds"] / n
        for name, cells in (("table2", 480), ("table4", 1200), ("table5", 480), ("table2-proportional", 50),
                            ("table2-uniform", 50), ("table2-budget-4n", 50), ("table2-true-prior", 50),
                            ("table2-cv-odds", 50), ("table5-cv-odds", 30)):
            out[f"pu_{name}"] = {"command": f"raytune-fed pu --preset {name}", "cells": cells,
                                 "wall_hours_on_2_cores": [_hours(cpu * cells), _hours(wall * cells)],
                                 "from": f"pu_table2_slice: {n} ODE cells in {t2['cpu_seconds']:.0f} CPU-s, "
                                         f"{t2['wall_seconds']:.0f} s wall (Ray's start included); other schedules "
                                         "and B = 4 N train on other row counts, so rough for those"}
    base = measured.get("pu_baselines_slice")
    if base and base["exit_code"] == 0 and base["cpu_seconds"]:
        out["pu_baselines"] = {"command": "raytune-fed pu --preset baselines", "cells": 200,
                               "wall_hours_on_2_cores": [_hours(10 * base["cpu_seconds"] / 2),
                                                         _hours(10 * base["wall_seconds"])],
                               "from": f"10 x this run's pu_baselines_slice ({base['cpu_seconds']:.0f} CPU-s, "
                                       f"{base['wall_seconds']:.0f} s wall for 20 cells)"}
    cm = measured.get("cmosb_readme")
    if cm and cm["exit_code"] == 0 and cm["results_rows"] and cm["cpu_seconds"]:
        n = cm["results_rows"]
        # table4: CMOSB 800, ES 3, GS 64 (2 levels), BO 3 x 266 = 798; a figure10 cell: CMOSB's 800 only
        for name, trials in (("table4", 1665), ("figure10", 800)):
            out[f"cmosb_{name}"] = {"command": f"raytune-fed cmosb --preset {name}" + ("" if name == "table4" else
                                                                                      "-leakage (and the other three)"),
                                    "trials": trials,
                                    "wall_hours_on_2_cores": [_hours(cm["cpu_seconds"] / n * trials),
                                                              _hours(cm["wall_seconds"] / n * trials)],
                                    "from": f"cmosb_readme: {n} evaluated configurations in {cm['cpu_seconds']:.0f} "
                                            f"CPU-s, {cm['wall_seconds']:.0f} s wall (Ray's and Tune's start-up "
                                            "included; the trials run one at a time); rough: the paper's 20 x 40 "
                                            "search reaches larger ensembles than population 8 x 5 does"}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = [*COMMANDS, *README_SECTIONS]
    p.add_argument("--only", default=",".join(known), help=f"comma-separated, among {', '.join(known)}")
    p.add_argument("--append", action="store_true",
                   help="keep the commands of the record at --out that this run does not measure (each command's "
                        "entry keeps its own start time and load)")
    p.add_argument("--work", default="results/bench_preset_costs", help="the runs' output directories")
    p.add_argument("--out", default="experiments/measured/preset_costs.json")
    p.add_argument("--estimate-from", metavar="JSON",
                   help="recompute the estimates of a finished run's record from its measured commands (runs nothing)")
    args = p.parse_args()
    if args.estimate_from:
        path = Path(args.estimate_from)
        record = json.loads(path.read_text())
        record["figures"]["estimated"] = estimates(record["figures"]["measured"])
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(record["figures"]["estimated"], indent=1))
        return
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown or not names:
        p.error(f"--only: unknown command(s) {unknown or names}; known: {', '.join(known)}")
    work = Path(args.work)
    earlier: dict = {}
    if args.append and Path(args.out).exists():
        earlier = {k: v for k, v in json.loads(Path(args.out).read_text())["figures"]["measured"].items()
                   if k not in names}
    with Benchmark("bench_preset_costs", args.out) as bench:
        measured: dict = dict(earlier)
        bench.figures["measured"] = measured
        for name in names:
            measured[name] = run_command(name, work)
        bench.figures["estimated"] = estimates(measured)
        bench.headline.update({f"{n} wall s": m["wall_seconds"] for n, m in measured.items()})
        bench.figures["appended_to"] = sorted(earlier) if earlier else None
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
