"""One seed, the same numbers, whichever BLAS kernel, thread count, load or order computes them.

OpenBLAS picks its kernel by the CPU it runs on, so two machines (or a CI runner and a laptop)
round differently.  Three results once moved with that choice: the CMOSB attack on a view of
more components than classes (eps_p 0.533 under the SkylakeX kernel, 0.540 under Haswell),
ODE's selection on sat at c = 0.01 (two ridge penalties scored alike to 11 digits, ranked by
the rest), and WSVM on a four-row titanic split (weights of 1 - 9e-13 kept as negatives).
Each child process below computes the three under one ``OPENBLAS_CORETYPE`` (the kernels
this CPU can run) and a thread count, in one order or the reverse, one of them beside a busy
loop; every child must print the same numbers.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

_CHILD = r"""
import json, sys
import numpy as np

def cmosb():
    from raytune_fed.crypto import REFERENCE_OP_TIMES
    from raytune_fed.workflows.cmosb import evaluate, load_task
    config = {"n_federated_trees": 2, "n_local_trees": 13, "max_depth": 1, "subsample": 0.1888043810179868,
              "purity_threshold": 0.9166455088042935, "learning_rate": 0.03366644535137294}
    e = evaluate(load_task("synthetic1"), config, op_times=REFERENCE_OP_TIMES, seed=4, n_sample=150)
    return [e.utility_loss, e.privacy_leakage]

def ode():
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, run_cell
    cell = PUCell("sat", 0.01, 2, "ode", "ipm", "selfpaced", True, settings=PUGridSettings(datasets=("sat",)))
    row = run_cell(cell).rows[0]
    return [row["test_auc"], row["config"]]

def wsvm():
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, run_cell
    cell = PUCell("titanic", 0.01, 7, "wsvm", None, None, None, settings=PUGridSettings(datasets=("titanic",)))
    row = run_cell(cell).rows[0]
    return [None if row["test_auc"] != row["test_auc"] else row["test_auc"], row["no_selection"]]

jobs = {"cmosb": cmosb, "ode": ode, "wsvm": wsvm}
order = list(jobs) if sys.argv[1] == "forward" else list(jobs)[::-1]
print(json.dumps({name: jobs[name]() for name in order}, sort_keys=True))
"""


def _kernels() -> list[str]:
    """OpenBLAS kernels this CPU can run: its own choice (None) and older ones its instruction set covers."""
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
        kernels = ["Prescott"]
        if "avx" in flags:
            kernels.append("Sandybridge")
        if "avx2" in flags and "fma" in flags:
            kernels.append("Haswell")
        return kernels
    if machine in ("aarch64", "arm64"):
        return ["ARMV8"]
    return []


def _run(kernel: str | None, threads: int, order: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), PYTHONHASHSEED="0")
    if kernel is not None:
        env["OPENBLAS_CORETYPE"] = kernel
    done = subprocess.run([sys.executable, "-c", _CHILD, order], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_attack_the_ode_selection_and_wsvm_give_the_same_numbers_under_every_blas_kernel():
    runs = {("own", 2, "forward"): _run(None, 2, "forward")}
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        runs[("own", 1, "reverse", "busy")] = _run(None, 1, "reverse")
    finally:
        busy.kill()
        busy.wait()
    for kernel in _kernels():
        runs[(kernel, 1, "forward")] = _run(kernel, 1, "forward")
    reference = runs[("own", 2, "forward")]
    assert reference["wsvm"][0] is None and "no negative is left" in reference["wsvm"][1]
    for key, result in runs.items():
        assert result == reference, (key, result, reference)
    assert len(runs) >= 3
