"""`ray up` for real: cluster.local.yaml brought up over ssh on a node of this machine, used, torn down.

The node is Ray's on-premise provider, as cluster.local.yaml configures it with ``head_ip:
127.0.0.1``, no workers and the test's ssh key (everything else verbatim), against Debian's
sshd in namespaces of its own (see ``tests/_ssh_node.py``): ``ray up`` syncs the real file
mounts (the bundle ``raytune-fed cluster bundle`` built), runs the recipe's setup and head
start commands, ``ray exec`` runs a small RFMS grid with the package the wheel installed,
``ray rsync-down`` brings its results home, and they equal a local run.  Then the head is
replaced as after a preemption: a new node (fresh home) is brought up, the fetched results
minus one cell are synced up, and the same command computes only that cell.

A Ray it did not start survives the recipe: a process that ``ray stop`` would kill runs inside
the node (where the recipe's commands see it) through the first ``ray up``, a second ``ray
up`` that restarts the cluster's Ray, the grid and ``raytune-fed cluster stop-ray``, which
ends every process of the cluster's Ray and nothing else; none of the recipe's commands is a
bare ``ray stop``.  ``ray down`` runs Ray's own ``ray stop`` on the head (the launcher's, not
the recipe's): it leaves nothing of the cluster running, and a Ray-looking process outside
the node survives it all.

What differs from a real machine, and why: the node's namespaces and its prepared Python
environment play the machine (a virtual environment with Ray on the login PATH), no workers
(one loopback node; the autoscaler is tested with Ray's fake multi-node provider in
tests/test_cluster_autoscaler.py).
"""

from __future__ import annotations

import getpass
import json
import os
import re
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
from _ssh_node import SshNode, control_dir, on_this_node, pids_naming, requirements_missing

from raytune_fed.cluster import BUNDLE_DIR, RAY_MARK, build_bundle, marked_processes

pytestmark = [pytest.mark.cluster, pytest.mark.process]

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "cluster.local.yaml"
GRID = ("raytune-fed rfms --dataset geo5_sim --learners elastic_net --methods lso,fmo --reps 2 "
        "--pairs 1 --n-init 2 --n-iter 1 --seed 0 --out results/launcher")
ON_HEAD = f'{GRID} --address "$(raytune-fed cluster address)"'  # never `auto`: it could find another Ray
COMMANDS = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
            "head_start_ray_commands", "worker_start_ray_commands")
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


def _ray_processes(node: SshNode, spared: int | None = None) -> dict[int, str]:
    """The node's processes but its sshd (and the ``spared`` one)."""
    return {pid: cmd for pid, cmd in node.processes().items() if not cmd.startswith("sshd:") and pid != spared}


def _marker(node: SshNode) -> dict:
    """The marker file of the Ray that cluster.local.yaml's start-ray started on the node."""
    return json.loads((node.home / ".raytune-fed-ray" / "ray.json").read_text())


def _same_processes(node: SshNode, token: str, inner: int) -> bool:
    """The node's processes but sshd and ``inner`` are exactly those stop-ray would stop (read together until
    they agree: a worker may start or end between two reads)."""
    for _ in range(50):
        if set(marked_processes(token)) == set(_ray_processes(node, spared=inner)):
            return True
        time.sleep(0.2)
    return False


