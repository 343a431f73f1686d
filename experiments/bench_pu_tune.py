"""What the Tune path of ODE costs: CPU seconds per trial-rung against the in-process core, and trials at once.

On one split, each phase runs in its own cgroup (a child of the benchmark's, see
``_harness.CpuGroup``), so its CPU is that of every process started in it, Ray's GCS, raylet
and workers included whether or not they have exited:

- ``core_sync`` / ``core_async``: :func:`raytune_fed.workflows.pu.run_ode` in this process;
- ``tune_sync`` / ``tune_async``: :func:`raytune_fed.workflows.pu.run_ode_tune` with
  ``PUHalvingScheduler`` (one trial per configuration) in a local Ray session of
  ``--num-cpus`` logical CPUs started in the phase;
- ``asha`` (unless ``--no-asha``): the same trainable and trials under Tune's ``ASHAScheduler``
  (one report per rung, ``reduction_factor`` 2), the reference for Tune's cost per report.

A Tune phase's ``run_cpu_seconds`` is the group's CPU from after ``ray.init`` to the end of
the run (session start and shutdown are recorded apart).  ``cpu_per_trial_rung`` divides it by
the rung reports; ``ratio_to_core`` divides that by the core's.  ``rung0_trials_at_once`` is
the most trials whose trainable had started (``trial_started``, when an actor took the trial)
and not yet ended rung 0 (``rung_ended``) at one instant, from the times the trainables report;
``rung0_fits_at_once`` counts the rung-0 fits alone (``rung_started`` to ``rung_ended``).

``python experiments/bench_pu_tune.py --num-cpus 8`` (spambase, c = 0.1) writes ``--out``
(default ``experiments/measured/bench_pu_tune.json``) through ``_harness.Benchmark``.
Linux; per-phase CPU needs a writable cgroup (root), else it is recorded as null.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from _harness import Benchmark, CpuGroup

_TICKS = os.sysconf("SC_CLK_TCK")


class Phase:
    """A fresh cgroup under the benchmark's that this process joins while the phase runs."""

    def __init__(self, bench: Benchmark, name: str):
        parent = bench._group
        self._parent = parent
        self.group = (CpuGroup(f"{parent.path.name}/{name}-{uuid.uuid4().hex[:6]}") if parent.path is not None
                      else None)
        if self.group is not None and self.group.path is None:
            self.group = None

    def cpu(self) -> float | None:
        return None if self.group is None else self.group.cpu_seconds()

    def by_process(self) -> dict[str, float] | None:
        """CPU seconds of the group's live processes by kind, and of those that exited (the rest of the total)."""
        if self.group is None:
            return None
        total, kinds = self.group.cpu_seconds(), {}
        for pid in (self.group.path / "cgroup.procs").read_text().split():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            cpu = (int(fields[11]) + int(fields[12])) / _TICKS
            kind = ("driver" if int(pid) == os.getpid() else "raylet" if "raylet" in cmd else
                    "gcs_server" if "gcs_server" in cmd else "worker" if cmd.startswith("ray::") else "other")
            kinds[kind] = kinds.get(kind, 0.0) + cpu
        kinds = {k: round(v, 2) for k, v in sorted(kinds.items())}
        kinds["exited"] = round(total - sum(kinds.values()), 2)
        return kinds

    def __enter__(self) -> Phase:
        if self.group is not None:
            self.group.join()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.group is not None:
            self._parent.join()         # back to the benchmark's group
            self.group.kill_all()       # whatever Ray left behind (all started in this phase); removes the group


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 3)


def most_at_once(intervals: Iterable[tuple[float, float]]) -> int:
    """The most intervals that hold at one instant (an end before a start at equal times)."""
    intervals = list(intervals)
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def concurrency(reports: list[dict]) -> dict[str, Any]:
    rung0 = [r for r in reports if r["rung"] == 0]
    return {"rung0_trials_at_once": most_at_once((r["trial_started"], r["rung_ended"]) for r in rung0),
            "rung0_fits_at_once": most_at_once((r["rung_started"], r["rung_ended"]) for r in rung0),
            "trial_sessions": len({(r["config_id"], r["trial_started"]) for r in reports}),
            "worker_pids": len({r["pid"] for r in reports})}


