"""Running on a cluster that Ray's cluster launcher starts (``ray up cluster.yaml``).

One job on each side of ``ray up``:

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

Ray is imported only inside the functions that talk to a cluster.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
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
