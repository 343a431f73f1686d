"""The package's layers import in one direction: importing a layer never loads a layer above it.

Two kinds of check.  The static ones read every import statement of every module of the
source tree (module level, class bodies and function bodies alike): no module imports a
layer above its own, no import circle joins the package's modules, and Ray's private API
is used in one module.  The dynamic one imports each layer in a fresh interpreter, so
what another test imported does not hide a violation.  ``ray`` counts as a layer of its
own: the layers below it import it only inside functions, and importing them loads no Ray.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

# bottom-up; a module may import only modules of its own or a lower rank
LAYERS = [
    ["raytune_fed.errors", "raytune_fed._checks", "raytune_fed._limits", "raytune_fed.types", "raytune_fed.random",
     "raytune_fed.cores"],
    ["raytune_fed.space", "raytune_fed.data", "raytune_fed.metrics"],
    ["raytune_fed.simulation"],
    ["raytune_fed.algorithms", "raytune_fed.models", "raytune_fed.crypto"],
    ["raytune_fed.attacks"],
    ["raytune_fed.store", "raytune_fed.runtime", "raytune_fed.report", "raytune_fed.cluster", "raytune_fed._address",
     "raytune_fed._ray_internals"],
    ["raytune_fed.federation"],
    ["raytune_fed.serve"],
    ["ray"],
    ["raytune_fed.search", "raytune_fed.schedulers", "raytune_fed.grid", "raytune_fed.testing"],
    ["raytune_fed.workflows"],
    ["raytune_fed.cli"],
]
RANK = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}

SOURCE = Path(__file__).resolve().parents[1] / "raytune_fed"

# Known import circles, each listed until it is broken.  The test fails when a listed circle
# is gone (so remove it here) as well as when any other circle appears.
ALLOWED_CYCLES: list[set[str]] = []
RAY_PRIVATE_HOME = "raytune_fed._ray_internals"
# Uses of Ray's private API outside RAY_PRIVATE_HOME, each listed until it moves there.  The
# test fails when a listed use is gone (so remove it here) as well as on any other use.
ALLOWED_RAY_PRIVATE: set[tuple[str, str]] = set()


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


@pytest.mark.process  # each check runs in a fresh interpreter
@pytest.mark.parametrize("module", [m for layer in LAYERS for m in layer if m != "ray" and _existing(m)])
def test_importing_a_layer_loads_nothing_above_it(module):
    mine = RANK[module]
    above = sorted(m for m in _loaded_after_import(module) if (_rank(m) or 0) > mine)
    assert above == [], f"importing {module} loaded higher layers: {above[:10]}"


# ---------------------------------------------------------------------------------------
# Static checks: every import statement of the source tree, function bodies included


class _Import(NamedTuple):
    target: str  # dotted name as written, resolved if relative ("from a import b" gives "a.b")
    line: int
    lazy: bool  # inside a function body (runs when called, not when the module is imported)


def _modules(root: Path = SOURCE) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``), for every module under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _imports(module: str, path: Path, package: bool) -> list[_Import]:
    """Every import of ``module``, wherever it is written."""
    here = module if package else module.rpartition(".")[0]
    found: list[_Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend(_Import(a.name, node.lineno, lazy) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[:len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found.append(_Import(base, node.lineno, lazy))
            found.extend(_Import(f"{base}.{a.name}", node.lineno, lazy) for a in node.names if a.name != "*")
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or _type_checking(node)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:``: its imports never run (annotations only), so they load nothing."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _owner(target: str, modules: dict) -> str | None:
    """The module of the tree that ``target`` names (its longest prefix that is one)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _is_ray(target: str) -> bool:
    return target == "ray" or target.startswith("ray.")


def layer_violations(root: Path = SOURCE) -> list[str]:
    """Imports of a layer above the importer's, and module-level Ray imports below Ray's layer."""
    modules = _modules(root)
    out = []
    for module, (path, package) in modules.items():
        mine = _rank(module)
        if mine is None:
            continue  # the root package, which imports nothing but is below everything
        for imp in _imports(module, path, package):
            where = f"{module}:{imp.line}"
            owner = _owner(imp.target, modules)
            if owner is not None and (_rank(owner) or 0) > mine:
                out.append(f"{where} imports {owner}, a higher layer{' (inside a function)' if imp.lazy else ''}")
            elif _is_ray(imp.target) and mine < RANK["ray"] and not imp.lazy:
                out.append(f"{where} imports {imp.target} at module level (below Ray's layer: import it lazily)")
    return sorted(set(out))


