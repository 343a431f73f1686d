"""One seed in, the same numbers out, for each workflow's command: a run on a local session of one
CPU, and a run on two CPUs stopped by SIGTERM mid-run and resumed by the same command, give the
same ``results.parquet`` (timing columns aside) and the same ``summary.json``.

Each command starts its own local Ray session (``--num-cpus``), so nothing is shared with another
test.  Marked ``faults`` (three sessions per workflow; ``make test`` leaves them out, ``make
test-faults`` runs them).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from _sites_csv import write_sites_csv

from raytune_fed.store import ResultStore

pytestmark = [pytest.mark.faults, pytest.mark.process]

RAYTUNE_FED = [sys.executable, "-m", "raytune_fed.cli"]


def _stored(out: Path) -> int:
    """Finished grid cells (RFMS, PU) or finished CMOSB trials, as the output directory shows them."""
    units = list((out / "units").glob("*.json")) if (out / "units").is_dir() else []
    trials = list((out / "tune").glob("*/*/result.json")) if (out / "tune").is_dir() else []
    return len(units) + sum(1 for t in trials if t.stat().st_size > 0)


def _stopped_then_resumed(argv: list[str], out: Path) -> None:
    """Run ``argv``, SIGTERM it once it has stored a result, check it exits 143 and keeps no summary, then run
    the same command to the end."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while _stored(out) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"the command ended before it was stopped: {proc.communicate()[1]}"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 143, stderr
    assert "raytune-fed: terminated (SIGTERM)" in stderr and "Traceback" not in stderr
    assert not (out / "summary.json").exists()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr


def _measured(out: Path) -> set[str]:
    """The columns a grid's cells measured with a clock (each record's ``timing``): never compared."""
    store = ResultStore(out)
    return {column for unit in store.units.glob("*.json") for timing in store.load(unit.stem).timing
            for column in timing}


def _same_output(argv: list[str], tmp_path: Path, varying: list[str], order: list[str]) -> None:
    once, resumed = tmp_path / "one_cpu", tmp_path / "two_cpus_resumed"
    done = subprocess.run([*argv, "--num-cpus", "1", "--out", str(once)], capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr
    _stopped_then_resumed([*argv, "--num-cpus", "2", "--out", str(resumed)], resumed)
    if (once / "units").is_dir():
        varying = sorted(_measured(once) | _measured(resumed))
    frames = [pd.read_parquet(d / "results.parquet").drop(columns=varying).sort_values(order, ignore_index=True)
              for d in (once, resumed)]
    pd.testing.assert_frame_equal(frames[0], frames[1], check_exact=True)
    # a summary's "timings" (PU: the grid's and Table 6's seconds) are what a clock measured; the rest repeats
    summaries = [{k: v for k, v in json.loads((d / "summary.json").read_text()).items() if k != "timings"}
                 for d in (once, resumed)]
    assert summaries[0] == summaries[1]


def test_rfms_on_one_cpu_equals_two_cpus_stopped_and_resumed(tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    argv = [*RAYTUNE_FED, "rfms", "--dataset", data, "--target", "label", "--site-column", "site", "--learners",
            "elastic_net", "--methods", "lso,fso5,fso_th,fmo", "--n-init", "4", "--n-iter", "6", "--n-folds", "3",
            "--pairs", "3", "--reps", "1", "--guard-k", "0", "--seed", "3", "--no-report"]
    _same_output(argv, tmp_path, [], ["cell_key", "method"])


def test_pu_on_one_cpu_equals_two_cpus_stopped_and_resumed(tmp_path):
    argv = [*RAYTUNE_FED, "pu", "--dataset", "titanic", "--c", "0.2", "--methods", "ode,upu", "--reps", "2",
            "--baseline-configs", "3", "--schedule", "sh", "--seed", "3", "--no-report"]
    _same_output(argv, tmp_path, [], ["cell_key"])


def test_cmosb_on_one_cpu_equals_two_cpus_stopped_and_resumed(tmp_path):
    argv = [*RAYTUNE_FED, "cmosb", "--dataset", "synthetic1", "--population", "4", "--generations", "2",
            "--baselines", "es,bo", "--bo-trials", "4", "--attack-sample", "100", "--seed", "3"]
    _same_output(argv, tmp_path, ["trial_id", "finished_at", "fit_seconds", "attack_seconds"],
                 ["run", "generation", "slot", "preset", *PARAMETERS])


PARAMETERS = ["n_federated_trees", "n_local_trees", "max_depth", "subsample", "purity_threshold", "learning_rate"]
