"""Running on a cluster that Ray's cluster launcher starts (``ray up cluster.yaml``).

What runs on each side of ``ray up``:

* On the user's machine, :func:`build_bundle` writes what every node installs
  (``raytune-fed cluster bundle``): a wheel of this package built once from the source tree,
  and ``constraints.txt`` pinning every distribution of the local environment, so the nodes
  resolve the same versions (Ray included) instead of whatever the index offers that day.
  It refuses a ``cluster.yaml`` whose container image runs another Ray or Python than the
  local one.
* On the head, :func:`announce_node_types` records the node types of the autoscaler's
  config (``~/ray_bootstrap_config.yaml``) in the cluster's GCS as Ray's own
  ``ClusterConfig`` record (``raytune-fed cluster announce``); any driver reads it back:
  :func:`offered_resources` (the custom resources a node the autoscaler *can* start would
  declare) and :func:`node_groups` (each node type's resources and how many nodes of it the
  autoscaler may run).  A grid then pins a site to its ``site:<name>`` node type before
  such a node runs, its resource demand is what makes the autoscaler start one, and it
  asks the autoscaler only for what the node types can hold.  (Ray 2.60's launcher does
  not fill that record itself; KubeRay-style deployments report it the same way.)
* On an on-premises machine (``cluster.local.yaml``), :func:`start_ray` and :func:`stop_ray`
  start and stop a Ray of this cluster's own (its temporary directory, and a token in the
  environment of every process it starts, recorded in a marker file), so a restart never
  stops a Ray it did not start, as ``ray stop`` (every Ray process of the user) would.
* Before ``ray up``, :func:`write_site_node_types` turns cluster.yaml's site node type
  template into one node type per site of a dataset (``raytune-fed cluster node-types``).

Ray is imported only inside the functions that talk to a cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raytune_fed import _ray_internals
from raytune_fed.errors import ConfigError

BUNDLE_DIR = "dist/cluster"
"""Where ``raytune-fed cluster bundle`` writes, relative to the source tree (cluster.yaml mounts it)."""

CONSTRAINTS = "constraints.txt"
_NOT_PINNED = {"pip", "setuptools", "wheel", "distribute", "raytune-fed"}  # like `pip freeze`, and ourselves
_IMAGE = re.compile(r"^rayproject/ray:(?P<ray>\d+\.\d+\.\d+)-py(?P<py>\d)(?P<minor>\d+)(-[a-z0-9]+)*$")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_distributions() -> tuple[list[str], list[str]]:
    """``name==version`` of every distribution this interpreter sees (first on the path wins), sorted;
    and the names left out because they were installed from a path, a URL or a VCS checkout (an index
    has no such version to pin)."""
    from importlib import metadata

    pins: dict[str, str] = {}
    unpinnable: set[str] = set()
    for dist in metadata.distributions():
        raw = dist.metadata["Name"]
        if not raw:
            continue
        name = _normalise(raw)
        if name in pins or name in unpinnable or name in _NOT_PINNED:
            continue
        if dist.read_text("direct_url.json"):  # installed from a path, an URL or a VCS checkout (PEP 610)
            unpinnable.add(name)
            continue
        pins[name] = f"{name}=={dist.version}"
    return [pins[n] for n in sorted(pins)], sorted(unpinnable)


def constraints_text() -> str:
    """The constraints file the nodes install with (see :func:`pinned_distributions`)."""
    import platform

    import ray

    pins, unpinnable = pinned_distributions()
    head = [f"# Pinned from the environment that built this bundle: Python {platform.python_version()}, "
            f"Ray {ray.__version__}, {platform.system()} {platform.machine()}.",
            "# Written by `raytune-fed cluster bundle`; nodes run `pip install --constraint` with it."]
    if unpinnable:
        head.append(f"# Not pinned (installed from a path, URL or VCS): {', '.join(unpinnable)}")
    return "\n".join(head + pins) + "\n"


def check_image(cluster_config: Mapping[str, Any]) -> str | None:
    """The container image of a cluster config must run this machine's Ray and Python (None: no container)."""
    import ray

    image = (cluster_config.get("docker") or {}).get("image")
    if not image:
        return None
    m = _IMAGE.match(str(image))
    want = f"rayproject/ray:{ray.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-cpu"
    if m is None:
        raise ConfigError(f"cluster config: docker.image must be a rayproject/ray image tagged "
                          f"<ray version>-py<XY>[-...], e.g. {want!r}, got {image!r}")
    have = (m["ray"], (int(m["py"]), int(m["minor"])))
    if have != (ray.__version__, sys.version_info[:2]):
        raise ConfigError(f"cluster config: docker.image {image!r} runs Ray {m['ray']} on Python "
                          f"{m['py']}.{m['minor']}, but this machine has Ray {ray.__version__} on Python "
                          f"{sys.version_info[0]}.{sys.version_info[1]}; the nodes must match it: use {want!r}")
    return str(image)