def import_cycles(root: Path = SOURCE) -> list[set[str]]:
    """The import circles among the tree's modules (strongly connected components of two or
    more), imports inside functions included.  A module depends on what it imports; a
    package's ``__init__`` importing its own submodules is not a circle with them (Python
    runs a package's ``__init__`` before any submodule, whatever the submodule imports)."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, (path, package) in modules.items():
        for imp in _imports(module, path, package):
            owner = _owner(imp.target, modules)
            if owner and owner != module and not (modules[owner][1] and module.startswith(owner + ".")):
                edges[module].add(owner)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                components.append(component)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return sorted(components, key=sorted)


def ray_private_uses(root: Path = SOURCE) -> set[tuple[str, str]]:
    """(module, private Ray module) for every import of, or attribute path into, ``ray._private``
    or ``ray._raylet`` (``ray._private.worker.global_worker`` counts as ``ray._private.worker``)."""

    def private(dotted: str) -> str | None:
        parts = dotted.split(".")
        if parts[:2] == ["ray", "_private"]:
            return ".".join(parts[:3])
        if parts[:2] == ["ray", "_raylet"]:
            return "ray._raylet"
        return None

    def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
        names = []
        while isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in aliases:
            return ".".join([aliases[node.id], *reversed(names)])
        return None

    out = set()
    for module, (path, package) in _modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        aliases = {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                   for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names if _is_ray(a.name)}
        inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        names = [imp.target for imp in _imports(module, path, package)]
        names += [dotted(node, aliases) or "" for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and id(node) not in inner]
        out |= {(module, p) for p in map(private, names) if p}
    return out


def test_no_module_imports_a_layer_above_its_own_nor_ray_at_module_level():
    assert layer_violations() == []


def test_no_import_cycle_but_the_listed_ones():
    cycles = import_cycles()
    new, gone = [c for c in cycles if c not in ALLOWED_CYCLES], [c for c in ALLOWED_CYCLES if c not in cycles]
    assert new == [], f"break these import circles: {[sorted(c) for c in new]}"
    assert gone == [], f"no longer circles, remove them from ALLOWED_CYCLES: {[sorted(c) for c in gone]}"


def test_ray_private_api_is_used_only_in_ray_internals():
    outside = {use for use in ray_private_uses() if use[0] != RAY_PRIVATE_HOME}
    assert sorted(outside - ALLOWED_RAY_PRIVATE) == [], f"use Ray's private API only in {RAY_PRIVATE_HOME}"
    assert sorted(ALLOWED_RAY_PRIVATE - outside) == [], "no longer used: remove them from ALLOWED_RAY_PRIVATE"
    assert any(module == RAY_PRIVATE_HOME for module, _ in ray_private_uses())  # the reader finds its uses


def test_the_boundary_never_imports_its_network_stack(tmp_path):
    """``federation`` (the trust boundary) sits below ``serve`` (its network stack): an import of
    ``serve`` from the boundary, even inside a function, is a violation."""
    assert RANK["raytune_fed.federation"] < RANK["raytune_fed.serve"] < RANK["raytune_fed.cli"]
    files = {
        "__init__.py": "",
        "federation/__init__.py": "",
        "federation/_clients.py": "def f():\n    from raytune_fed.serve import HttpTransport\n",
        "serve/__init__.py": "from raytune_fed.federation import _clients\n",
    }
    for name, text in files.items():
        (tmp_path / "raytune_fed" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "raytune_fed" / name).write_text(text)
    assert layer_violations(tmp_path / "raytune_fed") == [
        "raytune_fed.federation._clients:2 imports raytune_fed.serve, a higher layer (inside a function)"]


def test_the_static_checks_read_function_bodies(tmp_path):
    """Each static check reports what a small tree hides inside functions (so each can fail)."""
    files = {
        "__init__.py": "",
        "errors.py": "import ray\n",  # module-level Ray below Ray's layer
        "space/__init__.py": "def f():\n    import ray\n    from raytune_fed.workflows import x\n",
        "workflows/__init__.py": "",
        "workflows/x.py": "from raytune_fed.workflows import y\n",
        "workflows/y.py": "class C:\n    def f(self):\n        from . import x\n",
        "cli/__init__.py": "import ray as r\ndef f():\n    from ray._raylet import GcsClient\n"
                           "    return r._private.worker.global_worker.node\n",
    }
    for name, text in files.items():
        (tmp_path / "raytune_fed" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "raytune_fed" / name).write_text(text)
    root = tmp_path / "raytune_fed"
    assert layer_violations(root) == [
        "raytune_fed.errors:1 imports ray at module level (below Ray's layer: import it lazily)",
        "raytune_fed.space:3 imports raytune_fed.workflows, a higher layer (inside a function)",
        "raytune_fed.space:3 imports raytune_fed.workflows.x, a higher layer (inside a function)",
    ]
    assert import_cycles(root) == [{"raytune_fed.workflows.x", "raytune_fed.workflows.y"}]
    assert ray_private_uses(root) == {("raytune_fed.cli", "ray._raylet"), ("raytune_fed.cli", "ray._private.worker")}
