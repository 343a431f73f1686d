"""cluster.yaml's node types under Ray's autoscaler: a grid's demand starts the nodes it needs, a node
lost mid-grid costs no cell, and idle nodes go away.

The cluster is Ray's fake multi-node provider (``tests/_fake_cluster.py``): the autoscaler v2
that ``ray up`` runs, starting and stopping nodes that are raylet processes on this machine,
with cluster.yaml's node types (``fake_node_types``: same names, min_workers and custom
resources, one CPU per node, at most two of a type).  The head starts with one CPU, announces
its node types (cluster.yaml's ``raytune-fed cluster announce``), and no worker runs.  The
grid has two openbox/lockbox pairs of geo5_sim's five sites.

Two clusters, as a user would set them up:

- labelled: the file ``raytune-fed cluster node-types --dataset geo5_sim`` writes from
  cluster.yaml (its site node type template replaced by one node type per site).  The grid
  is pinned: every site's actor starts on its own node and every cell on its openbox's node,
  so the demand starts the site nodes and no general worker; the node of a running cell is
  lost and the autoscaler brings it back.
- unlabelled: the template as shipped (``site:site0``, which no site of the grid is).  Sites
  and cells run anywhere, so the demand starts general workers; one running a cell is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _fake_cluster import FakeCluster, fake_node_types

from raytune_fed.cluster import SITE_NODE_TYPE, write_site_node_types
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
    real = cluster_yaml["available_node_types"]
    template = next(n for n, t in real.items() if "site:site0" in t["resources"])
    for sites in ((), ("hospital1", "hospital2")):
        fake = fake_node_types(cluster_yaml, sites=sites)
        copies = {template.replace("site0", s): s for s in sites} or {template: "site0"}
        assert set(fake["available_node_types"]) == (set(real) - {template}) | set(copies)
        assert fake["head_node_type"] == cluster_yaml["head_node_type"]
        for name, mine in fake["available_node_types"].items():
            site = copies.get(name)
            node_type = real[template if site else name]
            custom = {r.replace("site0", site or "site0"): v for r, v in node_type["resources"].items() if r != "CPU"}
            assert {r: v for r, v in mine["resources"].items() if r != "CPU"} == custom
            assert mine["resources"]["CPU"] == 1
            if name != cluster_yaml["head_node_type"]:
                assert mine["min_workers"] == node_type.get("min_workers", 0)
                assert 1 <= mine["max_workers"] <= node_type["max_workers"]
        assert fake["upscaling_speed"] == cluster_yaml["upscaling_speed"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> pd.DataFrame:
    """The same grid in one process (sites local): the rows every cluster run must give."""
    local = tmp_path_factory.mktemp("local")
    done = subprocess.run([CLI, *ARGS, "--sites", "local", "--out", str(local)], capture_output=True, text=True,
                          timeout=HANG)
    assert done.returncode == 0, done.stderr
    return _rows(local)


def _grid_on(cluster: FakeCluster, out: Path, lose: Callable[[str], bool]) -> dict:
    """Run the grid on ``cluster``; the first node of a type ``lose`` picks that runs a cell is killed.
    What was seen: node types, where cells and site actors ran (node types), the killed node, the log."""
    seen, cells_on, actors_on, killed = set(), {}, {}, None
    log = open(out.parent / f"{out.name}.log", "w")
    grid = subprocess.Popen([CLI, *ARGS, "--address", cluster.address, "--out", str(out)], env=cluster.driver_env(),
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        give_up = time.monotonic() + HANG
        while grid.poll() is None and time.monotonic() < give_up:
            nodes = cluster.nodes()
            seen |= {t for _, t in nodes.values()}
            cells = cluster.workers_running("_run_one")
            for pid, (_, t) in cells.items():
                cells_on[pid] = t
            for pid, (_, t) in cluster.workers_running("SiteActor").items():
                actors_on[pid] = t
            busy = [node for node, t in cells.values() if lose(nodes.get(node, (0, ""))[1])]
            if killed is None and busy:
                killed = nodes[busy[0]][1]
                cluster.kill_node(busy[0])
            time.sleep(0.5)
    finally:
        if grid.poll() is None:
            grid.kill()
        code = grid.wait()
        log.close()
    said = (out.parent / f"{out.name}.log").read_text()
    assert code == 0, said[-3000:]
    return {"seen": seen, "cells_on": cells_on, "actors_on": actors_on, "killed": killed, "said": said}


def _check_rows_and_scale_down(cluster: FakeCluster, out: Path, said: str, reference: pd.DataFrame) -> None:
    n_cells = reference["cell_key"].nunique()
    assert f"{n_cells} cells (0 already done), {n_cells} to run" in said
    assert "retry" in said, "the cell of the lost node was run again, and the grid said so"
    assert len(list((out / "units").glob("*.json"))) == n_cells
    assert not (out / "failures").exists() or not any((out / "failures").iterdir()), "no cell failed"
    pd.testing.assert_frame_equal(_rows(out), reference)  # every cell once, as computed on one machine
    head_type = cluster.head_type
    give_up = time.monotonic() + HANG  # idle nodes are stopped: the cluster shrinks to its head
    while sorted(t for _, t in cluster.nodes().values()) != [head_type] and time.monotonic() < give_up:
        time.sleep(1)
    assert sorted(t for _, t in cluster.nodes().values()) == [head_type]


@pytest.mark.cluster
@pytest.mark.process
def test_labelled_cluster_starts_each_sites_node_keeps_rows_there_and_replaces_a_lost_one(tmp_path, reference):
    generated = tmp_path / "cluster.geo5.yaml"  # what `raytune-fed cluster node-types --dataset geo5_sim` writes
    sites = write_site_node_types("geo5_sim", generated, ROOT / "cluster.yaml")
    assert sites == load_dataset("geo5_sim").site_names  # the natural split: one site per dataset site
    site_type = {SITE_NODE_TYPE.format(site=s): s for s in sites}
    openboxes = {sites[o] for o in reference["openbox"]}
    cluster = FakeCluster(fake_node_types(yaml.safe_load(generated.read_text())))
    try:
        cluster.start()
        for site in sites:
            assert f"site:{site}" in cluster.announced
        assert [t for _, t in cluster.nodes().values()] == [cluster.head_type], "no worker before the grid asks"
        out = tmp_path / "cluster"
        run = _grid_on(cluster, out, lose=lambda t: t in site_type)
        assert run["seen"] - {cluster.head_type} == set(site_type), f"each site's node and no other: {run['seen']}"
        assert set(run["actors_on"].values()) == set(site_type), "each site's actor on a site node"
        assert {site_type[t] for t in run["cells_on"].values()} == openboxes, "cells only on their openbox's node"
        assert site_type.get(run["killed"]) in openboxes, "the node of a running cell was lost"
        assert json.loads((out / "placement.json").read_text()) == {"pinned": sorted(f"site:{s}" for s in sites)}
        _check_rows_and_scale_down(cluster, out, run["said"], reference)
    finally:
        cluster.stop()
    assert cluster.processes() == {}, "every process of the cluster ended"


@pytest.mark.cluster
@pytest.mark.process
def test_unlabelled_cluster_runs_cells_on_workers_and_survives_a_lost_worker(tmp_path, reference):
    cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    template = next(n for n, t in cluster_yaml["available_node_types"].items() if "site:site0" in t["resources"])
    workers = set(cluster_yaml["available_node_types"]) - {cluster_yaml["head_node_type"], template}
    cluster = FakeCluster(fake_node_types(cluster_yaml))
    try:
        cluster.start()
        assert [t for _, t in cluster.nodes().values()] == [cluster.head_type], "no worker before the grid asks"
        out = tmp_path / "cluster"
        run = _grid_on(cluster, out, lose=lambda t: t in workers)
        assert run["seen"] & workers, f"the demand started a general worker: {run['seen']}"
        assert run["killed"] in workers, "a general worker ran a cell and was lost"
        assert set(run["cells_on"].values()) & workers, "cells ran on general workers"
        assert not (out / "placement.json").exists(), "nothing declares the grid's sites: not pinned"
        _check_rows_and_scale_down(cluster, out, run["said"], reference)
    finally:
        cluster.stop()
    assert cluster.processes() == {}, "every process of the cluster ended"
