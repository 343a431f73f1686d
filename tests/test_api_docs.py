"""The API reference (``make docs``): it builds nitpicky with warnings as errors, every public name has an
entry, and a reference to a ``raytune_fed`` name that does not exist fails the build, naming it."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
# the Makefile's flags: fresh environment, warnings as errors, every warning shown, nitpicky
FLAGS = ["-E", "-W", "--keep-going", "-n", "-q", "-b", "html"]


def _sphinx(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", *FLAGS, "-c", str(API), "-d", str(out / ".doctrees"),
                           str(source), str(out)], capture_output=True, text=True, timeout=900, cwd=ROOT)


def _inventory(out: Path) -> set[str]:
    from sphinx.util.inventory import InventoryFile

    inventory = InventoryFile.loads((out / "objects.inv").read_bytes(), uri="")
    return {name for kind in inventory.data.values() for name in kind}


def _conf():
    spec = importlib.util.spec_from_file_location("api_docs_conf", API / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def full_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    return _sphinx(API, out), out


@pytest.mark.process
def test_reference_builds_clean_and_lists_every_public_name(full_build):
    done, out = full_build
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr[-5000:]
    grid = (out / "raytune_fed.grid.html").read_text()
    assert 'id="raytune_fed.grid.run_cells"' in grid
    documented = _inventory(out)
    pages = sorted(API.glob("raytune_fed*.rst"))
    assert len(pages) >= 15
    missing = []
    for page in pages:
        match = re.search(r"^\.\. (?:public-names|automodule):: (\S+)", page.read_text(), re.M)
        assert match, f"{page.name} documents no module"
        module = importlib.import_module(match[1])
        assert f"{match[1]}" in documented, f"{match[1]} has no module entry"
        missing += [f"{match[1]}.{name}" for name in getattr(module, "__all__", ())
                    if f"{match[1]}.{name}" not in documented]
    assert not missing, f"public names without an entry in the API reference: {missing}"


@pytest.mark.process
def test_a_reference_to_a_missing_name_fails_the_build(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    good = ("Space\n=====\n\n.. public-names:: raytune_fed.space\n\n"
            # a private module's path to a public object links to the public entry
            "See :class:`raytune_fed.space._space.SearchSpace`.\n")
    (source / "index.rst").write_text(good)
    done = _sphinx(source, tmp_path / "good")
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "good" / "index.html").read_text()
    assert 'href="#raytune_fed.space.SearchSpace"' in page

    (source / "index.rst").write_text(good + "\nAnd :class:`raytune_fed.space.NoSuchSpace`, "
                                             ":func:`~raytune_fed.space._space.no_such_helper`.\n")
    done = _sphinx(source, tmp_path / "bad")
    assert done.returncode != 0
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert len(warnings) == 2, done.stderr[-3000:]
    assert "raytune_fed.space.NoSuchSpace" in warnings[0] + warnings[1]
    assert "raytune_fed.space._space.no_such_helper" in warnings[0] + warnings[1]


def test_numpydoc_sections_become_definition_lists():
    conf = _conf()
    lines = ["Intro.", "", "Parameters", "----------",
             "space : the search space (configurations are dicts",
             "    keyed by its names).",
             "metric, mode : a metric name and ``\"min\"``.",
             "alpha : float in [0, 1]",
             "    L1 share of the penalty.",
             "", "A closing paragraph."]
    assert conf._numpy_sections(lines) == [
        "Intro.", "", ".. rubric:: Parameters", "",
        "``space``", "    the search space (configurations are dicts keyed by its names).",
        "``metric``, ``mode``", "    a metric name and ``\"min\"``.",
        "``alpha``", "    *float in [0, 1]*: L1 share of the penalty.",
        "", "", "A closing paragraph."]
