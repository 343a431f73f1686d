"""cluster.yaml's node types under Ray's autoscaler: a grid's demand starts a worker and its site's node,
a worker node lost mid-grid costs no cell, and idle nodes go away.

The cluster is Ray's fake multi-node provider (``tests/_fake_cluster.py``): the autoscaler v2
that ``ray up`` runs, starting and stopping nodes that are raylet processes on this machine,
with cluster.yaml's node types (``fake_node_types``: same names, min_workers and custom
resources, one CPU per node, at most two of a type).  The head starts with one CPU, announces
its node types (cluster.yaml's ``raytune-fed cluster announce``), and no worker runs.  The
grid has two openbox/lockbox pairs; the site node type is renamed to the first pair's
openbox, as cluster.yaml tells a user to do for each site.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from _fake_cluster import FakeCluster, fake_node_types
from raytune_fed.data import load_dataset

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["rfms", "--dataset", "geo5_sim", "--learners", "elastic_net", "--methods", "lso,fmo", "--reps", "2",
        "--pairs", "2", "--n-init", "2", "--n-iter", "1", "--seed", "0", "--no-report"]
HANG = 1800  # seconds: bounds a hang only
CLI = str(Path(sys.executable).with_name("raytune-fed"))


def _rows(path: Path) -> pd.DataFrame:
    frame = pd.read_parquet(path / "results.parquet")
    frame = frame.drop(columns=[c for c in frame.columns if c == "seconds" or c.startswith("unit_")])
    return frame.sort_values(["cell_key", "method"]).reset_index(drop=True)


def test_fake_node_types_are_cluster_yamls():
    cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    fake = fake_node_types(cluster_yaml, sites={"site:site0": "site:hospital1"})
    real = cluster_yaml["available_node_types"]
    assert set(fake["available_node_types"]) == set(real)
    assert fake["head_node_type"] == cluster_yaml["head_node_type"]
    for name, node_type in real.items():
        mine = fake["available_node_types"][name]
        custom = {r.replace("site:site0", "site:hospital1"): v for r, v in node_type["resources"].items() if r != "CPU"}
        assert {r: v for r, v in mine["resources"].items() if r != "CPU"} == custom
        assert mine["resources"]["CPU"] == 1
        if name != cluster_yaml["head_node_type"]:
            assert mine["min_workers"] == node_type.get("min_workers", 0)
            assert 1 <= mine["max_workers"] <= node_type["max_workers"]
    assert fake["upscaling_speed"] == cluster_yaml["upscaling_speed"]


@pytest.mark.cluster
@pytest.mark.process
def test_grid_demand_starts_worker_and_site_node_survives_a_lost_node_and_scales_down(tmp_path):
    # the reference: the same grid in this process (sites local); its first pair's openbox gets a node type
    local = tmp_path / "local"
    done = subprocess.run([CLI, *ARGS, "--sites", "local", "--out", str(local)], capture_output=True, text=True,
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    reference = _rows(local)
    openbox = reference["openbox"].iloc[0]
    site = load_dataset("geo5_sim").site_names[openbox]  # the natural split: one site per dataset site
    pinned_cells = reference.loc[reference["openbox"] == openbox, "cell_key"].nunique()
    assert 0 < pinned_cells < reference["cell_key"].nunique(), "some cells pinned to the site node, some free"

    cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    site_type = next(n for n, t in cluster_yaml["available_node_types"].items() if "site:site0" in t["resources"])
    head_type = cluster_yaml["head_node_type"]
    cluster = FakeCluster(fake_node_types(cluster_yaml, sites={"site:site0": f"site:{site}"}))
    out = tmp_path / "cluster"
    log = open(tmp_path / "grid.log", "w")
    grid = None
    try:
        cluster.start()
        assert f"custom resources offered: site:{site}" in cluster.announced
        assert [t for _, t in cluster.nodes().values()] == [head_type], "no worker before the grid asks"

        grid = subprocess.Popen([CLI, *ARGS, "--address", cluster.address, "--out", str(out)], env=cluster.driver_env(),
                                stdout=log, stderr=subprocess.STDOUT, text=True)
        seen, cells_on, actors_on, killed = set(), set(), set(), None
        give_up = time.monotonic() + HANG
        while grid.poll() is None and time.monotonic() < give_up:
            nodes = cluster.nodes()
            seen |= {t for _, t in nodes.values()}
            cells = cluster.workers_running("_run_one")
            cells_on |= {t for _, t in cells.values()}
            actors_on |= {t for _, t in cluster.workers_running("SiteActor").values()}
            busy = [node for node, t in cells.values() if nodes.get(node, (0, ""))[1] not in (head_type, site_type)]
            if killed is None and busy:  # a general worker node runs a cell: lose that node
                killed = busy[0]
                cluster.kill_node(killed)
            time.sleep(0.5)
        if grid.poll() is None:
            grid.kill()
        log.close()
        said = (tmp_path / "grid.log").read_text()
        assert grid.wait() == 0, said[-3000:]

        workers = set(cluster_yaml["available_node_types"]) - {head_type, site_type}
        assert seen >= {site_type} and seen & workers, f"the demand started a worker and the site node: {seen}"
        assert killed is not None, "a worker node ran a cell and was killed"
        assert site_type in actors_on and site_type in cells_on, "the site's actor and its cells ran on its node"
        n_cells = reference["cell_key"].nunique()
        assert f"{n_cells} cells (0 already done), {n_cells} to run" in said
        assert len(list((out / "units").glob("*.json"))) == n_cells
        assert not (out / "failures").exists() or not any((out / "failures").iterdir()), "no cell failed"
        pd.testing.assert_frame_equal(_rows(out), reference)  # every cell once, as computed on one machine

        # idle nodes are stopped: the cluster shrinks to its head
        give_up = time.monotonic() + HANG
        while sorted(t for _, t in cluster.nodes().values()) != [head_type] and time.monotonic() < give_up:
            time.sleep(1)
        assert sorted(t for _, t in cluster.nodes().values()) == [head_type]
    finally:
        if grid is not None and grid.poll() is None:
            grid.kill()
            grid.wait()
        if not log.closed:
            log.close()
        cluster.stop()
    assert cluster.processes() == {}, "every process of the cluster ended"
