"""How long Ray's cluster launcher takes from `ray up` to a grid's first cell, with cluster.yaml's commands.

The node is the one ``tests/test_cluster_launcher.py`` brings up: Debian's sshd in PID,
network and mount namespaces of its own on this machine, a Python environment holding Ray
and the dependencies but not raytune-fed playing the rayproject/ray image (see
``tests/_ssh_node.py``; root only).  Timed, in this order, as a user runs them:

* ``raytune-fed cluster bundle`` (the wheel and the pins, on the user's machine);
* ``ray up`` with cluster.yaml's file mounts, setup commands (the wheel installed at the
  pinned versions), head setup and head start commands (``ray start --head`` and
  ``raytune-fed cluster announce``);
* ``ray exec`` of an RFMS grid, split at its first cell's start (the cell's own
  ``unit_started``, read from the results that ``ray rsync-down`` fetched);
* ``ray rsync-down`` and ``ray down``.

What an AWS cluster adds is not here: the instance boot, the image pull (``docker.pull_before_run``)
and the installs from the package index that the image lacks.  Wall seconds, with the load
average before and after, and the CPU seconds of this process and its children.

    python experiments/bench_cluster_launch.py     # writes experiments/measured/bench_cluster_launch.json
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the node lives with the test that uses it

from _ssh_node import SshNode, control_dir, launcher_config, pids_naming  # noqa: E402

from _harness import Benchmark  # this folder's harness (the script's own folder is on sys.path)

OUT = ROOT / "experiments" / "measured" / "bench_cluster_launch.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--methods", default="lso,fmo")
    parser.add_argument("--n-init", type=int, default=2)
    parser.add_argument("--n-iter", type=int, default=1)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    with Benchmark("bench_cluster_launch", args.out) as bench:
        from raytune_fed.cluster import BUNDLE_DIR, build_bundle

        grid = (f"raytune-fed rfms --address auto --dataset geo5_sim --learners elastic_net --methods {args.methods} "
                f"--reps {args.reps} --pairs {args.pairs} --n-init {args.n_init} --n-iter {args.n_iter} --seed 0 "
                f"--out results/bench")
        cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
        name = f"raytune-fed-bench-{uuid.uuid4().hex[:8]}"
        node = SshNode()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped benchmark still ends its node
        seconds: dict[str, float] = {}
        config = workdir = env = None

        def ray(*argv: str, step: str) -> str:
            t0 = time.time()
            done = subprocess.run(["ray", *argv], cwd=workdir, env=env, capture_output=True, text=True, timeout=3600)
            seconds[step] = round(time.time() - t0, 1)
            if done.returncode != 0:
                raise SystemExit(f"ray {' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
            return done.stdout + done.stderr

        try:
            node.start()
            config = node.root / "cluster.yaml"
            config.write_text(yaml.safe_dump(launcher_config(cluster_yaml, name, node.auth(getpass.getuser()))))
            workdir = node.root / "checkout"
            env = dict(os.environ, RAY_TMPDIR=str(node.client), TMPDIR=str(node.client))
            env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
            env.pop("RAY_ADDRESS", None)

            t_bundle = time.time()
            build_bundle(ROOT, workdir / BUNDLE_DIR, ROOT / "cluster.yaml")
            seconds["bundle"] = round(time.time() - t_bundle, 1)
            t_up = time.time()
            ray("up", "--yes", "--no-config-cache", str(config), step="ray_up")
            t_exec = time.time()
            said = ray("exec", str(config), grid, step="ray_exec_grid")
            home = node.root / "fetched"
            ray("rsync-down", str(config), "~/results/bench/", f"{home}/", step="ray_rsync_down")
            units = [json.loads(p.read_text()) for p in sorted((home / "units").glob("*.json"))]
            starts = [row["unit_started"] for unit in units for row in unit["timing"]]
            ends = [row["unit_finished"] for unit in units for row in unit["timing"]]
            ray("down", "--yes", str(config), step="ray_down")
            config = None
        finally:
            if config is not None:
                subprocess.run(["ray", "down", "--yes", str(config)], cwd=workdir, env=env, capture_output=True,
                               timeout=600)
            node.stop()
            for pid in {*node.client_processes(), *pids_naming(str(control_dir(name)))}:  # the launcher's ssh
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            shutil.rmtree(control_dir(name), ignore_errors=True)
            shutil.rmtree(node.root, ignore_errors=True)

        result = {
            "grid": grid,
            "cells": len(units),
            "seconds": seconds,
            "seconds_ray_up_to_first_cell": round(min(starts) - t_up, 1),
            "seconds_ray_exec_to_first_cell": round(min(starts) - t_exec, 1),
            "seconds_first_cell_to_last_cell_end": round(max(ends) - min(starts), 1),
            "grid_said": [line for line in said.splitlines() if "cells (" in line][:1],
            "not_measured": "instance boot, image pull and package-index installs of an AWS node",
        }
        bench.figures.update(result)
        bench.headline.update({"seconds_ray_up_to_first_cell": result["seconds_ray_up_to_first_cell"]})
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
