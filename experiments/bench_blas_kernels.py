"""Do the same seeds give the same numbers under every OpenBLAS kernel this CPU can run?

    python experiments/bench_blas_kernels.py                      # this checkout
    python experiments/bench_blas_kernels.py --before 18d545e     # and the code of another revision, same run

OpenBLAS picks its kernel by the CPU, so machines round differently.  One child process per
kernel (``OPENBLAS_CORETYPE``: the CPU's own choice, then Prescott, Sandybridge, Haswell and
SkylakeX where the instruction set allows) computes, on one BLAS thread:

- CMOSB: ``evaluate`` of ``--configs`` random SecureBoost configurations on Synthetic1 (seed
  ``i`` for configuration ``i``, attack sample 300): utility loss and eps_p;
- ODE: the IPM selection (self-paced, control variate) on sat at c = 0.01, ``--reps``
  replications: test AUC and the configuration selected.

The JSON (``--out``) holds each kernel's numbers and, per workload, how many items differ
from the CPU's own kernel; with ``--before`` the same for the other revision.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()


def _child(n_configs: int, n_reps: int) -> dict:
    import numpy as np

    from raytune_fed.crypto import REFERENCE_OP_TIMES
    from raytune_fed.workflows.cmosb import evaluate, load_task
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, run_cell

    task, rng, cmosb = load_task("synthetic1"), np.random.default_rng(0), []
    for i in range(n_configs):
        config = {"n_federated_trees": int(rng.integers(1, 17)), "n_local_trees": int(rng.integers(0, 17)),
                  "max_depth": int(rng.integers(1, 9)), "subsample": float(rng.uniform(0.1, 1)),
                  "purity_threshold": float(rng.uniform(0.7, 1)), "learning_rate": float(rng.uniform(0.01, 0.3))}
        e = evaluate(task, config, op_times=REFERENCE_OP_TIMES, seed=i, n_sample=300)
        cmosb.append([e.utility_loss, e.privacy_leakage])
    settings, ode = PUGridSettings(datasets=("sat",)), []
    for rep in range(n_reps):
        row = run_cell(PUCell("sat", 0.01, rep, "ode", "ipm", "selfpaced", True, settings=settings)).rows[0]
        ode.append([row["test_auc"], row["config"]])
    return {"cmosb": cmosb, "ode": ode}


def kernels() -> list[str | None]:
    """None (the CPU's own choice), then the kernels whose instructions this CPU has."""
    flags = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    if platform.machine() not in ("x86_64", "AMD64"):
        return [None]
    chosen: list[str | None] = [None, "Prescott"]
    chosen += ["Sandybridge"] if "avx" in flags else []
    chosen += ["Haswell"] if {"avx2", "fma"} <= flags else []
    chosen += ["SkylakeX"] if "avx512f" in flags else []
    return chosen


def measure(tree: Path | None, n_configs: int, n_reps: int) -> dict:
    runs = {}
    for kernel in kernels():
        env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        if kernel:
            env["OPENBLAS_CORETYPE"] = kernel
        argv = [str(HERE), "--child", "--configs", str(n_configs), "--reps", str(n_reps)]
        if tree is None:
            command = [sys.executable, *argv]
        else:
            from _revisions import _BOOTSTRAP

            command = [sys.executable, "-c", _BOOTSTRAP, str(tree), *argv]
            env["PYTHONPATH"] = str(tree)
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True,
                              cwd=tree or HERE.parent.parent)
        runs[kernel or "own"] = json.loads(done.stdout.strip().splitlines()[-1])
    own = runs["own"]
    differ = {kernel: {part: sum(a != b for a, b in zip(own[part], result[part])) for part in own}
              for kernel, result in runs.items() if kernel != "own"}
    return {"differ_from_own_kernel": differ, "runs": runs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", type=int, default=40)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--before", help="also measure the code of this git revision")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="experiments/measured/bench_blas_kernels.json")
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(args.configs, args.reps)))
        return
    from _harness import Benchmark
    from _revisions import checkout

    with Benchmark("bench_blas_kernels", args.out) as bench:
        bench.figures.update(configs=args.configs, reps=args.reps, now=measure(None, args.configs, args.reps))
        if args.before:
            with checkout(args.before) as tree:
                bench.figures["before"] = {"revision": args.before, **measure(tree, args.configs, args.reps)}
    for name in ("now", "before"):
        if name in bench.figures:
            print(name, bench.figures[name].get("revision", "this checkout"),
                  bench.figures[name]["differ_from_own_kernel"])

if __name__ == "__main__":
    main()
