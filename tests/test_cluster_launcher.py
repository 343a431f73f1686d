"""`ray up` for real: cluster.yaml's commands brought up over ssh on a node of this machine, used, torn down.

The node is Ray's on-premise provider (``provider: type: local``, ``head_ip: 127.0.0.1``)
against Debian's sshd in namespaces of its own (see ``tests/_ssh_node.py``): ``ray up``
syncs the real file mounts (the bundle ``raytune-fed cluster bundle`` built), runs
cluster.yaml's setup and head start commands verbatim (``ray stop`` and the fixed ports
included: the node's PID and network namespaces keep them to the node), ``ray exec`` runs a
small RFMS grid with the package the wheel installed, ``ray rsync-down`` brings its results
home, and they equal a local run.  Then the head is replaced as after a preemption: a new
node (fresh home) is brought up, the fetched results minus one cell are synced up, and the
same command computes only that cell.  ``ray down`` leaves nothing of the cluster running,
and a process that a global ``ray stop`` would kill survives it all.

What differs from AWS, and why: no container (this machine has no Docker; the node's
namespaces and its prepared Python environment play the image), no node types (the local
provider has one), no workers (one loopback node; the autoscaler is tested with Ray's fake
multi-node provider in tests/test_cluster_autoscaler.py).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _ssh_node import SshNode, control_dir, launcher_config, pids_naming, requirements_missing

from raytune_fed.cluster import BUNDLE_DIR, build_bundle

pytestmark = [pytest.mark.cluster, pytest.mark.process]

ROOT = Path(__file__).resolve().parent.parent
GRID = ("raytune-fed rfms --address auto --dataset geo5_sim --learners elastic_net --methods lso,fmo --reps 2 "
        "--pairs 1 --n-init 2 --n-iter 1 --seed 0 --out results/launcher")
HANG = 1800  # seconds: bounds a hang only


def _timing(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c == "seconds" or c.startswith("unit_")]


def _rows(path: Path) -> pd.DataFrame:
    frame = pd.read_parquet(path / "results.parquet")
    frame = frame.drop(columns=_timing(frame))
    return frame.sort_values(["cell_key", "method"]).reset_index(drop=True)


class Launcher:
    """The `ray` command line of this environment, run from a directory holding the bundle."""

    def __init__(self, node: SshNode, workdir: Path, config: Path) -> None:
        self.workdir, self.config = workdir, config
        self.env = dict(os.environ, RAY_TMPDIR=str(node.client), TMPDIR=str(node.client))  # state, config cache
        self.env["PATH"] = f"{Path(sys.executable).parent}:{self.env['PATH']}"
        self.env.pop("RAY_ADDRESS", None)

    def __call__(self, *args: str) -> str:
        """Run ``ray ARGS``; its output (the node's stdout and stderr arrive through ssh's terminal)."""
        done = subprocess.run(["ray", *args], cwd=self.workdir, env=self.env, capture_output=True, text=True,
                              timeout=HANG)
        assert done.returncode == 0, f"ray {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout + done.stderr


@pytest.fixture
def node():
    missing = requirements_missing()
    assert missing is None, missing
    node = SshNode()
    try:
        yield node.start()
    finally:
        node.stop()
        shutil.rmtree(node.root, ignore_errors=True)


@pytest.fixture
def canary():
    """A process that a global `ray stop` would end (its command line names a Ray worker script)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", "default_worker.py"])
    yield proc
    proc.kill()
    proc.wait()


