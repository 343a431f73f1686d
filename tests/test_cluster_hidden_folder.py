"""A site's node that cannot read the driver's folders, as a node on another machine: the grid still
lands every cell, with the rows of a one-process run.

A real ``ray start`` cluster on this machine: the head (the driver's node) and one node that declares
every site of the grid, so each site's actor and every cell run there (the grid is pinned).  That node
runs in a mount namespace of its own where the test's folder (the driver's working directory, its
relative ``--out``, the dataset) is an empty read-only tmpfs and its working directory, so the
shared-filesystem shortcut is gone: a site's rows reach it only through Ray's object store, and its
ledger lives on that node.  Before, the driver wrote each site's rows to ``OUT/sites/*/<site>.ledger.jsonl
.rows.npz`` and the actor opened that path on its node: exit 2, "cannot read arrays X and y from ...".
That test is marked ``cluster`` (``make test-cluster``; root, for ``unshare --mount``).  The other one
runs on the shared local session: a site actor started from a relative ledger path writes no rows
file, and a restart resolves its rows from the object store again.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from _ray_cluster import LocalCluster
from _sites_csv import write_sites_csv

from raytune_fed.federation import Policy, SiteClient, remote_site
from raytune_fed.store import ResultStore
from raytune_fed.workflows.rfms import RFMSSettings, run_grid

SETTINGS = dict(n_init=2, n_iter=2, n_folds=3, methods=("lso", "fso5", "fso_th", "fmo"), guard_k=0)
COMPARED = ["cell_key", "experiment", "method", "hypervolume", "selected", "openbox_outbag", "curator_outbag",
            "lockbox_loss", "n_refused_evaluations", "n_withheld_finals", "unit_n_ledger_queries"]
SITES = {"site:a": 1, "site:b": 1, "site:c": 1}
HANG = 1800  # seconds: bounds a hang only

SEEN_FROM_THE_NODE = """
import json, os, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
look = ray.remote(num_cpus=0, resources={"site:a": 0.001})(
    lambda d: {"entries": os.listdir(d), "writable": os.access(d, os.W_OK), "cwd": os.getcwd()})
print("seen: " + json.dumps(ray.get(look.remote(sys.argv[2]))))
"""


def _rows(frame: pd.DataFrame) -> str:
    return frame[COMPARED].sort_values(COMPARED[:3]).to_json()


@pytest.mark.cluster
@pytest.mark.process
def test_a_grid_whose_site_node_cannot_read_the_drivers_folders_lands_every_cell(tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    work = tmp_path / "work"  # the driver's working directory; its --out is relative to it
    work.mkdir()
    temp = Path(tempfile.mkdtemp(prefix="rtf-hidden-"))  # Ray's own folder: outside the hidden one, short
    cluster = LocalCluster(head_cpus=1, temp_dir=temp)
    try:
        cluster.add("sites", 1, SITES, hidden=tmp_path)
        seen = subprocess.run([sys.executable, "-c", SEEN_FROM_THE_NODE, cluster.address, str(tmp_path)],
                              env=cluster.env, capture_output=True, text=True, timeout=HANG)
        said = [line[len("seen: "):] for line in seen.stdout.splitlines() if line.startswith("seen: ")]
        assert said, seen.stderr[-2000:]
        assert json.loads(said[-1]) == {"entries": [], "writable": False, "cwd": str(tmp_path)}
        argv = [sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label",
                "--site-column", "site", "--learners", "elastic_net", "--methods", ",".join(SETTINGS["methods"]),
                "--n-init", str(SETTINGS["n_init"]), "--n-iter", str(SETTINGS["n_iter"]), "--n-folds",
                str(SETTINGS["n_folds"]), "--guard-k", "0", "--pairs", "3", "--reps", "1", "--no-report",
                "--address", cluster.address, "--placement-timeout", "600", "--out", "out"]
        done = subprocess.run(argv, cwd=work, env=cluster.env, capture_output=True, text=True, timeout=HANG)
        assert done.returncode == 0, done.stderr[-3000:]
        ledgers = {p.name for p in temp.glob("session_*/raytune_fed_sites/*/*.ledger.jsonl")}
    finally:
        cluster.close()
        shutil.rmtree(temp, ignore_errors=True)

    out = work / "out"
    store = ResultStore(out)
    frame = pd.read_parquet(out / "results.parquet")
    keys = sorted(frame["cell_key"].unique())
    assert len(keys) == 3 and sorted(p.stem for p in store.units.glob("*.json")) == keys
    assert store.failed_keys() == set() and (frame["method"] == "fso_th").sum() == 3
    assert json.loads((out / "placement.json").read_text()) == {"pinned": sorted(SITES)}
    # the rows travelled through Ray's object store, and each site's ledger lives on its node
    assert not list(out.rglob("*.npz")) and not list(out.rglob("*.ledger.jsonl*"))
    assert ledgers == {"a.ledger.jsonl", "b.ledger.jsonl", "c.ledger.jsonl"}

    settings = RFMSSettings(dataset=data, target="label", site_column="site", **SETTINGS)
    here = run_grid(settings, learners=["elastic_net"], n_reps=1, n_pairs=3, out=tmp_path / "one_process",
                    sites="local")
    assert _rows(frame) == _rows(here)


@pytest.mark.ray
def test_a_site_actor_writes_no_rows_file_and_a_restart_resolves_its_rows_again(ray_session, tmp_path,
                                                                                monkeypatch):
    """Old: ``remote_site`` wrote ``<ledger>.rows.npz`` for the actor to open on its node (with a relative
    ledger path, relative to whatever folder the actor's process had: it died)."""
    from attack_kit import stump
    from site_targets import OWNER, SCHEDULE, SITE, UNIT, X, Y

    monkeypatch.chdir(tmp_path)
    actor = remote_site(X, Y, Policy.from_mapping({"name": SITE, "seed": 11, "ledger": "ledger.jsonl"}),
                        owner_secret=OWNER)
    try:
        client = SiteClient(actor, name=SITE)
        client.declare_schedule(SCHEDULE)
        session = client.open_session(UNIT, "curator")
        first = session.query(stump(0, 0.0))
        pid = ray_session.get(actor.__ray_call__.remote(lambda self: os.getpid()))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.jsonl", "ledger.jsonl.head"]
        gc.collect()  # nothing of the driver's but the handle keeps the rows' objects now
        ray_session.kill(actor, no_restart=False)
        again = session.query(stump(1, 0.0))  # answered by the restarted actor, from the rows it resolved again
        assert ray_session.get(actor.__ray_call__.remote(lambda self: os.getpid())) != pid
        assert again.n_rows == first.n_rows == 128 and session.status().n_queries == 2
    finally:
        ray_session.kill(actor)
