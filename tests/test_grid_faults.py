"""Faults mid-grid, as an operator meets them: a cell's worker killed by pid, a node of a real ``ray start``
cluster lost (its cells and its site's actor with it) and brought back, a site no node declares any more.

Each grid completes in one command, with every cell stored once and rows equal to an uninterrupted
run's with the same seed (``fso_th`` included); only the cells whose own worker or node died are run
again, and each retry is reported on one line.  Marked ``faults`` (``make test`` leaves them out, ``make
test-faults`` runs them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from _ray_cluster import LocalCluster
from _sites_csv import write_sites_csv

from raytune_fed.grid import ProgressLines
from raytune_fed.store import ResultStore
from raytune_fed.workflows.rfms import RFMSSettings, run_grid

pytestmark = pytest.mark.faults

SETTINGS = dict(n_init=4, n_iter=6, n_folds=3, methods=("lso", "fso5", "fso_th", "fmo"), guard_k=0)
COMPARED = ["experiment", "method", "hypervolume", "selected", "openbox_outbag", "curator_outbag", "lockbox_loss",
            "n_refused_evaluations", "n_withheld_finals", "unit_n_ledger_queries"]


def _rows(out: Path) -> str:
    frame = pd.read_parquet(out / "results.parquet")
    return frame[COMPARED].sort_values(COMPARED[:2]).to_json()


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _running_cells(ancestor: int) -> list[int]:
    """Worker processes running a grid cell (``ray::_run_one``) that descend from ``ancestor``."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if not _cmdline(pid).startswith("ray::_run_one"):
            continue
        up = pid
        while up > 1 and up != ancestor:
            up = _parent(up)
        if up == ancestor:
            found.append(pid)
    return found


def test_a_cell_whose_worker_is_killed_is_retried_and_the_grid_equals_an_uninterrupted_one(ray_session, tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    settings = RFMSSettings(dataset=data, target="label", site_column="site", **SETTINGS)
    grid = dict(learners=["elastic_net"], n_reps=1, n_pairs=4)
    out = tmp_path / "killed"
    killed: list[int] = []

    def kill_a_running_cell() -> None:  # once a cell is stored, SIGKILL the worker of one that runs
        give_up = time.monotonic() + 900
        while time.monotonic() < give_up and not killed:
            if list((out / "units").glob("*.json")):
                for pid in _running_cells(os.getpid()):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_running_cell, daemon=True)
    killer.start()
    lines: list[str] = []
    frame = run_grid(settings, out=out, max_retries=2, progress=ProgressLines(lines.append), **grid)
    killer.join(timeout=5)
    assert killed, "no cell was running after the first one was stored"
    retried = [line for line in lines if "retrying it once a node can host it (retry 1 of 2)" in line]
    assert len(retried) == 1 and "its worker was lost (" in retried[0], lines
    store = ResultStore(out)
    keys = sorted(frame["cell_key"].unique())
    assert len(keys) == 4 and sorted(p.stem for p in store.units.glob("*.json")) == keys
    assert store.failed_keys() == set()
    assert (frame["method"] == "fso_th").sum() == 4

    run_grid(settings, out=tmp_path / "straight", **grid)
    assert _rows(out) == _rows(tmp_path / "straight")


# ----------------------------------------------------------------------------- a real multi-node cluster

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head (1 CPU, site a) and two nodes (1 CPU each, sites b and c), each its own ``ray start``."""
    logs = tmp_path_factory.mktemp("cluster_logs")
    made = LocalCluster(head_cpus=1, head_resources={"site:a": 1}, logs=logs)
    try:
        made.add("b", 1, {"site:b": 1})
        made.add("c", 1, {"site:c": 1})
        yield made
    finally:
        made.close()


def _rfms(cluster: LocalCluster, data: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label",
            "--site-column", "site", "--learners", "elastic_net", "--methods", ",".join(SETTINGS["methods"]),
            "--n-init", str(SETTINGS["n_init"]), "--n-iter", str(SETTINGS["n_iter"]), "--n-folds",
            str(SETTINGS["n_folds"]), "--pairs", "3", "--reps", "1", "--no-report", "--address", cluster.address,
            "--out", str(out), *extra]


def _cells_on(cluster: LocalCluster, node: str) -> list[int]:
    """Cell workers running in ``node``'s process group (cells run only on their openbox's node)."""
    pgid = os.getpgid(cluster.nodes[node].pid)
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if _cmdline(int(p)).startswith("ray::_run_one")]


@pytest.mark.process
def test_a_lost_node_costs_only_its_own_cells_and_a_site_no_node_declares_is_unplaceable(cluster, tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    out = tmp_path / "lost"
    argv = _rfms(cluster, data, out, "--placement-timeout", "600")
    proc = subprocess.Popen(argv, env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    give_up = time.monotonic() + 900
    while not _cells_on(cluster, "c") and proc.poll() is None and time.monotonic() < give_up:
        time.sleep(0.1)
    assert _cells_on(cluster, "c"), "no cell ever ran on node c"
    time.sleep(2.0)
    cluster.kill("c")                  # the node, its cell and site c's actor are gone
    time.sleep(3.0)
    cluster.add("c", 1, {"site:c": 1})  # the node comes back (within the placement timeout)
    stdout, stderr = proc.communicate(timeout=1800)
    assert proc.returncode == 0, stderr
    retried = [line for line in stderr.splitlines() if "retrying it once a node can host it" in line]
    assert retried and all("openbox=c " in line for line in retried), stderr  # only node c's own cells
    store = ResultStore(out)
    assert len(store) == 3 and store.failed_keys() == set()
    assert "Traceback" not in stderr

    straight = tmp_path / "straight"
    done = subprocess.run(_rfms(cluster, data, straight), env=cluster.env, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr
    assert _rows(out) == _rows(straight)
    assert json.loads((out / "summary.json").read_text()) == json.loads((straight / "summary.json").read_text())
    assert json.loads((out / "placement.json").read_text()) == {"pinned": ["site:a", "site:b", "site:c"]}

    # site c's node goes for good: a rerun with new cells neither moves c's rows to another node nor waits
    # longer than the placement timeout; every new cell is unplaceable with the reason
    cluster.kill("c")
    cluster.wait_for_nodes(2)
    sites_before = sorted(p.name for p in (out / "sites").iterdir())
    argv = _rfms(cluster, data, out, "--placement-timeout", "5")
    argv[argv.index("--reps") + 1] = "2"
    rerun = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 1, rerun.stderr
    assert "rfms: 6 cells (3 already done), 3 to run" in rerun.stderr
    assert "no live node declares 'site:c': this grid's sites are pinned to the nodes that declare them" \
        in rerun.stderr and "waited 5 s (placement_timeout)" in rerun.stderr
    assert sorted(p.name for p in (out / "sites").iterdir()) == sites_before  # no site was started anywhere
    assert len(ResultStore(out)) == 3 and len(ResultStore(out).failed_keys()) == 3
    cluster.add("c", 1, {"site:c": 1})
