"""An autoscaling Ray cluster on this machine: Ray's fake multi-node provider, with cluster.yaml's node types.

Ray's "Testing Autoscaling Locally" recipe is ``RAY_FAKE_CLUSTER=1 ray start --head
--autoscaling-config=...``: the autoscaler (v2, as ``ray up`` runs it) starts and stops
worker "nodes" as local raylet processes declaring the node type's resources.  Ray's own
helper (``ray.cluster_utils.AutoscalingCluster``) runs ``ray stop --force`` (every Ray
process of this user) and reads a defaults file the installed wheel lacks, so this module
does the recipe itself: the provider is named by its class (``type: external``), every port
is free at start, the session lives in its own ``RAY_TMPDIR``, the cluster has its own auth
token, and :meth:`FakeCluster.stop` ends only the processes that carry this cluster's mark
in their environment (every node process inherits it from ``ray start``).

:func:`fake_node_types` derives the node types from a cluster file's (cluster.yaml, or the
file ``raytune-fed cluster node-types`` writes from it), so the two cannot drift: the same
names, min_workers and custom resources (with ``sites``, the template copied once per site by
hand), CPUs scaled down to what two cores can pretend, and max_workers capped.  Also used
by ``experiments/bench_cluster.py``.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests._ports import free_port

PROVIDER = "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeProvider"
MARK = "RAYTUNE_FED_FAKE_CLUSTER"
TEMPLATE = "site:site0"  # cluster.yaml's site node type declares this; a user renames it per site


def fake_node_types(cluster_yaml: Mapping[str, Any], *, sites: Sequence[str] = (), cpus: int = 1,
                    max_per_type: int = 2, idle_timeout_minutes: float = 0.1) -> dict[str, Any]:
    """An autoscaler config for the fake provider from cluster.yaml: its node types with every node
    declaring ``cpus`` CPUs, at most ``max_per_type`` nodes of a type, and a short idle timeout.

    ``sites`` (a grid's site names) does what cluster.yaml tells a user to do for each site: its
    site node type (the one declaring ``site:site0``) is copied once per site, ``site0`` renamed to
    the site in the type's name and resource.  Without ``sites`` the template stays as it is, a
    node type no grid's site matches (an unlabelled cluster)."""
    types: dict[str, Any] = {}
    for name, node_type in cluster_yaml["available_node_types"].items():
        resources = {r: v for r, v in (node_type.get("resources") or {}).items() if r != "CPU"}
        copies = [(name, resources)]
        if TEMPLATE in resources and sites:
            copies = [(name.replace("site0", site), {r.replace("site0", site): v for r, v in resources.items()})
                      for site in sites]
        for copy_name, copy_resources in copies:
            fake = {"resources": {**copy_resources, "CPU": cpus}, "node_config": {}}
            if name == cluster_yaml["head_node_type"]:
                fake["max_workers"] = 0
            else:
                fake["min_workers"] = node_type.get("min_workers", 0)
                fake["max_workers"] = min(node_type["max_workers"], max_per_type)
            types[copy_name] = fake
    workers = [t for n, t in types.items() if n != cluster_yaml["head_node_type"]]
    return {
        "cluster_name": f"{cluster_yaml['cluster_name']}-fake",
        "max_workers": sum(t["max_workers"] for t in workers),
        "upscaling_speed": cluster_yaml.get("upscaling_speed", 1.0),
        "idle_timeout_minutes": idle_timeout_minutes,
        "provider": {"type": "external", "module": PROVIDER, "use_node_id_as_ip": True,
                     "disable_node_updaters": True, "disable_launch_config_check": True, "launch_multiple": True},
        "auth": {},
        "available_node_types": types,
        "head_node_type": cluster_yaml["head_node_type"],
        "docker": {}, "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
        "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": [],
        "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
        "rsync_exclude": [], "rsync_filter": [],
    }


class FakeCluster:
    """Start with :meth:`start`; drivers use :attr:`address` and :meth:`driver_env`; :meth:`stop` ends it."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = copy.deepcopy(dict(config))
        self.root = Path(tempfile.mkdtemp(prefix="rtff-", dir="/tmp"))  # short: Ray's socket paths
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.started_at: float | None = None
        self.bin = Path(sys.executable).parent

    @property
    def head_type(self) -> str:
        return self.config["head_node_type"]

    def driver_env(self) -> dict[str, str]:
        env = dict(os.environ, RAY_TMPDIR=str(self.root), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)
        env[MARK] = str(self.root)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '')}"
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self, timeout: float = 600.0) -> FakeCluster:
        from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID

        self.config["provider"]["gcs_address"] = self.address
        self.config["provider"]["head_node_id"] = FAKE_HEAD_NODE_ID
        path = self.root / "autoscaler.json"
        path.write_text(json.dumps(self.config, indent=1))
        head = self.config["available_node_types"][self.head_type]["resources"]
        env = self.driver_env()
        env.update(RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1", RAY_enable_autoscaler_v2="1",
                   RAY_CLOUD_INSTANCE_ID=FAKE_HEAD_NODE_ID, RAY_OVERRIDE_NODE_ID_FOR_TESTING=FAKE_HEAD_NODE_ID,
                   RAY_NODE_TYPE_NAME=self.head_type, RAY_USAGE_STATS_ENABLED="0")
        custom = {r: v for r, v in head.items() if r != "CPU"}
        cmd = [str(self.bin / "ray"), "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
               "--include-dashboard=false", f"--dashboard-agent-listen-port={free_port()}",
               f"--autoscaling-config={path}", f"--num-cpus={head.get('CPU', 0)}", "--disable-usage-stats"]
        if custom:
            cmd.append(f"--resources={json.dumps(custom)}")
        self.started_at = time.time()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"ray start failed: {done.stderr[-2000:]}")
        # what cluster.yaml's head runs next: its node types, for grids to read
        done = subprocess.run([str(self.bin / "raytune-fed"), "cluster", "announce", str(path), "--address",
                               self.address], env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"raytune-fed cluster announce failed: {done.stderr[-2000:]}")
        self.announced = done.stdout
        return self

    # --- what runs ----------------------------------------------------------------------------------------

    def processes(self) -> dict[int, dict[str, str]]:
        """This cluster's processes (and drivers started with :meth:`driver_env`): their environment."""
        found = {}
        mark = f"{MARK}={self.root}".encode()
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                if mark not in raw or _state(pid) == "Z":
                    continue
                env = dict(item.decode(errors="replace").partition("=")[::2] for item in raw if b"=" in item)
                env["_cmdline"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                found[pid] = env
            except OSError:
                continue
        return found

    def nodes(self) -> dict[str, tuple[int, str]]:
        """Live nodes: node id -> (the raylet's PID, node type)."""
        return {env.get("RAY_OVERRIDE_NODE_ID_FOR_TESTING", "?"): (pid, env.get("RAY_NODE_TYPE_NAME", "?"))
                for pid, env in self.processes().items() if "/raylet/raylet " in env["_cmdline"] + " "}

    def workers_running(self, name: str) -> dict[int, tuple[str, str]]:
        """Worker processes executing the Ray task or actor named ``name`` (``_run_one``, ``SiteActor``):
        their node's id and type (a worker inherits its raylet's environment)."""
        return {pid: (env.get("RAY_OVERRIDE_NODE_ID_FOR_TESTING", "?"), env.get("RAY_NODE_TYPE_NAME", "?"))
                for pid, env in self.processes().items() if env["_cmdline"].startswith(f"ray::{name}")}

    def kill_node(self, node_id: str) -> None:
        """Lose a node at once: its raylet is killed (its workers and agents end with it)."""
        pid, _ = self.nodes()[node_id]
        os.kill(pid, signal.SIGKILL)

    def stop(self, timeout: float = 60.0) -> None:
        """End every process of this cluster (SIGTERM, then SIGKILL), nothing else; remove its files."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.processes():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            give_up = time.monotonic() + timeout / 2
            while self.processes() and time.monotonic() < give_up:
                time.sleep(0.2)
        shutil.rmtree(self.root, ignore_errors=True)


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]
