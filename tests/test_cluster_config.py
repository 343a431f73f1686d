"""cluster.yaml is a valid Ray cluster-launcher config and says what we rely on.

Validation uses Ray's own code: ``validate_config`` checks a config against
``ray/autoscaler/ray-schema.json`` plus a few semantic rules, and ``prepare_config``
merges the provider defaults, the same steps ``ray up`` takes before it first calls AWS.
Nothing here talks to AWS or starts Ray.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from raytune_fed.runtime import SITE_SLIVER

CLUSTER_YAML = Path(__file__).resolve().parent.parent / "cluster.yaml"
MOUNT = "~/raytune_fed"
SITE_KEY = re.compile(r"^site:[A-Za-z0-9_.-]+$")  # the key raytune_fed.runtime.site_placement asks for


@pytest.fixture(scope="module")
def raw() -> dict:
    with CLUSTER_YAML.open() as f:
        cfg = yaml.safe_load(f)
    assert isinstance(cfg, dict), "cluster.yaml must be a YAML mapping"
    return cfg


@pytest.fixture
def cfg(raw) -> dict:
    """A fresh copy per test: Ray's helpers mutate their argument."""
    return copy.deepcopy(raw)


def _worker_types(cfg: dict) -> dict:
    return {k: v for k, v in cfg["available_node_types"].items() if k != cfg["head_node_type"]}


# --- Ray's own validation -------------------------------------------------------------


def test_raw_file_passes_ray_validation(cfg):
    validate_config(cfg)


def test_prepared_config_passes_ray_validation(cfg):
    """What `ray up` validates: the file merged with the AWS defaults."""
    prepared = prepare_config(cfg)
    validate_config(prepared)
    # the defaults filled in nothing that overrides our choices
    assert prepared["provider"]["cache_stopped_nodes"] is False
    assert prepared["setup_commands"] == cfg["setup_commands"]
    head = prepared["available_node_types"][prepared["head_node_type"]]
    assert head["max_workers"] == 0 and head["min_workers"] == 0


@pytest.mark.parametrize(
    "mutate, error",
    [
        # misspelled top-level key (the schema forbids unknown keys)
        (lambda c: c.__setitem__("max_worker", c.pop("max_workers")), jsonschema.ValidationError),
        # wrong type
        (lambda c: c.__setitem__("max_workers", "eight"), jsonschema.ValidationError),
        # misspelled key inside a node type
        (lambda c: c["available_node_types"]["ray.worker.cpu"].__setitem__("min_worker", 0),
         jsonschema.ValidationError),
        # custom resources must be non-negative integers
        (lambda c: c["available_node_types"]["ray.worker.site0"]["resources"].__setitem__("site:site0", 0.5),
         jsonschema.ValidationError),
        # head type that is not one of the node types
        (lambda c: c.__setitem__("head_node_type", "ray.head.missing"), ValueError),
        # more minimum workers than the global cap
        (lambda c: c["available_node_types"]["ray.worker.cpu"].__setitem__("min_workers", 100), ValueError),
    ],
    ids=["misspelled-top-level-key", "wrong-type", "misspelled-node-key", "fractional-resource",
         "unknown-head-type", "min-over-max"],
)
def test_broken_copies_fail_ray_validation(cfg, mutate, error):
    validate_config(copy.deepcopy(cfg))  # the unbroken copy passes, so the failure is the mutation's
    mutate(cfg)
    with pytest.raises(error):
        validate_config(cfg)


# --- what raytune-fed relies on -------------------------------------------------------


def test_cluster_identity_and_provider(cfg):
    assert cfg["cluster_name"] == "raytune-fed"
    assert cfg["provider"]["type"] == "aws"
    assert cfg["provider"]["region"] == "us-west-2"
    assert cfg["provider"]["cache_stopped_nodes"] is False
    assert cfg["auth"]["ssh_user"] == "ubuntu"


def test_has_an_autoscaling_cpu_worker_pool(cfg):
    pools = {name: t for name, t in _worker_types(cfg).items()
             if not any(SITE_KEY.match(r) for r in t.get("resources", {}))}
    assert pools, "need a general (non-site) worker node type"
    for name, t in pools.items():
        assert t.get("min_workers", 0) == 0, f"{name}: should start empty and scale up on demand"
        assert t["max_workers"] >= 1, f"{name}: must be allowed to scale up"
        assert t["max_workers"] <= cfg["max_workers"], f"{name}: per-type cap above the global cap"


def test_site_node_types_declare_one_site_resource(cfg):
    sites = {name: t for name, t in _worker_types(cfg).items()
             if any(k.startswith("site:") for k in t.get("resources", {}))}
    assert sites, "keep at least the example site node type"
    seen = set()
    for name, t in sites.items():
        keys = [k for k in t["resources"] if k.startswith("site:")]
        assert len(keys) == 1, f"{name}: one site per node type, got {keys}"
        assert SITE_KEY.match(keys[0]), f"{name}: bad site resource name {keys[0]!r}"
        # site_placement asks for a sliver of the key per actor: any whole unit hosts all of a site's actors
        assert t["resources"][keys[0]] >= 1 > SITE_SLIVER
        # the cells whose openbox is this site are pinned here too and each needs a CPU
        assert t["resources"].get("CPU", 1) >= 1, f"{name}: a site node without CPUs cannot run its cells"
        assert t["max_workers"] >= 1
        assert keys[0] not in seen, f"{keys[0]} declared by two node types"
        seen.add(keys[0])
    head = cfg["available_node_types"][cfg["head_node_type"]]
    assert not any(k.startswith("site:") for k in head["resources"]), "site data must not live on the head"


def test_repository_is_mounted_and_installed(cfg):
    assert cfg["file_mounts"].get(MOUNT) == ".", "copy this repository to the nodes"
    installs = [c for c in cfg["setup_commands"] if "pip install" in c and MOUNT in c]
    assert installs, "setup_commands must pip-install the mounted package"
    # .venv / results / .git must not be shipped to every node
    assert ".gitignore" in cfg["rsync_filter"]
    assert "**/.git" in cfg["rsync_exclude"]
    gitignore = (CLUSTER_YAML.parent / ".gitignore").read_text().split()
    assert ".venv/" in gitignore


def test_head_and_workers_start_ray(cfg):
    head = " ; ".join(cfg["head_start_ray_commands"])
    workers = " ; ".join(cfg["worker_start_ray_commands"])
    assert cfg["head_start_ray_commands"][0] == "ray stop"
    assert cfg["worker_start_ray_commands"][0] == "ray stop"
    assert "ray start --head" in head
    assert "--port=6379" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "ray start --address=$RAY_HEAD_IP:6379" in workers
    assert "--head" not in workers


def test_head_can_launch_workers(cfg):
    # the autoscaler on the head calls EC2 through boto3
    assert any("boto3" in c for c in cfg["setup_commands"] + cfg["head_setup_commands"])


def test_container_runs_the_local_ray_version(cfg):
    """The cluster must run the same Ray as the machine that drives it."""
    image = cfg["docker"]["image"]
    m = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py3(\d+)-cpu", image)
    assert m, f"unexpected image {image!r}"
    assert m.group(1) == ray.__version__
    assert int(m.group(2)) >= 10, "the package needs Python >= 3.10"


def test_no_absolute_machine_paths():
    for n, line in enumerate(CLUSTER_YAML.read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        assert not re.search(r"(/home/|/Users/|/root/|/work/|[A-Za-z]:\\)", line), f"line {n}: {line!r}"