def _read_mapping(path: str | Path, what: str, kind: str) -> dict[str, Any]:
    """The YAML (or JSON) mapping in ``path``; a clear ConfigError naming ``what`` and the path otherwise."""
    import yaml

    try:
        config = yaml.safe_load(Path(path).expanduser().read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read the {what} {path}: {type(exc).__name__}: "
                          f"{(str(exc).splitlines() or [''])[0]}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"the {what} {path} is not {kind}")
    return config


def _source_tree(source: Path) -> str:
    import tomllib

    path = source / "pyproject.toml"
    try:
        name = tomllib.loads(path.read_text())["project"]["name"]
    except (OSError, KeyError, ValueError) as exc:
        raise ConfigError(f"{source} is not the raytune-fed source tree (no readable pyproject.toml: "
                          f"{type(exc).__name__}); run this from the repository root or pass --source") from None
    if _normalise(name) != "raytune-fed":
        raise ConfigError(f"{path} describes {name!r}, not raytune-fed; pass --source the repository root")
    return str(source)


def build_bundle(source: str | Path = ".", out: str | Path | None = None,
                 cluster_yaml: str | Path | None = None) -> dict[str, Any]:
    """Build the wheel of the source tree and the constraints file into ``out`` (default
    ``<source>/dist/cluster``); check ``cluster_yaml``'s image first.  Returns what was written."""
    source = Path(source).resolve()
    _source_tree(source)
    out = Path(out) if out is not None else source / BUNDLE_DIR
    image = None
    if cluster_yaml is not None:
        config = _read_mapping(cluster_yaml, "cluster config", "a YAML mapping")
        image = check_image(config)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the bundle directory {out}: {exc.strerror or exc}") from None
    for old in out.glob("raytune_fed-*.whl"):  # one wheel only: the setup command installs raytune_fed-*.whl
        old.unlink()
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out),
                            str(source)], capture_output=True, text=True)
    wheels = sorted(out.glob("raytune_fed-*.whl"))
    if build.returncode != 0 or len(wheels) != 1:
        last = (build.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"building the wheel of {source} failed (pip wheel exit {build.returncode}): {last}")
    (out / CONSTRAINTS).write_text(constraints_text())
    return {"wheel": str(wheels[0]), "constraints": str(out / CONSTRAINTS), "image": image}


# --- the head's node types, in the GCS --------------------------------------------------------------------


def cluster_config_record(config: Mapping[str, Any]) -> Any:
    """Ray's ``ClusterConfig`` record of an autoscaler config: one node group per node type, with its
    resources (whole units; ``memory`` in bytes), ``min_workers`` and ``max_workers`` (the head: one)."""
    from ray.core.generated import autoscaler_pb2

    types = config.get("available_node_types")
    if not isinstance(types, Mapping) or not types:
        raise ConfigError("the autoscaler config has no available_node_types to announce")
    head = config.get("head_node_type")
    record = autoscaler_pb2.ClusterConfig()  # type: ignore[attr-defined]  # protobuf-generated, no stubs
    for name, node_type in types.items():
        group = record.node_group_configs.add()
        group.name = str(name)
        for resource, amount in ((node_type or {}).get("resources") or {}).items():
            if amount is None or float(amount) < 0:
                raise ConfigError(f"node type {name!r}: resource {resource!r} must be >= 0, got {amount!r}")
            group.resources[str(resource)] = int(amount)
        if name == head:
            group.min_count, group.max_count = 1, 1
        else:
            group.min_count = int(node_type.get("min_workers", 0))
            group.max_count = int(node_type.get("max_workers", config.get("max_workers", 0)))
    return record