def run_asha(split, settings, *, prior, seed, store, rung_rows) -> dict[str, Any]:
    """The same trainable and trials under ASHAScheduler (one report per rung)."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from raytune_fed.workflows.pu._ode import configuration_set
    from raytune_fed.workflows.pu._tune_path import METRIC, _trainable, _trainable_data

    configs = configuration_set(settings.learners)
    data = _trainable_data(split, settings, prior=prior, seed=seed, rung_rows=rung_rows)
    scheduler = ASHAScheduler(time_attr="training_iteration", max_t=len(rung_rows), grace_period=1,
                              reduction_factor=2)
    tuner = tune.Tuner(tune.with_parameters(_trainable, data=data), param_space={"config": tune.grid_search(configs)},
                       tune_config=tune.TuneConfig(scheduler=scheduler, metric=METRIC, mode="max", reuse_actors=True),
                       run_config=tune.RunConfig(storage_path=store, name="asha", verbose=0))
    grid = tuner.fit()
    rungs = {n: t for t, n in enumerate(rung_rows)}
    reports = [{"config_id": i, "rung": rungs[int(row["n_rows"])],
                **{k: row[k] for k in ("trial_started", "rung_started", "rung_ended", "train_cpu_seconds", "pid")}}
               for i in range(len(grid)) if grid[i].metrics_dataframe is not None
               for row in grid[i].metrics_dataframe.to_dict("records")]
    return {"reports": reports, "train_cpu_seconds": sum(r["train_cpu_seconds"] for r in reports)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="spambase")
    p.add_argument("--c", type=float, default=0.1)
    p.add_argument("--rep", type=int, default=0)
    p.add_argument("--num-cpus", type=int, default=8, help="logical CPUs of the local Ray session")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", nargs="+", choices=("sync", "async"), default=["sync", "async"])
    p.add_argument("--no-asha", action="store_true", help="skip the ASHAScheduler reference run")
    p.add_argument("--out", default="experiments/measured/bench_pu_tune.json")
    args = p.parse_args(argv)

    from raytune_fed.runtime import connect
    from raytune_fed.schedulers import PUHalvingScheduler
    from raytune_fed.workflows.pu import PUGridSettings, estimate_prior, run_ode, run_ode_tune
    from raytune_fed.workflows.pu._grid import PUCell, cell_split
    from raytune_fed.workflows.pu._ode import ODE_MIN_ROWS, ODESettings, configuration_set, search_budget

    probe = PUCell(args.dataset, args.c, args.rep, "ode", "ipm", "selfpaced", True,
                   settings=PUGridSettings(datasets=(args.dataset,), cs=(args.c,), seed=args.seed))
    split, seed = cell_split(probe), probe.seed()
    prior = estimate_prior(split, seed)

    with Benchmark("bench_pu_tune", args.out) as bench, tempfile.TemporaryDirectory() as store:
        bench.figures.update(settings=vars(args), cpu_counted_by=bench._group.kind, phases={})
        phases: dict[str, Any] = bench.figures["phases"]
        core: dict[str, Any] = {}
        for mode in args.modes:
            settings = ODESettings(asynchronous=mode == "async")
            with Phase(bench, f"core_{mode}") as ph:
                c0, t0 = ph.cpu(), time.perf_counter()
                core[mode] = run_ode(split, settings, prior=prior, seed=seed)
                cpu, wall = _diff(c0, ph.cpu()), time.perf_counter() - t0
            n = len(core[mode].trace)
            phases[f"core_{mode}"] = {"cpu_seconds": cpu, "wall_seconds": round(wall, 2), "trial_rungs": n,
                                      "cpu_per_trial_rung": None if cpu is None else cpu / n,
                                      "test_auc": core[mode].test_auc, "config": core[mode].config}
            print(json.dumps({f"core_{mode}": phases[f"core_{mode}"]}), flush=True)

        runs = [(f"tune_{m}", m) for m in args.modes] + ([] if args.no_asha else [("asha", "sync")])
        for name, mode in runs:
            settings = ODESettings(asynchronous=mode == "async")
            with Phase(bench, name) as ph:
                c0 = ph.cpu()
                ray = connect(None, args.num_cpus)
                c1, t0 = ph.cpu(), time.perf_counter()
                if name == "asha":
                    rows = PUHalvingScheduler(n_configs=len(configuration_set(settings.learners)),
                                              n_rows=split.n_train, seed=0, min_rows=ODE_MIN_ROWS,
                                              budget_samples=search_budget(split, settings),
                                              schedule=settings.schedule, eta0=settings.eta0,
                                              mu=settings.mu).rung_rows
                    out = run_asha(split, settings, prior=prior, seed=seed, store=store, rung_rows=rows)
                    reports, train_cpu, extra = out["reports"], out["train_cpu_seconds"], {}
                else:
                    tuned = run_ode_tune(split, settings, prior=prior, seed=seed, storage_path=store, name=name)
                    reports, train_cpu = tuned.reports, tuned.train_cpu_seconds
                    extra = {"test_auc": tuned.test_auc, "rows_used": tuned.rows_used,
                             "same_choice_as_core": tuned.config == core[mode].config if mode in core else None}
                c2, wall, kinds = ph.cpu(), time.perf_counter() - t0, ph.by_process()
                ray.shutdown()
                c3 = ph.cpu()
            run_cpu, n = _diff(c1, c2), len(reports)
            core_per = phases.get(f"core_{mode}", {}).get("cpu_per_trial_rung")
            per = None if run_cpu is None else run_cpu / n
            phases[name] = {"num_cpus": args.num_cpus, "session_start_cpu_seconds": _diff(c0, c1),
                            "run_cpu_seconds": run_cpu, "session_stop_cpu_seconds": _diff(c2, c3),
                            "wall_seconds": round(wall, 2), "trial_rungs": n, "train_cpu_seconds": train_cpu,
                            "cpu_per_trial_rung": per,
                            "overhead_cpu_per_trial_rung": None if run_cpu is None else (run_cpu - train_cpu) / n,
                            "ratio_to_core": None if per is None or not core_per else round(per / core_per, 2),
                            "cpu_seconds_by_process_at_end": kinds,
                            **concurrency(reports), **extra}
            print(json.dumps({name: phases[name]}), flush=True)
        if "tune_sync" in phases and "asha" in phases and phases["asha"]["cpu_per_trial_rung"]:
            bench.figures["tune_sync_to_asha_per_report"] = round(
                phases["tune_sync"]["cpu_per_trial_rung"] / phases["asha"]["cpu_per_trial_rung"], 2)


if __name__ == "__main__":
    main()
