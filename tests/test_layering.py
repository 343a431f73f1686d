"""The package's layers import in one direction: importing a layer never loads a layer above it.

Each check runs in a fresh interpreter, so what another test imported does not hide a
violation.  ``ray`` counts as a layer of its own: the pure layers must not load it.
"""

import importlib.util
import json
import subprocess
import sys

import pytest

# bottom-up; a module may import only modules of its own or a lower rank
LAYERS = [
    ["raytune_fed.errors", "raytune_fed._checks", "raytune_fed._limits", "raytune_fed.types", "raytune_fed.random",
     "raytune_fed.cores"],
    ["raytune_fed.space", "raytune_fed.data", "raytune_fed.metrics"],
    ["raytune_fed.simulation"],
    ["raytune_fed.algorithms", "raytune_fed.models", "raytune_fed.crypto"],
    ["raytune_fed.attacks"],
    ["raytune_fed.store", "raytune_fed.runtime", "raytune_fed.report", "raytune_fed.cluster"],
    ["raytune_fed.federation"],
    ["ray"],
    ["raytune_fed.search", "raytune_fed.schedulers", "raytune_fed.grid", "raytune_fed.testing"],
    ["raytune_fed.workflows"],
    ["raytune_fed.cli"],
]
pytestmark = pytest.mark.process  # every check runs in a fresh interpreter

RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}


def _loaded_after_import(module: str) -> list[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _rank(name: str) -> int | None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in RANK:
            return RANK[".".join(parts[:i])]
    return None


def _existing(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def test_every_top_level_module_has_a_layer():
    import pkgutil

    import raytune_fed

    names = {f"raytune_fed.{m.name}" for m in pkgutil.iter_modules(raytune_fed.__path__)}
    assert sorted(names - set(RANK)) == [], "place new top-level modules in LAYERS"


@pytest.mark.parametrize("module", [m for layer in LAYERS for m in layer if m != "ray" and _existing(m)])
def test_importing_a_layer_loads_nothing_above_it(module):
    mine = RANK[module]
    above = sorted(m for m in _loaded_after_import(module) if (_rank(m) or 0) > mine)
    assert above == [], f"importing {module} loaded higher layers: {above[:10]}"