def test_ray_up_runs_a_grid_brings_it_home_and_resumes_on_a_new_head(node, canary, tmp_path):
    cluster_yaml = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    name = f"raytune-fed-test-{uuid.uuid4().hex[:8]}"
    cfg = launcher_config(cluster_yaml, name, node.auth(getpass.getuser()))
    for key in ("setup_commands", "head_setup_commands", "head_start_ray_commands", "file_mounts"):
        assert cfg[key] == cluster_yaml[key], f"{key} must be cluster.yaml's own"
    assert "ray stop" in cfg["head_start_ray_commands"]
    config = node.root / "cluster.yaml"
    config.write_text(yaml.safe_dump(cfg))
    workdir = node.root / "checkout"
    build_bundle(ROOT, workdir / BUNDLE_DIR, ROOT / "cluster.yaml")  # what the user runs before `ray up`
    ray = Launcher(node, workdir, config)
    control = control_dir(name)  # where Ray's ssh keeps this cluster's connections
    try:
        ray("up", "--yes", "--no-config-cache", str(config))
        running = " ".join(node.processes().values())
        assert "gcs_server" in running and "raylet" in running, "the head started Ray on the node"
        assert "--gcs_server_port=6379" in running, "with cluster.yaml's own ports"

        # the package on the node is the wheel, not this checkout
        said = ray("exec", str(config), "python -c 'import raytune_fed, ray; "
                                        "print(\"on the node:\", raytune_fed.__file__, ray.__version__)'")
        where = next(line for line in said.splitlines() if line.startswith("on the node:")).split()
        import ray as local_ray

        assert where[3].startswith(f"{node.image}/lib/"), "the wheel's copy, in the node's environment"
        assert where[4] == local_ray.__version__

        first = ray("exec", str(config), GRID)
        assert "2 cells (0 already done), 2 to run" in first
        home = tmp_path / "home"
        ray("rsync-down", str(config), "~/results/launcher/", f"{home}/")
        assert {"results.parquet", "summary.json", "index.html"} <= {p.name for p in home.iterdir()}
        units = sorted((home / "units").glob("*.json"))
        assert len(units) == 2

        # the same command on this machine, sites in process: the same rows
        local = tmp_path / "local"
        cli = Path(sys.executable).with_name("raytune-fed")
        argv = GRID.split()[1:]
        argv[argv.index("--out") + 1] = str(local)
        argv[argv.index("--address"):argv.index("--address") + 2] = []
        done = subprocess.run([str(cli), *argv, "--sites", "local", "--no-report"], capture_output=True, text=True,
                              timeout=HANG)
        assert done.returncode == 0, done.stderr
        pd.testing.assert_frame_equal(_rows(home), _rows(local))

        # the head is lost (a preemption): a new head, the fetched cells synced up, the same command
        ray("down", "--yes", str(config))
        for path in [*node.home.iterdir(), *node.tmp.iterdir()]:  # a new machine: nothing of the old head's disk
            if path.name != ".bashrc":
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        units[0].unlink()  # one cell had not finished
        ray("up", "--yes", "--no-config-cache", str(config))
        ray("exec", str(config), "mkdir -p ~/results/launcher")  # rsync makes only the last directory
        ray("rsync-up", str(config), f"{home}/", "~/results/launcher/")
        second = ray("exec", str(config), GRID)
        assert "2 cells (1 already done), 1 to run" in second
        again = tmp_path / "again"
        ray("rsync-down", str(config), "~/results/launcher/", f"{again}/")
        pd.testing.assert_frame_equal(_rows(again), _rows(local))
    finally:
        down = subprocess.run(["ray", "down", "--yes", str(config)], cwd=workdir, env=ray.env, capture_output=True,
                              text=True, timeout=HANG)
    assert down.returncode == 0, down.stderr[-3000:]
    left = {pid: cmd for pid, cmd in node.processes().items() if not cmd.startswith("sshd:")}
    assert left == {}, "`ray down` left processes on the node"
    assert canary.poll() is None, "a Ray-looking process outside the node was stopped"
    node.stop()
    assert node.processes() == {}
    # the launcher's ssh connections (kept open for reuse: ControlPersist) end with the node
    give_up = time.monotonic() + 120
    while (node.client_processes() or pids_naming(str(control))) and time.monotonic() < give_up:
        time.sleep(0.5)
    left = {**node.client_processes(), **{pid: "ssh control master" for pid in pids_naming(str(control))}}
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(control, ignore_errors=True)
    assert left == {}, "processes of this cluster outlived `ray down` and the node"

