"""A real multi-node Ray cluster on this machine, made with ``ray start`` (head + nodes), for fault tests.

Every node is a ``ray start --block`` process in a session of its own, so killing a node kills
its whole process group (raylet, object store, workers) and nothing else; the cluster uses free
ports and its own authentication token, so it never meets another Ray session on the machine
(``temp_dir`` gives it its own temporary folder too).  A node added with ``hidden=FOLDER`` runs in a
mount namespace of its own where ``FOLDER`` is an empty read-only tmpfs and its working directory:
it cannot read anything the driver keeps there, as a node on another machine.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests._ports import free_port

RAY = str(Path(sys.executable).with_name("ray"))
HIDE = 'mount -t tmpfs -o ro,size=64k tmpfs "$1" && cd "$1" && shift && exec "$@"'
"""The shell step that runs a node under ``unshare --mount``: an empty read-only folder over ``$1``."""


class LocalCluster:
    """``LocalCluster(head_resources)``; ``add(name, resources)``, ``kill(name)``, ``env`` for drivers,
    ``close()`` (kills every process group it started)."""

    def __init__(self, head_cpus: int = 1, head_resources: dict[str, float] | None = None,
                 logs: str | os.PathLike | None = None, temp_dir: str | os.PathLike | None = None) -> None:
        self.env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16),
                        RAY_health_check_period_ms="1000", RAY_health_check_failure_threshold="3")
        self.env.pop("RAY_ADDRESS", None)
        self.logs = Path(logs) if logs else None
        self.temp_dir = [f"--temp-dir={os.fspath(temp_dir)}"] if temp_dir else []
        self.nodes: dict[str, subprocess.Popen] = {}
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._start("head", ["--head", f"--port={self.port}", "--include-dashboard=false",
                             "--disable-usage-stats"], head_cpus, head_resources)
        self.wait_for_nodes(1)

    def _start(self, name: str, how: list[str], cpus: int, resources: dict[str, float] | None,
               hidden: str | os.PathLike | None = None) -> None:
        out = open(self.logs / f"{name}.log", "ab") if self.logs else subprocess.DEVNULL
        argv = [RAY, "start", *how, *self.temp_dir, f"--num-cpus={cpus}", "--resources", json.dumps(resources or {}),
                "--block"]
        if hidden is not None:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE, "sh", os.fspath(hidden), *argv]
        self.nodes[name] = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def add(self, name: str, cpus: int, resources: dict[str, float], *,
            hidden: str | os.PathLike | None = None) -> None:
        """Start node ``name`` (``ray start --address``) and wait until the cluster has it; with ``hidden``,
        in its own mount namespace where that folder is empty, read-only and its working directory."""
        before = len(self.alive())
        self._start(name, [f"--address={self.address}"], cpus, resources, hidden)
        self.wait_for_nodes(before + 1)

    def kill(self, name: str) -> None:
        """SIGKILL node ``name``: its raylet, object store and workers, as a machine that dies."""
        proc = self.nodes.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def alive(self) -> list[dict[str, Any]]:
        """The live nodes' resources, as the GCS sees them (read by a short-lived driver)."""
        mark = "live nodes: "  # Ray may print its own lines too (under load: lagging raylet heartbeats)
        code = (f"import json, ray; ray.init(address='{self.address}', logging_level='ERROR'); "
                f"print({mark!r} + json.dumps([n['Resources'] for n in ray.nodes() if n['Alive']]))")
        out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                             timeout=300)
        said = [line[len(mark):] for line in out.stdout.splitlines() if line.startswith(mark)]
        return json.loads(said[-1]) if out.returncode == 0 and said else []

    def wait_for_nodes(self, n: int, limit: float = 300.0) -> None:
        give_up = time.monotonic() + limit
        while len(self.alive()) < n:
            if time.monotonic() > give_up:
                raise RuntimeError(f"the cluster did not reach {n} live nodes within {limit:.0f} s")
            time.sleep(1.0)

    def close(self) -> None:
        for name in list(self.nodes):
            try:
                self.kill(name)
            except ProcessLookupError:
                pass
