"""A grid that outgrows one machine, on an autoscaling cluster: how soon the first cell runs, how busy the
cluster is once it has grown.

The cluster is Ray's fake multi-node provider with cluster.yaml's node types (see
``tests/_fake_cluster.py``: the autoscaler v2 that ``ray up`` runs; every node is a set of
processes on this machine declaring one CPU; at most two nodes of a type; cluster.yaml's site
node type copied once per site of the grid, so the grid is pinned: each site's actor and the
cells of its openbox run on its node).  The head starts with one CPU and no worker; the
RFMS grid is submitted as a user would (``raytune-fed rfms --address ...``), and the
autoscaler grows the cluster from the grid's demand.

Measured (wall clock, so the load average is recorded with them):
* ``seconds_to_first_cell``: from ``ray start --head`` to the first cell's start (the cells'
  own ``unit_started``), split into the head's start and the grid's start;
* ``seconds_to_full_size``: from ``ray start`` until the cluster first had all the nodes it
  reached during the grid;
* ``busy_share_full``: once it had, until the last cell ended, the cells' CPU seconds over
  the CPU time the live nodes declared (cells' CPU seconds are spread evenly over each
  cell's run); ``held_share_full``: the share of that CPU time a running cell held.

Every fake node shares this machine's cores, so these are the autoscaler's and the grid's
scheduling numbers (how soon nodes come and cells start, how much of the declared CPU a
cell holds), not a speed-up; on a real cluster the CPU time per node is the node's own.

    python experiments/bench_cluster.py            # writes experiments/measured/bench_cluster.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # the fake cluster lives with the tests (it imports tests._ports)

from _fake_cluster import FakeCluster, fake_node_types  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

OUT = ROOT / "experiments" / "measured" / "bench_cluster.json"


def _monitor(cluster: FakeCluster, samples: list, stop: threading.Event) -> None:
    while not stop.is_set():
        nodes = cluster.nodes()
        samples.append((time.time(), sorted(t for _, t in nodes.values())))
        stop.wait(0.5)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--methods", default="lso,fso2,fmo")
    parser.add_argument("--n-init", type=int, default=4)
    parser.add_argument("--n-iter", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    with Benchmark("bench_cluster", args.out) as bench:
        from raytune_fed.data import load_dataset

        from raytune_fed.workflows.rfms import RFMSSettings, run_grid

        settings = RFMSSettings(dataset="geo5_sim", methods=tuple(args.methods.split(",")), n_init=args.n_init,
                                n_iter=args.n_iter, seed=0)
        site_names = load_dataset("geo5_sim").site_names  # the natural split: one site per dataset site
        cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
        config = fake_node_types(cluster_yaml, sites=site_names)  # cluster.yaml's site node type, once per site
        cluster = FakeCluster(config)
        out = cluster.root / "grid"
        samples: list = []
        stop = threading.Event()
        watcher = threading.Thread(target=_monitor, args=(cluster, samples, stop), daemon=True)
        # this process is the grid's driver: the cluster's session directory and token, before Ray is imported
        os.environ.update({k: v for k, v in cluster.driver_env().items() if k.startswith("RAY_")})
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still stops its cluster
        try:
            t_start = time.time()
            cluster.start()
            t_head = time.time()
            watcher.start()
            frame = run_grid(settings, learners=["elastic_net"], n_reps=args.reps, n_pairs=args.pairs, out=out,
                             address=cluster.address)  # what `raytune-fed rfms --address ...` runs
            t_grid_end = time.time()
            import ray

            ray.shutdown()  # the driver leaves, as the command does when it ends: what it held on the nodes is freed
            units = [json.loads(p.read_text()) for p in sorted((out / "units").glob("*.json"))]
            # let the idle nodes go, to time the scale-down too
            give_up = time.time() + 900
            while time.time() < give_up and samples[-1][1] != [config["head_node_type"]]:
                time.sleep(1)
            t_down = time.time()
        finally:
            stop.set()
            cluster.stop()

        cells = []
        for unit in units:
            timing = unit["timing"][0]
            cells.append({"key": unit["key"], "openbox": unit["config"]["openbox"], "start": timing["unit_started"],
                          "end": timing["unit_finished"]})
        cpu_by_key = {k: v["cpu_seconds"] for k, v in frame.attrs["usage"].items()}
        first_cell = min(c["start"] for c in cells)
        last_end = max(c["end"] for c in cells)
        most = max(len(types) for _, types in samples)
        t_full = next(t for t, types in samples if len(types) == most)
        # CPU time the live nodes declared over [t_full, last_end] (one CPU per node), from the samples
        declared = 0.0
        for (t0, types), (t1, _) in zip(samples, samples[1:] + [(last_end, [])]):
            declared += len(types) * _overlap(t0, t1, t_full, last_end)
        held = sum(_overlap(c["start"], c["end"], t_full, last_end) for c in cells)
        busy = sum(cpu_by_key[c["key"]] * _overlap(c["start"], c["end"], t_full, last_end) / (c["end"] - c["start"])
                   for c in cells) / declared
        timeline = []
        for t, types in samples:
            if not timeline or timeline[-1]["nodes"] != types:
                timeline.append({"seconds": round(t - t_start, 1), "nodes": types})
        result = {
            "grid": (f"raytune-fed rfms --dataset geo5_sim --learners elastic_net --methods {args.methods} --reps "
                     f"{args.reps} --pairs {args.pairs} --n-init {args.n_init} --n-iter {args.n_iter} --seed 0 "
                     f"--address <the cluster> (run in this process)"),
            "cluster": {"node_types": {n: t["resources"] for n, t in config["available_node_types"].items()},
                        "max_workers": {n: t.get("max_workers") for n, t in config["available_node_types"].items()},
                        "idle_timeout_minutes": config["idle_timeout_minutes"], "site_nodes_for": list(site_names)},
            "n_cells": len(cells),
            "seconds_head_start": round(t_head - t_start, 1),
            "seconds_to_first_cell": round(first_cell - t_start, 1),
            "seconds_grid_start_to_first_cell": round(first_cell - t_head, 1),
            "seconds_to_full_size": round(t_full - t_start, 1),
            "nodes_at_full_size": most,
            "seconds_grid": round(t_grid_end - t_head, 1),
            "seconds_full_size_to_last_cell_end": round(last_end - t_full, 1),
            "held_share_full": round(held / declared, 3) if declared else None,
            "busy_share_full": round(busy, 3),
            "seconds_last_cell_end_to_head_only": round(t_down - last_end, 1),
            "node_timeline": timeline,
            "cells": [{"openbox": c["openbox"], "start": round(c["start"] - t_start, 1),
                       "end": round(c["end"] - t_start, 1), "cpu_seconds": round(cpu_by_key[c["key"]], 1)}
                      for c in cells],
            "cpu_seconds_cells": round(sum(cpu_by_key.values()), 1),
            "rows": int(len(frame)),
        }
        bench.figures.update(result)
        bench.headline.update({k: result[k] for k in ("seconds_to_first_cell", "seconds_grid", "busy_share_full")})
    print(json.dumps({k: v for k, v in result.items() if k not in ("node_timeline", "cells")}, indent=1))


if __name__ == "__main__":
    main()