def announce_node_types(config_path: str | Path, address: str = "auto") -> list[str]:
    """Record the node types of the autoscaler config at ``config_path`` in the GCS at ``address``
    (run on the head after ``ray start --head``); returns the custom resources they offer."""
    from raytune_fed._address import check_address, probe_address

    address = check_address(address) or "auto"
    config = _read_mapping(config_path, "autoscaler config", "a mapping")  # YAML reads the JSON Ray writes too
    record = cluster_config_record(config)
    probe_address(address)  # one error line at once, not the GCS client's retries and traceback
    try:
        gcs = _ray_internals.canonical_gcs_address(address)
        _ray_internals.report_cluster_config(gcs, record.SerializeToString())
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"cannot reach the cluster's GCS at {address!r} to announce its node types: "
                          f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}") from None
    return sorted(_custom(record))


def _custom(record: Any) -> set[str]:
    return {r for g in record.node_group_configs if g.max_count != 0
            for r, amount in g.resources.items() if amount > 0 and r not in ("CPU", "GPU", "memory",
                                                                            "object_store_memory")}


def _announced() -> Any:
    """The connected cluster's ``ClusterConfig`` record (None: not connected, or nothing announced)."""
    try:
        return _ray_internals.cluster_config()
    except Exception:  # not connected, or a Ray without the record: nothing is offered beyond the live nodes
        return None


def offered_resources() -> frozenset[str]:
    """The custom resources that some node type of the connected cluster declares, running or not
    (from the record :func:`announce_node_types` wrote; empty without one, e.g. a local session)."""
    record = _announced()
    return frozenset(_custom(record)) if record is not None else frozenset()


def node_groups() -> tuple[tuple[dict[str, float], int], ...]:
    """The connected cluster's node types as its head announced them: each one's resources and the
    most nodes of it the autoscaler may run (the head: one).  Empty without an announcement."""
    record = _announced()
    if record is None:
        return ()
    return tuple(({r: float(a) for r, a in g.resources.items()}, int(g.max_count))
                 for g in record.node_group_configs if g.max_count > 0)


# --- an on-premises machine: a Ray of this cluster's own, stopped alone ------------------------------------

RAY_MARK = "RAYTUNE_FED_CLUSTER_RAY"
"""The environment variable that every process of a Ray started by :func:`start_ray` inherits (its value: the
start's token).  ``ray start`` passes its environment to the GCS, the raylet and the agents, and the raylet
to every worker it spawns, so the token (with the descendants of the processes showing it, see
:func:`marked_processes`) names exactly the processes of that start."""

STATE_DIR = "~/.raytune-fed-ray"
"""Where :func:`start_ray` keeps its marker file (``ray.json``), mode 0700 so that no other user can replace
the marker; Ray's temporary directory is its subfolder ``ray`` (Ray makes that one world-writable; the path is
kept short: Ray's Unix socket paths under it must stay below 108 bytes).  One cluster per user and machine:
a second needs its own ``--state-dir`` and ports."""

_MARKER = "ray.json"
_FIRST, _LAST = ("raylet",), ("gcs_server",)  # stopped first and last, as `ray stop` orders them


def _state_dir(state_dir: str | Path) -> Path:
    return Path(state_dir).expanduser().absolute()