def _marks(pid: int) -> set[str]:
    """The tokens of ``raytune-fed cluster start-ray`` in a process's environment."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return set()
    prefix = f"{RAY_MARK}=".encode()
    return {item[len(prefix):].decode() for item in env if item.startswith(prefix)}


@pytest.fixture
def inner_canary(node):
    """A process inside the node that `ray stop` there would end (another user's Ray, as far as `ray stop` can
    tell); yields its PID on this machine."""
    nsenter = node.spawn([sys.executable, "-c", "import time; time.sleep(3600)", "default_worker.py", "inner-canary"])
    try:
        give_up = time.monotonic() + 60
        found: list[int] = []
        while not found and time.monotonic() < give_up:
            found = [pid for pid, cmd in node.processes().items() if cmd.endswith("default_worker.py inner-canary")]
            time.sleep(0.2)
        assert found, "the canary inside the node did not start"
        yield found[0]
    finally:
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        nsenter.kill()
        nsenter.wait()


def test_recipe_is_cluster_local_yaml_and_never_runs_a_bare_ray_stop():
    recipe = yaml.safe_load(RECIPE.read_text())
    auth = {"ssh_user": "someone", "ssh_private_key": "key"}
    cfg = on_this_node(recipe, "name", auth)
    assert cfg["provider"] == {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []}
    assert cfg["auth"] == auth
    assert {k: v for k, v in cfg.items() if k not in ("cluster_name", "provider", "auth")} == \
        {k: v for k, v in recipe.items() if k not in ("cluster_name", "provider", "auth")}
    commands = [c for key in COMMANDS for c in recipe.get(key) or []]
    assert any("raytune-fed cluster start-ray" in c for c in commands)
    bare = [c for c in commands if re.search(r"(^|[;&|(]\s*)ray\s+stop\b", c)]
    assert bare == [], "`ray stop` ends every Ray of the machine's user"
    aws = yaml.safe_load((ROOT / "cluster.yaml").read_text())  # the same guard sees cluster.yaml's
    assert [c for c in aws["head_start_ray_commands"] if re.search(r"(^|[;&|(]\s*)ray\s+stop\b", c)]


def test_ray_up_runs_a_grid_brings_it_home_and_resumes_on_a_new_head(node, canary, inner_canary, tmp_path):
    recipe = yaml.safe_load(RECIPE.read_text())
    name = f"raytune-fed-test-{uuid.uuid4().hex[:8]}"
    cfg = on_this_node(recipe, name, node.auth(getpass.getuser()))
    config = node.root / "cluster.local.yaml"
    config.write_text(yaml.safe_dump(cfg))
    workdir = node.root / "checkout"
    build_bundle(ROOT, workdir / BUNDLE_DIR, RECIPE)  # what the user runs before `ray up`
    ray = Launcher(node, workdir, config)
    control = control_dir(name)  # where Ray's ssh keeps this cluster's connections
    inner = inner_canary
    try:
        ray("up", "--yes", "--no-config-cache", str(config))
        running = _ray_processes(node, spared=inner)
        said = " ".join(running.values())
        assert "gcs_server" in said and "raylet" in said, "the head started Ray on the node"
        assert "--gcs_server_port=6390" in said, "with cluster.local.yaml's own ports"
        token = _marker(node)["token"]
        carry = {name for pid, name in marked_processes(token).items() if token in _marks(pid)}
        assert {"gcs_server", "raylet"} <= carry, "the start's token is in their environment"
        assert _same_processes(node, token, inner), "stop-ray finds every Ray process on the node, and only those"
        assert _marks(inner) == set() and inner not in marked_processes(token)
        assert inner in node.processes(), "the other Ray process survived `ray up`"

        # `ray up` on a running head restarts its Ray: the recipe stops only what it started before
        ray("up", "--yes", "--no-config-cache", str(config))
        again = _ray_processes(node, spared=inner)
        assert "gcs_server" in " ".join(again.values())
        assert not set(running) & set(again), "the first start's processes were stopped"
        second = _marker(node)["token"]
        assert second != token and _same_processes(node, second, inner)
        assert inner in node.processes(), "a restart stops no Ray it did not start"

        # the package on the node is the wheel, not this checkout
        said = ray("exec", str(config), "python -c 'import raytune_fed, ray; "
                                        "print(\"on the node:\", raytune_fed.__file__, ray.__version__)'")
        where = next(line for line in said.splitlines() if line.startswith("on the node:")).split()
        import ray as local_ray

        assert where[3].startswith(f"{node.image}/lib/"), "the wheel's copy, in the node's environment"
        assert where[4] == local_ray.__version__

        first = ray("exec", str(config), ON_HEAD)
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
        done = subprocess.run([str(cli), *argv, "--sites", "local", "--no-report"], capture_output=True, text=True,
                              timeout=HANG)
        assert done.returncode == 0, done.stderr
        pd.testing.assert_frame_equal(_rows(home), _rows(local))

        # the recipe's teardown on a machine shared with other Ray users: this cluster's Ray, all of it, alone
        assert "stopped this cluster's Ray" in ray("exec", str(config), "raytune-fed cluster stop-ray")
        give_up = time.monotonic() + 60
        while _ray_processes(node, spared=inner) and time.monotonic() < give_up:
            time.sleep(0.5)
        assert _ray_processes(node, spared=inner) == {}, "stop-ray left processes of the cluster's Ray"
        assert inner in node.processes(), "stop-ray stopped a Ray it did not start"
        os.kill(inner, signal.SIGKILL)

        # the head is lost (a preemption): a new head, the fetched cells synced up, the same command
        ray("down", "--yes", str(config))
        for path in [*node.home.iterdir(), *node.tmp.iterdir()]:  # a new machine: nothing of the old head's disk
            if path.name != ".bashrc":
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        units[0].unlink()  # one cell had not finished
        ray("up", "--yes", "--no-config-cache", str(config))
        ray("exec", str(config), "mkdir -p ~/results/launcher")  # rsync makes only the last directory
        ray("rsync-up", str(config), f"{home}/", "~/results/launcher/")
        second_run = ray("exec", str(config), ON_HEAD)
        assert "2 cells (1 already done), 1 to run" in second_run
        again_home = tmp_path / "again"
        ray("rsync-down", str(config), "~/results/launcher/", f"{again_home}/")
        pd.testing.assert_frame_equal(_rows(again_home), _rows(local))
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

