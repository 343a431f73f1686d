"""cluster.yaml and cluster.local.yaml are valid Ray cluster-launcher configs and say what we rely on;
``raytune-fed cluster node-types`` writes valid ones; ``stop-ray`` stops only what its marker names.

Validation uses Ray's own code: ``validate_config`` checks a config against
``ray/autoscaler/ray-schema.json`` plus a few semantic rules, and ``prepare_config``
merges the provider defaults, the same steps ``ray up`` takes before it first calls AWS.
Nothing here talks to AWS or starts Ray (the stop-ray test stops sleeping processes it starts).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import click
import jsonschema
import pytest
import ray
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from raytune_fed.cluster import BUNDLE_DIR, CONSTRAINTS
from raytune_fed.errors import ConfigError
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


# --- cluster.local.yaml: the on-premises recipe ------------------------------------------------------------

LOCAL_YAML = CLUSTER_YAML.with_name("cluster.local.yaml")
_BARE_RAY_STOP = re.compile(r"(^|[;&|(]\s*)ray\s+stop\b")
_COMMANDS = ("initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
             "head_start_ray_commands", "worker_start_ray_commands")


@pytest.fixture
def local_cfg() -> dict:
    cfg = yaml.safe_load(LOCAL_YAML.read_text())
    assert isinstance(cfg, dict), "cluster.local.yaml must be a YAML mapping"
    return cfg


def test_local_recipe_passes_ray_validation_raw_and_prepared(local_cfg):
    validate_config(copy.deepcopy(local_cfg))
    prepared = prepare_config(copy.deepcopy(local_cfg))  # what `ray up` does: the local provider's one node type
    validate_config(prepared)
    [node_type] = prepared["available_node_types"].values()
    assert node_type["max_workers"] == len(local_cfg["provider"]["worker_ips"])


@pytest.mark.parametrize("mutate, error", [
    (lambda c: c.__setitem__("head_start_ray_command", c.pop("head_start_ray_commands")), jsonschema.ValidationError),
    (lambda c: c["provider"].__setitem__("worker_ip", c["provider"].pop("worker_ips")), click.ClickException),
    (lambda c: c.__setitem__("available_node_types", {"x": {"resources": {}, "node_config": {}}}), ValueError),
], ids=["misspelled-top-level-key", "no-worker-ips", "node-types-on-premises"])
def test_broken_local_recipes_fail_as_ray_up_takes_them(local_cfg, mutate, error):
    def take(cfg):
        validate_config(copy.deepcopy(cfg))
        validate_config(prepare_config(copy.deepcopy(cfg)))

    take(local_cfg)  # the unbroken copy passes, so the failure is the mutation's
    mutate(local_cfg)
    with pytest.raises(error):
        take(local_cfg)


def test_local_recipe_is_on_premises_with_cluster_yamls_bundle(local_cfg, raw):
    assert local_cfg["provider"]["type"] == "local"
    assert local_cfg["provider"]["head_ip"] and isinstance(local_cfg["provider"]["worker_ips"], list)
    assert set(local_cfg["auth"]) == {"ssh_user", "ssh_private_key"}
    assert local_cfg["auth"]["ssh_user"] != "root", "`ray down`'s own `ray stop` as root ends every user's Ray"
    assert "docker" not in local_cfg, "the machines' own Python, no container"
    assert "available_node_types" not in local_cfg, "Ray's local provider has one node type of its own"
    for key in ("file_mounts", "setup_commands", "rsync_exclude", "rsync_filter"):
        assert local_cfg[key] == raw[key], f"{key}: cluster.yaml's"
    assert local_cfg["head_setup_commands"] == [], "boto3 is for the AWS autoscaler"
    assert local_cfg["cluster_name"] != raw["cluster_name"]


def test_local_recipe_never_stops_a_ray_it_did_not_start(local_cfg, raw):
    """`ray stop` ends every Ray process of the machine's user: the recipe stops only the Ray it started."""
    commands = [c for key in _COMMANDS for c in local_cfg.get(key) or []]
    assert [c for c in commands if _BARE_RAY_STOP.search(c)] == []
    assert [c for c in raw["head_start_ray_commands"] if _BARE_RAY_STOP.search(c)], "the guard sees cluster.yaml's"
    for key, role in (("head_start_ray_commands", "--head"), ("worker_start_ray_commands", "--address=$RAY_HEAD_IP")):
        stop, start, *rest = local_cfg[key]
        assert stop == "raytune-fed cluster stop-ray"
        words = start.split("raytune-fed cluster start-ray -- ", 1)[1].split()
        assert words[0].startswith(role)
        assert not any(w.startswith(("--temp-dir", "--block")) for w in words), "start-ray owns the temp dir"
        assert not any(" ray start" in c or c.startswith("ray start") for c in local_cfg[key])
    head = local_cfg["head_start_ray_commands"]
    port = re.search(r"--port=(\d+)", head[1])[1]
    assert port != "6379", "not Ray's default port: another Ray of the machine may hold it"
    assert f"--address=$RAY_HEAD_IP:{port}" in local_cfg["worker_start_ray_commands"][1]
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head[1]
    announce = 'raytune-fed cluster announce ~/ray_bootstrap_config.yaml --address "$(raytune-fed cluster address)"'
    assert head[2] == announce, "the head's own Ray: `auto` could find another Ray of the machine"