def _private_state(state: Path) -> None:
    """Create ``state`` as this user's own folder, mode 0700 (an existing one must be this user's)."""
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    if state.stat().st_uid != os.getuid():
        raise ConfigError(f"the state directory {state} belongs to another user; give --state-dir a folder of yours")
    state.chmod(0o700)


def _write_marker(state: Path, marker: dict[str, Any]) -> None:
    """Write the marker whole or not at all (a temporary file, fsynced, then renamed), mode 0600."""
    import json
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=state, prefix=".ray.json.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(marker, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, state / _MARKER)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_marker(state: Path) -> dict[str, Any] | None:
    import json

    try:
        marker = json.loads((state / _MARKER).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the marker file {state / _MARKER}: {type(exc).__name__}: {exc}") from None
    if not isinstance(marker, dict) or not isinstance(marker.get("token"), str) or not marker["token"]:
        raise ConfigError(f"the marker file {state / _MARKER} names no token of a Ray start; it is not this "
                          f"cluster's (remove it only if you know which Ray it describes)")
    return marker


def marked_processes(token: str) -> dict[int, str]:
    """This user's live processes of the Ray whose start carried ``token``: those whose environment holds
    ``RAYTUNE_FED_CLUSTER_RAY=<token>``, and their descendants (a worker that retitles itself, as Ray's do
    with setproctitle, may overwrite the environment that ``/proc`` shows; it is still its raylet's child).

    Reads ``/proc`` (Linux); another user's processes cannot be read and are never matched."""
    proc = Path("/proc")
    if not (proc / "self" / "environ").exists():
        raise ConfigError("stopping only this cluster's Ray reads each process's environment in /proc; this "
                          f"system ({sys.platform}) has none: the on-premises recipe needs Linux machines")
    wanted = f"{RAY_MARK}={token}".encode()
    me = os.getpid()
    names: dict[int, str] = {}
    parent: dict[int, int] = {}
    found: set[int] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            stat = (entry / "stat").read_text()
            state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
            if state == "Z" or (entry / "status").stat().st_uid != os.getuid():
                continue
            names[pid], parent[pid] = stat[stat.index("(") + 1:stat.rindex(")")], int(ppid)
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.add(pid)
        except (OSError, ValueError, IndexError):  # gone, or not readable
            continue
    grown = True
    while grown:  # the descendants of a marked process are this Ray's too
        more = {pid for pid, ppid in parent.items() if ppid in found and pid not in found}
        found |= more
        grown = bool(more)
    return {pid: names[pid] for pid in sorted(found)}


def start_ray(ray_args: list[str], state_dir: str | Path = STATE_DIR) -> dict[str, Any]:
    """``ray start RAY_ARGS`` with this cluster's own temporary directory and a fresh token in the environment
    of every process it starts; the marker file records the token, the address and the processes.

    Refuses while a Ray that an earlier call started is still running (:func:`stop_ray` first), and
    refuses ``--temp-dir`` (the state directory holds it).  Returns the marker."""
    import secrets
    import shutil
    import time

    if any(a == "--temp-dir" or a.startswith("--temp-dir=") for a in ray_args):
        raise ConfigError("`raytune-fed cluster start-ray` sets Ray's --temp-dir itself (to --state-dir); "
                          f"drop it from the ray start arguments, got {ray_args!r}")
    if "--block" in ray_args:
        raise ConfigError("`raytune-fed cluster start-ray` returns once Ray runs; --block does not apply")
    state = _state_dir(state_dir)
    old = _read_marker(state)
    if old is not None:
        running = marked_processes(old["token"])
        if running:
            raise ConfigError(f"a Ray that this cluster started is still running here ({len(running)} processes, "
                              f"marker {state / _MARKER}); run `raytune-fed cluster stop-ray` first")
    ray_cli = Path(sys.executable).with_name("ray")
    ray_bin = str(ray_cli) if ray_cli.exists() else shutil.which("ray")
    if ray_bin is None:
        raise ConfigError("no `ray` command next to this Python or on PATH: install Ray on this machine")
    temp = state / "ray"
    try:
        _private_state(state)
        temp.mkdir(exist_ok=True)
        (state / _MARKER).unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot prepare the state directory {state}: {exc.strerror or exc}") from None
    token = secrets.token_hex(12)
    marker: dict[str, Any] = {"token": token, "started": time.time(), "temp_dir": str(temp),
                              "ray_start": [*ray_args, f"--temp-dir={temp}"]}
    # the marker first: if `ray start` fails half-way, stop_ray still finds what it left running
    _write_marker(state, marker)
    done = subprocess.run([ray_bin, "start", *marker["ray_start"]], env={**os.environ, RAY_MARK: token},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        stop_ray(state)
        last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"ray start {' '.join(ray_args)} failed (exit {done.returncode}): {last}")
    try:  # the GCS address Ray itself recorded for this start (its temp dir, not the machine's shared one)
        address = (temp / "ray_current_cluster").read_text().strip()
    except OSError:
        address = ""
    marker.update(address=address, pids=sorted(marked_processes(token)))
    _write_marker(state, marker)
    return marker


def stop_ray(state_dir: str | Path = STATE_DIR, grace_seconds: float = 10.0) -> list[int]:
    """Stop the Ray that :func:`start_ray` started from ``state_dir``, and nothing else: the processes carrying
    its token (raylets first, the GCS last; SIGTERM, then SIGKILL after ``grace_seconds``).  No marker: no Ray
    of this cluster runs here, nothing is stopped.  Returns the PIDs stopped; the marker is removed."""
    import signal
    import time

    state = _state_dir(state_dir)
    marker = _read_marker(state)
    if marker is None:
        return []
    token, stopped = marker["token"], set[int]()
    for group in ("first", "rest", "last"):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            running = {pid: name for pid, name in marked_processes(token).items()
                       if (name not in _LAST if group == "rest" else name in (_FIRST if group == "first" else _LAST))}
            for pid in running:
                try:
                    os.kill(pid, sig)
                    stopped.add(pid)
                except ProcessLookupError:
                    pass
            give_up = time.monotonic() + (grace_seconds if sig == signal.SIGTERM else 5.0)
            while running and time.monotonic() < give_up:
                time.sleep(0.2)
                running = {pid: n for pid, n in running.items() if pid in marked_processes(token)}
            if not running:
                break
    left = marked_processes(token)
    if left:
        raise ConfigError(f"processes of this cluster's Ray outlived SIGKILL: {sorted(left)}; marker kept at "
                          f"{state / _MARKER}")
    (state / _MARKER).unlink(missing_ok=True)
    return sorted(stopped)


def ray_address(state_dir: str | Path = STATE_DIR) -> str:
    """The GCS address of the Ray that :func:`start_ray` started from ``state_dir`` (ConfigError: none runs)."""
    state = _state_dir(state_dir)
    marker = _read_marker(state)
    if marker is None or not marker.get("address"):
        raise ConfigError(f"no Ray of this cluster runs on this machine (no address in {state / _MARKER}); "
                          f"`ray up` starts one")
    return str(marker["address"])


# --- site node types from a dataset's sites ----------------------------------------------------------------

SITE_TEMPLATE = "site:site0"
"""The resource of cluster.yaml's site node type: the template :func:`site_node_types` copies once per site."""

SITE_NODE_TYPE = "ray.worker.site.{site}"
_SITE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def dataset_site_names(dataset: str, *, target: str | None = None, site_column: str | None = None) -> tuple[str, ...]:
    """The sites of ``dataset``'s natural split, in its order (what an RFMS grid calls them)."""
    from raytune_fed.data import load_dataset

    ds = load_dataset(dataset, target=target, site_column=site_column)
    if not ds.site_names:
        raise ConfigError(f"dataset {dataset!r} has no sites of its own (a pooled dataset: its split into sites "
                          f"is made per grid); give a dataset with sites, e.g. 'geo5_sim' or a file with --site-column")
    bad = [s for s in ds.site_names if not _SITE_NAME.match(s)]
    if bad:
        raise ConfigError(f"dataset {dataset!r}: site names must use only letters, digits, '_', '.' and '-' to "
                          f"name a node type and its resource site:<name>, got {bad!r}")
    return tuple(ds.site_names)


def site_node_types(config: Mapping[str, Any], sites: Sequence[str], *, cpus: int | None = None) -> dict[str, Any]:
    """``config`` with its site node type template (the node type declaring ``site:site0``) replaced by one
    node type ``ray.worker.site.<name>`` per site, each declaring ``{"site:<name>": 1}`` (and ``cpus`` CPUs when
    given) with the template's node_config and worker counts; the global ``max_workers`` grows by the copies."""
    import copy

    types: Mapping[str, Any] = config.get("available_node_types") or {}
    if not isinstance(types, Mapping):
        raise ConfigError(f"available_node_types of the cluster config must be a mapping, got {types!r}")
    templates = [n for n, t in types.items() if SITE_TEMPLATE in ((t or {}).get("resources") or {})]
    if len(templates) != 1:
        found = "no node type" if not templates else f"{len(templates)} node types ({', '.join(templates)})"
        raise ConfigError(f"the cluster config must have one site node type template declaring {SITE_TEMPLATE!r} "
                          f"(cluster.yaml's ray.worker.site0), found {found}"
                          + ("; Ray's on-premises provider (provider: type: local) has no node types"
                             if (config.get("provider") or {}).get("type") == "local" else ""))
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1):
        raise ConfigError(f"--cpus must be an integer >= 1 (a site node runs its openbox's cells), got {cpus!r}")
    if not sites or len(set(sites)) != len(sites):
        raise ConfigError(f"site names must be given once each, got {list(sites)!r}")
    [template] = templates
    block = types[template]
    generated = [SITE_NODE_TYPE.format(site=s) for s in sites]
    clash = sorted(set(generated) & (set(types) - {template}))
    if clash:
        raise ConfigError(f"the cluster config already has node types {clash}; give a config with the template only")
    out = copy.deepcopy(dict(config))
    new_types: dict[str, Any] = {}
    for name, node_type in types.items():
        if name != template:
            new_types[name] = copy.deepcopy(node_type)
            continue
        for site, site_type in zip(sites, generated):
            resources = {r: v for r, v in (block.get("resources") or {}).items() if r != SITE_TEMPLATE}
            if cpus is not None:
                resources["CPU"] = cpus
            resources[f"site:{site}"] = 1
            new_types[site_type] = {**copy.deepcopy(block), "resources": resources}
    out["available_node_types"] = new_types
    if "max_workers" in out:
        out["max_workers"] = int(out["max_workers"]) + (len(sites) - 1) * int(block.get("max_workers", 1))
    return out


def write_site_node_types(dataset: str, out: str | Path, config_path: str | Path = "cluster.yaml", *,
                          cpus: int | None = None, target: str | None = None,
                          site_column: str | None = None) -> tuple[str, ...]:
    """``raytune-fed cluster node-types``: write ``config_path`` with a site node type per site of ``dataset``
    to ``out``; returns the sites."""
    import yaml

    if Path(out).expanduser().absolute() == Path(config_path).expanduser().absolute():
        raise ConfigError(f"--out {out} is the config it is made from; write the generated file beside it")
    config = _read_mapping(config_path, "cluster config", "a YAML mapping")
    sites = dataset_site_names(dataset, target=target, site_column=site_column)
    generated = site_node_types(config, sites, cpus=cpus)
    head = (f"# Written by `raytune-fed cluster node-types --dataset {dataset} --config {config_path}`: {config_path}\n"
            f"# with its site node type template replaced by one node type per site of {dataset}\n"
            f"# ({', '.join(sites)}). Its comments are in {config_path}; regenerate instead of editing.\n")
    try:
        Path(out).expanduser().write_text(head + yaml.safe_dump(generated, sort_keys=False, width=110))
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}") from None
    return sites
