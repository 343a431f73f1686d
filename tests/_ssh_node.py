"""A machine for Ray's on-premise cluster launcher, made on this one for a test.

``ray up`` with ``provider: type: local`` reaches its head over ssh and runs the recipe's
commands there (cluster.local.yaml's never run ``ray stop``; cluster.yaml's, which
``experiments/bench_cluster_launch.py`` times here, do), and ``ray down`` runs Ray's own
``ray stop``, which ends every Ray process it can see.  So the node is given what a
container gives a cloud node: its own PID namespace (``ray stop`` sees only the node's
processes, and :meth:`SshNode.spawn` can start a process there that it would see), network
namespace (the recipes' fixed ports are the node's own, not this machine's) and mount
namespace (a private ``/run`` for sshd), with ``HOME`` and ``TMPDIR`` in a fresh directory.
In it runs Debian's ``sshd`` with a host key and an authorised client key made for the test,
listening on the node's loopback ``127.0.0.1:22``; the launcher's ssh reaches it through a ProxyCommand that opens the
connection inside the node's network namespace.  Nothing of the machine's own ssh set-up is
read or changed, and killing the node's first process (PID 1 of its namespace) ends every
process the node ever started.

The node's Python is the "image": a virtual environment that already holds the test
environment's distributions (Ray at the local version, numpy, ...) but not raytune-fed, as
``rayproject/ray`` holds Ray but not this package; the recipe's setup commands install
the wheel into it.  Root only (namespaces, a second sshd): the test fails, with the reason,
elsewhere.
"""

from __future__ import annotations

import copy
import getpass
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import metadata
from pathlib import Path

SSHD = "/usr/sbin/sshd"
TAKEN = ("file_mounts", "cluster_synced_files", "file_mounts_sync_continuously", "rsync_exclude", "rsync_filter",
         "initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
         "head_start_ray_commands", "worker_start_ray_commands", "idle_timeout_minutes", "upscaling_speed")
"""What a launcher config on this node takes from cluster.yaml unchanged."""
_LEFT_OUT = ("raytune_fed", "raytune-fed", "__editable__", "_raytune_fed", "pip", "_distutils_hack", "setuptools",
             "pkg_resources", "_virtualenv", "__pycache__")

_RELAY = '''"""Connect stdin/stdout to a TCP address (an ssh ProxyCommand)."""
import os, socket, sys, threading

conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))


def upstream():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        conn.sendall(data)
    try:
        conn.shutdown(socket.SHUT_WR)
    except OSError:
        pass


threading.Thread(target=upstream, daemon=True).start()
while True:
    data = conn.recv(65536)
    if not data:
        break
    os.write(1, data)
'''

_WRAPPER = '''#!{python}
import sys
from importlib import import_module

if __name__ == "__main__":
    target = import_module({module!r})
    for name in {attrs!r}:
        target = getattr(target, name)
    sys.exit(target())
'''


def requirements_missing() -> str | None:
    """Why a node cannot be made here (None: it can)."""
    if os.geteuid() != 0:
        return "making an ssh node needs root (PID, mount and network namespaces, a second sshd)"
    for tool in (SSHD, shutil.which("rsync"), shutil.which("ssh"), shutil.which("unshare"),
                 shutil.which("nsenter"), shutil.which("ssh-keygen"), shutil.which("ip")):
        if not tool or not os.access(tool, os.X_OK):
            return ("openssh-server, openssh-client, rsync, util-linux and iproute2 are needed "
                    "(`.ci/run` installs them: apt-get install openssh-server rsync)")
    return None


