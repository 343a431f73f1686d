"""What the Tune path of ODE costs: CPU seconds of Ray Tune per trial-rung against the training per trial-rung.

ODE runs on one split twice per mode (synchronous, asynchronous): in this process
(:func:`raytune_fed.workflows.pu.run_ode`) and through Ray Tune with ``PUHalvingScheduler``
(:func:`raytune_fed.workflows.pu.run_ode_tune`, one trial per configuration, a local Ray
session started here).  The CPU seconds of the whole process tree (this driver, Ray's GCS,
raylet and every worker, read from ``/proc``: user + system time of each live process and of
the children it has reaped) are taken before and after the Tune run; the trainables report the
CPU seconds of each fit and score (``train_cpu_seconds``).  Tune's cost per trial-rung is
``(tree CPU - training CPU) / trial-rungs``.  The row also says whether the synchronous run
chose the in-process core's configuration.

``python experiments/bench_pu_tune.py`` (spambase, c = 0.1, 2 CPUs by default) writes
``--out`` (default ``experiments/measured/bench_pu_tune.json``).  Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from raytune_fed.workflows.pu import PUGridSettings, estimate_prior, run_ode
from raytune_fed.workflows.pu._grid import PUCell, cell_split
from raytune_fed.workflows.pu._ode import ODESettings

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of its reaped children), or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICKS


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds of ``root`` (this process) and every live descendant, with the children they reaped."""
    root = os.getpid() if root is None else root
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
            todo.extend(children.get(pid, []))
    return total


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="spambase")
    p.add_argument("--c", type=float, default=0.1)
    p.add_argument("--rep", type=int, default=0)
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="experiments/measured/bench_pu_tune.json")
    args = p.parse_args(argv)

    from raytune_fed.runtime import connect
    from raytune_fed.workflows.pu import run_ode_tune

    ray = connect(None, args.num_cpus)
    probe = PUCell(args.dataset, args.c, args.rep, "ode", "ipm", "selfpaced", True,
                   settings=PUGridSettings(datasets=(args.dataset,), cs=(args.c,), seed=args.seed))
    split, seed = cell_split(probe), probe.seed()
    prior = estimate_prior(split, seed)
    rows = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as store:
        for asynchronous in (False, True):
            settings = ODESettings(asynchronous=asynchronous)
            cpu0 = time.process_time()
            core = run_ode(split, settings, prior=prior, seed=seed)
            core_cpu = time.process_time() - cpu0
            tree0 = tree_cpu_seconds()
            tuned = run_ode_tune(split, settings, prior=prior, seed=seed, storage_path=store,
                                 name=f"ode_{'async' if asynchronous else 'sync'}")
            tree = tree_cpu_seconds() - tree0
            rungs = tuned.n_trial_rungs
            rows.append({
                "dataset": args.dataset, "c": args.c, "mode": "async" if asynchronous else "sync",
                "core_cpu_seconds": core_cpu, "core_test_auc": core.test_auc, "core_trial_rungs": len(core.trace),
                "tune_tree_cpu_seconds": tree, "tune_train_cpu_seconds": tuned.train_cpu_seconds,
                "tune_wall_seconds": tuned.wall_seconds, "trial_rungs": rungs, "cpus": tuned.n_cpus,
                "tune_cost_cpu_seconds_per_trial_rung": (tree - tuned.train_cpu_seconds) / rungs,
                "train_cpu_seconds_per_trial_rung": tuned.train_cpu_seconds / rungs,
                "tune_test_auc": tuned.test_auc, "same_choice_as_core": tuned.config == core.config,
                "rows_used": tuned.rows_used})
            print(json.dumps(rows[-1]), flush=True)
    ray.shutdown()
    report = {"settings": vars(args), "load_average_at_start": load, "load_average_at_end": os.getloadavg(),
              "machine": {"python": platform.python_version(), "platform": platform.platform(),
                          "cpus": os.cpu_count()}, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
