"""What the nodes install (`raytune-fed cluster bundle`) and what the head announces (node types).

The end-to-end use of both is in tests/test_cluster_launcher.py (a `ray up` over ssh) and
tests/test_cluster_autoscaler.py (Ray's autoscaler); here: their rules, without a cluster.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import ray
import yaml

from raytune_fed import __version__
from raytune_fed.cluster import (
    CONSTRAINTS,
    build_bundle,
    check_image,
    cluster_config_record,
    offered_resources,
    pinned_distributions,
)
from raytune_fed.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
HERE = f"{ray.__version__}-py{sys.version_info[0]}{sys.version_info[1]}"


def _config() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text())


# --- the image check ---------------------------------------------------------------------------------------


def test_cluster_yaml_image_passes_the_check():
    assert check_image(_config()) == f"rayproject/ray:{HERE}-cpu"


@pytest.mark.parametrize("image, message", [
    ("rayproject/ray:2.9.0-py311-cpu", r"runs Ray 2\.9\.0 on Python 3\.11, but this machine has Ray"),
    (f"rayproject/ray:{ray.__version__}-py39-cpu", r"on Python 3\.9, but this machine"),
    ("ubuntu:22.04", r"must be a rayproject/ray image .* got 'ubuntu:22\.04'"),
    ("rayproject/ray:latest", r"must be a rayproject/ray image .* got 'rayproject/ray:latest'"),
], ids=["other-ray", "other-python", "not-ray", "untagged"])
def test_a_mismatched_image_is_refused_with_the_tag_to_use(image, message):
    cfg = _config()
    cfg["docker"]["image"] = image
    with pytest.raises(ConfigError, match=message) as err:
        check_image(cfg)
    assert f"rayproject/ray:{HERE}-cpu" in str(err.value)


def test_no_container_needs_no_image_check():
    cfg = _config()
    del cfg["docker"]
    assert check_image(cfg) is None


# --- pinned versions ---------------------------------------------------------------------------------------


def test_every_distribution_is_pinned_once_except_the_package_and_pip_itself():
    pins, unpinnable = pinned_distributions()
    names = [p.split("==")[0] for p in pins]
    assert all(re.fullmatch(r"[a-z0-9-]+==\S+", p) for p in pins)
    assert names == sorted(set(names)), "one pin per distribution, sorted"
    assert f"ray=={ray.__version__}" in pins, "the nodes run this machine's Ray"
    import numpy
    import sklearn

    assert f"numpy=={numpy.__version__}" in pins and f"scikit-learn=={sklearn.__version__}" in pins
    assert not {"raytune-fed", "pip", "setuptools", "wheel"} & set(names)
    assert "raytune-fed" not in unpinnable  # the package is the wheel, not a pin


def test_bundle_refuses_a_directory_that_is_not_the_source_tree(tmp_path):
    with pytest.raises(ConfigError, match=r"not the raytune-fed source tree .* run this from the repository root"):
        build_bundle(tmp_path, tmp_path / "out")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    with pytest.raises(ConfigError, match=r"describes 'other', not raytune-fed"):
        build_bundle(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bundle_refuses_a_mismatched_image_before_building(tmp_path):
    cfg = _config()
    cfg["docker"]["image"] = "rayproject/ray:2.9.0-py311-cpu"
    bad = tmp_path / "cluster.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="runs Ray 2.9.0"):
        build_bundle(ROOT, tmp_path / "out", bad)
    assert not (tmp_path / "out").exists()


@pytest.mark.process
def test_bundle_holds_one_wheel_of_this_source_and_the_pins(tmp_path):
    out = tmp_path / "dist"
    out.mkdir()
    (out / "raytune_fed-0.0.1-py3-none-any.whl").write_bytes(b"stale")  # an older bundle's wheel goes
    cli = Path(sys.executable).with_name("raytune-fed")
    done = subprocess.run([str(cli), "cluster", "bundle", "--source", str(ROOT), "--out", str(out),
                           "--config", str(ROOT / "cluster.yaml")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [wheel] = sorted(out.glob("raytune_fed-*.whl"))
    assert wheel.name == f"raytune_fed-{__version__}-py3-none-any.whl"
    assert f"wheel: {wheel}" in done.stdout and f"image checked: rayproject/ray:{HERE}-cpu" in done.stdout
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert {"raytune_fed/cluster.py", "raytune_fed/cli/cluster.py"} <= names
    assert any(n.startswith("raytune_fed/data/files/") for n in names), "the embedded datasets travel with it"
    assert not any(n.startswith(("tests/", "experiments/", "tools/")) for n in names)
    lines = (out / CONSTRAINTS).read_text().splitlines()
    assert [ln for ln in lines if not ln.startswith("#")] == pinned_distributions()[0]


@pytest.mark.process
def test_bundle_command_says_what_is_wrong_in_one_line(tmp_path):
    cli = Path(sys.executable).with_name("raytune-fed")
    done = subprocess.run([str(cli), "cluster", "bundle", "--source", str(tmp_path)], capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("raytune-fed: error: ") and "not the raytune-fed source tree" in done.stderr


# --- the node types the head announces ---------------------------------------------------------------------


def test_cluster_yaml_node_types_become_ray_node_groups():
    cfg = _config()
    record = cluster_config_record(cfg)
    groups = {g.name: g for g in record.node_group_configs}
    assert set(groups) == set(cfg["available_node_types"])
    head = groups[cfg["head_node_type"]]
    assert (head.min_count, head.max_count, dict(head.resources)) == (1, 1, {"CPU": 2})
    site = groups["ray.worker.site0"]
    assert (site.min_count, site.max_count, dict(site.resources)) == (0, 1, {"site:site0": 1})
    cpu = groups["ray.worker.cpu"]
    assert (cpu.min_count, cpu.max_count) == (0, 8)


def test_only_custom_resources_of_startable_node_types_are_offered():
    from raytune_fed.cluster import _custom

    cfg = _config()
    assert _custom(cluster_config_record(cfg)) == {"site:site0"}
    cfg["available_node_types"]["ray.worker.site0"]["max_workers"] = 0  # can never start
    assert _custom(cluster_config_record(cfg)) == set()


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c.pop("available_node_types"), "no available_node_types to announce"),
    (lambda c: c["available_node_types"]["ray.worker.site0"]["resources"].__setitem__("site:site0", -1),
     r"node type 'ray.worker.site0': resource 'site:site0' must be >= 0, got -1"),
], ids=["no-node-types", "negative-resource"])
def test_a_config_that_cannot_be_announced_is_refused(mutate, message):
    cfg = _config()
    mutate(cfg)
    with pytest.raises(ConfigError, match=message):
        cluster_config_record(cfg)


def test_nothing_is_offered_without_an_announcement():
    """Not connected, or a session whose head announced nothing (the shared local session): no record."""
    assert offered_resources() == frozenset()