class SshNode:
    """One node: call :meth:`start`, give :meth:`auth` to the cluster config, :meth:`stop` at the end."""

    def __init__(self, root: Path | None = None) -> None:
        # short: Ray's Unix sockets live under TMPDIR/ray/session_*/sockets (at most 107 bytes)
        self.root = Path(root or tempfile.mkdtemp(prefix="rtfn-", dir="/tmp"))
        self.home, self.tmp, self.image = self.root / "home", self.root / "tmp", self.root / "image"
        self.etc, self.client = self.root / "sshd", self.root / "client"
        self.key = self.client / "id_ed25519"
        self._unshare: subprocess.Popen | None = None
        self.init_pid: int | None = None  # this machine's PID of the node's PID 1 (sshd)
        self.pid_namespace: str | None = None

    # --- set-up -------------------------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> SshNode:
        missing = requirements_missing()
        if missing:
            raise RuntimeError(missing)
        for d in (self.home, self.tmp, self.etc, self.client):
            d.mkdir(parents=True, exist_ok=True)
        self._keys()
        self._image()
        (self.home / ".bashrc").write_text(f'export PATH="{self.image}/bin:$PATH"\ncd ~\n')
        (self.client / "relay.py").write_text(_RELAY)
        (self.etc / "init.sh").write_text("set -e\nip link set lo up\nmount -t tmpfs tmpfs /run\n"
                                          "mkdir -p /run/sshd\n"
                                          f"exec {SSHD} -D -e -f {self.etc / 'sshd_config'}\n")
        log = open(self.etc / "sshd.log", "wb")
        self._unshare = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--mount", "--net",
                                          "bash", str(self.etc / "init.sh")], stdout=log, stderr=log,
                                         start_new_session=True)
        give_up = time.monotonic() + timeout
        while b"Server listening" not in (self.etc / "sshd.log").read_bytes():
            if self._unshare.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError(f"the node's sshd did not start: {(self.etc / 'sshd.log').read_text()[-2000:]}")
            time.sleep(0.2)
        self.init_pid = _children(self._unshare.pid)[0]
        self.pid_namespace = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        return self

    def _keys(self) -> None:
        for path in (self.etc / "host_ed25519", self.key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "raytune-fed-test", "-f", str(path)],
                           check=True)
        shutil.copy(self.key.with_suffix(".pub"), self.etc / "authorized_keys")
        (self.etc / "sshd_config").write_text("\n".join([
            "ListenAddress 127.0.0.1:22",  # the node's own loopback (its network namespace)
            f"HostKey {self.etc / 'host_ed25519'}",
            f"AuthorizedKeysFile {self.etc / 'authorized_keys'}",
            f"PidFile {self.etc / 'sshd.pid'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "MaxSessions 64",
            "MaxStartups 64",
            f"SetEnv HOME={self.home} TMPDIR={self.tmp}",
        ]) + "\n")

    def _image(self) -> None:
        """A virtual environment with the test environment's distributions except raytune-fed (and pip's own)."""
        subprocess.run([sys.executable, "-m", "venv", str(self.image)], check=True)
        shelf = self.root / "image-packages"
        shelf.mkdir()
        site = Path(sysconfig.get_paths()["purelib"])
        for entry in site.iterdir():
            if entry.name.startswith(_LEFT_OUT) or entry.suffix == ".pth":
                continue
            (shelf / entry.name).symlink_to(entry)
        image_site = next(self.image.glob("lib/python3*/site-packages"))
        (image_site / "image-packages.pth").write_text(f"{shelf}\n")
        python = self.image / "bin" / "python"
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower().replace("_", "-")
            if name in ("raytune-fed", "pip", "setuptools"):
                continue
            for ep in dist.entry_points.select(group="console_scripts"):
                script = self.image / "bin" / ep.name
                if script.exists():
                    continue
                module, _, attrs = ep.value.partition(":")
                script.write_text(_WRAPPER.format(python=python, module=module.strip(),
                                                  attrs=tuple(attrs.strip().split("."))))
                script.chmod(0o755)

    # --- what the cluster config needs --------------------------------------------------------------------

    def auth(self, user: str) -> dict:
        return {"ssh_user": user, "ssh_private_key": str(self.key),
                "ssh_proxy_command": f"nsenter --target {self.init_pid} --net {sys.executable} "
                                     f"{self.client / 'relay.py'} 127.0.0.1 22"}

    # --- what runs ----------------------------------------------------------------------------------------

    def processes(self) -> dict[int, str]:
        """The node's live processes (this machine's PIDs): their command lines."""
        found = {}
        for pid in _pids():
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") != self.pid_namespace:
                    continue
                if _state(pid) == "Z":
                    continue
                found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
        return found

    def spawn(self, argv: list[str]) -> subprocess.Popen:
        """Start ``argv`` inside the node's PID namespace (as if another user of the machine had started it
        there): the process is nsenter's child; kill it with :meth:`processes` and its command line."""
        return subprocess.Popen(["nsenter", "--target", str(self.init_pid), "--pid", "--", *argv],
                                start_new_session=True)

    def stop(self, timeout: float = 60.0) -> None:
        """End the node: its PID 1, and with it every process of its namespace."""
        if self.init_pid is not None:
            try:
                os.kill(self.init_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._unshare is not None:
            try:
                self._unshare.wait(timeout)
            except subprocess.TimeoutExpired:
                self._unshare.kill()
                self._unshare.wait(timeout)
        give_up = time.monotonic() + timeout
        while self.pid_namespace and self.processes() and time.monotonic() < give_up:
            time.sleep(0.2)

    def client_processes(self) -> dict[int, str]:
        """Processes of this machine (outside the node) whose command line names this node's files
        (the launcher's ssh connections and their ProxyCommand)."""
        mark = str(self.root)
        found = {}
        for pid in _pids():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                if mark in cmd and pid != os.getpid() and _state(pid) != "Z" \
                        and os.readlink(f"/proc/{pid}/ns/pid") != self.pid_namespace:
                    found[pid] = cmd.strip()
            except OSError:
                continue
        return found


def launcher_config(cluster_yaml: dict, name: str, auth: dict) -> dict:
    """cluster.yaml's file mounts and commands, for Ray's on-premise provider with one node at 127.0.0.1."""
    cfg = {key: copy.deepcopy(cluster_yaml[key]) for key in TAKEN}
    cfg.update(cluster_name=name, provider={"type": "local", "head_ip": "127.0.0.1", "worker_ips": []}, auth=auth)
    return cfg


def on_this_node(recipe: dict, name: str, auth: dict) -> dict:
    """cluster.local.yaml as a user fills it in for one machine: this node as the head (127.0.0.1, no workers),
    the node's ssh auth, a cluster name of the test's; every other key (commands, mounts, ports) verbatim."""
    cfg = copy.deepcopy(recipe)
    cfg["cluster_name"] = name
    cfg["provider"] = {**cfg["provider"], "head_ip": "127.0.0.1", "worker_ips": []}
    cfg["auth"] = auth
    return cfg


def control_dir(cluster_name: str) -> Path:
    """Where Ray's ssh keeps the control sockets of a cluster's connections (kept open for reuse)."""
    return (Path("/tmp") / f"ray_ssh_{hashlib.sha256(getpass.getuser().encode()).hexdigest()[:10]}"
            / hashlib.sha256(cluster_name.encode()).hexdigest()[:10])


def pids_naming(mark: str) -> list[int]:
    """Processes of this machine whose command line contains ``mark``."""
    found = []
    for pid in _pids():
        try:
            if mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _children(pid: int, timeout: float = 10.0) -> list[int]:
    give_up = time.monotonic() + timeout
    while True:
        kids = [p for p in _pids() if _ppid(p) == pid]
        if kids or time.monotonic() > give_up:
            return kids
        time.sleep(0.05)


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])