def test_local_recipe_has_no_absolute_machine_paths():
    for n, line in enumerate(LOCAL_YAML.read_text().splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        assert not re.search(r"(/home/|/Users/|/root/|/work/|[A-Za-z]:\\)", line), f"line {n}: {line!r}"


# --- `raytune-fed cluster node-types`: cluster.yaml with one site node type per site of a dataset --------------


def _generate(tmp_path, *args: str):
    import subprocess
    import sys
    from pathlib import Path as _Path

    out = tmp_path / "cluster.geo5.yaml"
    cli = _Path(sys.executable).with_name("raytune-fed")
    done = subprocess.run([str(cli), "cluster", "node-types", *args, "--out", str(out)], capture_output=True,
                          text=True, cwd=CLUSTER_YAML.parent)
    return done, out


@pytest.mark.process
def test_node_types_from_a_dataset_validate_and_hold_its_sites(tmp_path, raw):
    from raytune_fed.data import load_dataset

    done, out = _generate(tmp_path, "--dataset", "geo5_sim", "--config", "cluster.yaml", "--cpus", "4")
    assert done.returncode == 0, done.stderr
    generated = yaml.safe_load(out.read_text())
    validate_config(copy.deepcopy(generated))
    prepared = prepare_config(copy.deepcopy(generated))  # as `ray up cluster.geo5.yaml` takes it
    validate_config(prepared)
    sites = load_dataset("geo5_sim").site_names
    site_types = {n: t for n, t in _worker_types(generated).items()
                  if any(k.startswith("site:") for k in t["resources"])}
    assert sorted(site_types) == sorted(f"ray.worker.site.{s}" for s in sites)
    template = raw["available_node_types"]["ray.worker.site0"]
    for site in sites:
        t = site_types[f"ray.worker.site.{site}"]
        assert t["resources"] == {"site:" + site: 1, "CPU": 4}
        assert t["node_config"] == template["node_config"]
        assert (t["min_workers"], t["max_workers"]) == (template["min_workers"], template["max_workers"])
    assert "ray.worker.site0" not in generated["available_node_types"], "the template block is gone"
    others = {n: t for n, t in raw["available_node_types"].items() if n != "ray.worker.site0"}
    assert {n: generated["available_node_types"][n] for n in others} == others
    assert generated["max_workers"] == raw["max_workers"] + len(sites) - 1
    assert {k: v for k, v in generated.items() if k not in ("available_node_types", "max_workers")} == \
        {k: v for k, v in raw.items() if k not in ("available_node_types", "max_workers")}
    test_site_node_types_declare_one_site_resource(copy.deepcopy(generated))  # the shipped file's own checks


@pytest.mark.process
@pytest.mark.parametrize("args, message", [
    (("--dataset", "no_such_dataset"), "unknown dataset 'no_such_dataset'"),
    (("--dataset", "spambase"), "dataset 'spambase' has no sites of its own"),
    (("--dataset", "geo5_sim", "--config", "cluster.local.yaml"), "one site node type template declaring "
                                                                   "'site:site0'.*found no node type"),
    (("--dataset", "geo5_sim", "--cpus", "0"), "--cpus must be an integer >= 1 .*got 0"),
], ids=["unknown-dataset", "no-sites", "no-template", "no-cpus"])
def test_node_types_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    done, out = _generate(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert re.search(message, line), line
    assert not out.exists()


# --- `raytune-fed cluster stop-ray`: only the processes of the marker's start ----------------------------------


def _sleeper(env: dict[str, str]):
    import os
    import subprocess
    import sys

    # a Ray worker's name on its command line: `ray stop` would end it
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "default_worker.py"],
                            env={**os.environ, **env})


@pytest.mark.process
def test_stop_ray_stops_the_marked_processes_and_no_other(tmp_path):
    from raytune_fed.cluster import RAY_MARK, marked_processes, ray_address, start_ray, stop_ray

    ours, other_start, unmarked = (_sleeper({RAY_MARK: "t1"}), _sleeper({RAY_MARK: "t0"}), _sleeper({}))
    try:
        import time

        give_up = time.monotonic() + 30
        while ours.pid not in marked_processes("t1") and time.monotonic() < give_up:
            time.sleep(0.1)
        assert set(marked_processes("t1")) == {ours.pid}
        assert stop_ray(tmp_path) == [], "no marker: nothing of this cluster runs here"
        assert ours.poll() is None
        (tmp_path / "ray.json").write_text(json.dumps({"token": "t1", "address": "10.0.0.1:6390"}))
        assert ray_address(tmp_path) == "10.0.0.1:6390"
        with pytest.raises(ConfigError, match=r"still running here \(1 processes.*run `raytune-fed cluster stop-ray`"):
            start_ray(["--head"], tmp_path)  # never a second Ray of the same state directory
        assert stop_ray(tmp_path, grace_seconds=5) == [ours.pid]
        assert ours.wait(10) is not None
        assert other_start.poll() is None and unmarked.poll() is None, "another start's and an unmarked process live"
        assert not (tmp_path / "ray.json").exists()
        with pytest.raises(ConfigError, match="no Ray of this cluster runs on this machine"):
            ray_address(tmp_path)
    finally:
        for proc in (ours, other_start, unmarked):
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("marker, args, message", [
    (None, ["--head", "--temp-dir=/elsewhere"], "sets Ray's --temp-dir itself"),
    (None, ["--head", "--block"], "--block does not apply"),
    ("not json", ["--head"], "cannot read the marker file"),
    ('{"address": "x:1"}', ["--head"], "names no token of a Ray start"),
], ids=["temp-dir", "block", "unreadable-marker", "marker-without-token"])
def test_start_ray_refuses_bad_input(tmp_path, marker, args, message):
    from raytune_fed.cluster import start_ray

    if marker is not None:
        (tmp_path / "ray.json").write_text(marker)
    with pytest.raises(ConfigError, match=message):
        start_ray(args, tmp_path)
    assert not list(tmp_path.glob("session_*")), "no Ray was started"
