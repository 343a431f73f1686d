"""Stopping the command line mid-grid: Ctrl-C (SIGINT) and SIGTERM leave a store that the same
command resumes, to results identical to an uninterrupted run.

The commands run in subprocesses that join the tests' shared Ray session (``--address``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from _sites_csv import write_sites_csv

from raytune_fed.store import ResultStore
from raytune_fed.workflows.rfms import RFMSSettings, run_grid

SETTINGS = dict(n_init=4, n_iter=6, n_folds=3, methods=("lso", "fso_th", "fmo"))
"""fso_th included: each site's Thresholdout noise is keyed by what is asked, so resumed rows equal
uninterrupted ones whatever order the cells' queries reach the sites in."""


def _units(out) -> int:
    return len(list((out / "units").glob("*.json"))) if (out / "units").is_dir() else 0


def _stop_after_next_cell(argv, out, sig) -> subprocess.CompletedProcess:
    before = _units(out)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while _units(out) <= before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def test_sigint_and_sigterm_then_the_same_command_match_an_uninterrupted_run(ray_session, tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    out = tmp_path / "interrupted"
    argv = [sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label",
            "--site-column", "site", "--learners", "svm", "--methods", ",".join(SETTINGS["methods"]),
            "--n-init", str(SETTINGS["n_init"]), "--n-iter", str(SETTINGS["n_iter"]),
            "--n-folds", str(SETTINGS["n_folds"]), "--pairs", "3", "--reps", "2", "--no-report", "--guard-k", "0",
            "--address", ray_session.get_runtime_context().gcs_address, "--out", str(out)]
    for sig, code, said in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")):
        stopped = _stop_after_next_cell(argv, out, sig)
        assert stopped.returncode == code, stopped.stderr
        assert f"raytune-fed: {said}; the finished cells are kept in {out}; run the same command again to resume" \
            in stopped.stderr.splitlines()
        assert "Traceback" not in stopped.stderr
        assert not (out / "results.parquet").exists() and not (out / "summary.json").exists()
    assert 2 <= _units(out) < 6
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    assert "already done" in finished.stderr and _units(out) == 6

    # guard off: the sites' differencing guard remembers the answers of every earlier cell, so with it on a
    # resumed run (fresh sites that never saw the skipped cells) can refuse other models than an uninterrupted one.
    # The uninterrupted run keeps its sites in this process (no Ray): the sites answer alike in every deployment,
    # so its rows are those of an uninterrupted run on actor sites, without starting another grid's actors
    settings = RFMSSettings(dataset=data, target="label", site_column="site", guard_k=0, **SETTINGS)
    straight = run_grid(settings, learners=["svm"], n_reps=2, n_pairs=3, out=tmp_path / "straight", sites="local")
    resumed, once = ResultStore(out), ResultStore(tmp_path / "straight")
    keys = sorted(straight["cell_key"].unique())
    assert sorted(p.stem for p in resumed.units.glob("*.json")) == keys
    assert all(resumed.load(k).rows == once.load(k).rows for k in keys)
    assert json.loads((out / "summary.json").read_text()) == json.loads(
        (tmp_path / "straight" / "summary.json").read_text())


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(todo.pop())], capture_output=True, text=True).stdout
        kids = {int(p) for p in out.split()}
        todo += list(kids - found)
        found |= kids
    return found


@pytest.mark.process
def test_sigterm_while_ray_starts_exits_143_and_leaves_no_process(tmp_path):
    """The command starts its own local session and SIGTERM arrives as soon as Ray's first process exists:
    the command ends with 143 and its message, and takes the processes Ray started along (which signal
    handler sees the SIGTERM depends on timing: ``tests/test_runtime_signals.py`` covers each)."""
    out = tmp_path / "out"
    data = write_sites_csv(tmp_path / "three_sites.csv")
    argv = [sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label",
            "--site-column", "site", "--learners", "elastic_net", "--methods", "lso", "--n-init", "2", "--n-iter",
            "1", "--n-folds", "2", "--pairs", "1", "--reps", "1", "--num-cpus", "1", "--no-report", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, started = time.monotonic() + 300, set()
    while not started and proc.poll() is None and time.monotonic() < deadline:
        started = _descendants(proc.pid)
        time.sleep(0.02)
    assert started, "Ray never started a process"
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert f"raytune-fed: terminated (SIGTERM); the finished cells are kept in {out}; run the same command again " \
           f"to resume" in stderr.splitlines() and "Traceback" not in stderr
    assert not (out / "results.parquet").exists()
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") for pid in started) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [pid for pid in started if os.path.exists(f"/proc/{pid}")], "Ray processes outlived the command"
