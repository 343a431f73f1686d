"""cluster.yaml is a valid Ray cluster-launcher config and says what we rely on.

Validation uses Ray's own code: ``validate_config`` checks a config against
``ray/autoscaler/ray-schema.json`` plus a few semantic rules, and ``prepare_config``
merges the provider defaults, the same steps ``ray up`` takes before it first calls AWS.
Nothing here talks to AWS or starts Ray.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from raytune_fed.cluster import BUNDLE_DIR, CONSTRAINTS
from raytune_fed.runtime import SITE_SLIVER

CLUSTER_YAML = Path(__file__).resolve().parent.parent / "cluster.yaml"
BUNDLE = "~/raytune_fed_dist"
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


def test_nodes_install_the_bundle_built_on_this_machine(cfg):
    """Nodes install the wheel `raytune-fed cluster bundle` writes, at the pinned versions; no source tree."""
    assert cfg["file_mounts"] == {BUNDLE: BUNDLE_DIR}, "ship dist/cluster (the wheel and constraints) and nothing else"
    wheel, constraints = f"{BUNDLE}/raytune_fed-*.whl", f"{BUNDLE}/{CONSTRAINTS}"
    first, second = cfg["setup_commands"]
    assert first.split() == ["pip", "install", "--quiet", "--constraint", constraints, wheel]
    assert second.split() == ["pip", "install", "--quiet", "--no-deps", "--force-reinstall", wheel]
    assert not any(" -e " in c or "--editable" in c for c in cfg["setup_commands"] + cfg["head_setup_commands"])
    assert cfg["rsync_exclude"] == [] and cfg["rsync_filter"] == []
    gitignore = (CLUSTER_YAML.parent / ".gitignore").read_text().split()
    assert "dist/" in gitignore, "the bundle is a build artefact"


def test_head_installs_the_cluster_extra(cfg):
    """The head's autoscaler launches workers through boto3: the `cluster` extra, at the pinned version."""
    import tomllib

    extra = tomllib.loads((CLUSTER_YAML.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = sorted(re.split(r"[<>=!~;\[ ]", r)[0] for r in extra["cluster"])
    [command] = cfg["head_setup_commands"]
    words = command.split()
    assert words[:5] == ["pip", "install", "--quiet", "--constraint", f"{BUNDLE}/{CONSTRAINTS}"]
    assert sorted(words[5:]) == names


def test_head_announces_its_node_types(cfg):
    """After `ray start --head`, the head records the node types so grids see which site nodes can start."""
    commands = cfg["head_start_ray_commands"]
    start = next(i for i, c in enumerate(commands) if "ray start --head" in c)
    assert commands[start + 1:] == ["raytune-fed cluster announce ~/ray_bootstrap_config.yaml"]


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


# --- Ray's AWS launcher, offline ---------------------------------------------------------------------------


@pytest.fixture
def no_aws(monkeypatch):
    """Any attempt to build an AWS client, session or credential chain fails the test."""
    import boto3
    import botocore.credentials
    import botocore.session

    def refuse(*args, **kwargs):
        raise AssertionError("a test reached for AWS (boto3 client, session or credentials)")

    for env in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "client", refuse)
    monkeypatch.setattr(boto3, "resource", refuse)
    monkeypatch.setattr(boto3.session.Session, "__init__", refuse)
    monkeypatch.setattr(botocore.session.Session, "get_credentials", refuse)
    monkeypatch.setattr(botocore.credentials, "create_credential_resolver", refuse)
    return refuse


def test_aws_launcher_takes_the_config_offline(cfg, no_aws):
    """`ray up`'s first steps on this file, up to the first call to AWS: Ray's own AWS provider is importable
    (boto3 comes with the `cluster` extra) and accepts the prepared config."""
    import boto3
    from ray.autoscaler._private.aws.config import _configure_from_network_interfaces
    from ray.autoscaler._private.providers import _NODE_PROVIDERS
    from ray.autoscaler._private.util import check_legacy_fields

    provider_cls = _NODE_PROVIDERS["aws"](cfg["provider"])  # what `ray up` calls: imports boto3 and the provider
    assert provider_cls.__name__ == "AWSNodeProvider"
    prepared = prepare_config(cfg)
    validate_config(prepared)
    check_legacy_fields(prepared)  # the first steps of bootstrap_aws that need no AWS call
    prepared = _configure_from_network_interfaces(prepared)
    assert set(prepared["available_node_types"]) == set(cfg["available_node_types"])
    with pytest.raises(AssertionError, match="reached for AWS"):  # the guard holds: nothing above asked AWS
        boto3.client("ec2", region_name=cfg["provider"]["region"])


@pytest.mark.process
def test_cluster_extra_brings_every_distribution_the_launcher_imports():
    """Everything `ray up` loads for AWS comes from the dependencies of raytune-fed[cluster]."""
    import subprocess
    import sys

    code = ("import json, os, sys; before = set(sys.modules); import ray.scripts.scripts, "
            "ray.autoscaler._private.commands, ray.autoscaler._private.aws.node_provider, "
            "ray.autoscaler._private.aws.config, boto3; "
            "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
            "print(json.dumps({m: getattr(sys.modules.get(m), '__file__', None) for m in sorted(new)}))")
    env = {"PATH": "/usr/bin:/bin", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    files = json.loads(out.strip().splitlines()[-1])
    from importlib import metadata

    owners = metadata.packages_distributions()
    # a module directly in a site-packages directory belongs to its distribution; one vendored inside another
    # package (Ray's thirdparty_files) comes with that package
    installed = {m for m, f in files.items() if f and Path(f).parent.parent.name == "site-packages"
                 or f and Path(f).parent.name == "site-packages"}
    used = {_norm(d) for m in installed for d in owners.get(m, ())}
    assert {"boto3", "botocore", "ray"} <= used
    closure = _requirement_closure("raytune-fed", {"cluster"})
    assert sorted(used - closure) == [], "imported by the AWS launcher but not brought by raytune-fed[cluster]"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_closure(root: str, extras: set[str]) -> set[str]:
    """Distributions installed because of ``root[extras]``: its requirements whose markers hold, recursively."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        key = _norm(name)
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (wanted or {""})):
                todo.append((req.name, frozenset(req.extras)))
    return {key for key, _ in seen}
