"""Benchmarks and tests stay apart, every benchmark records through the one harness, and the measurement page
is what the measured files say.

Static checks that read the source (nothing under ``experiments/`` is imported here):

- no ``tests/**/*.py`` imports a module of ``experiments/`` (by name, ``from experiments ...``, or by loading a
  file of that folder: ``spec_from_file_location``, ``run_path``, ``import_module``, ``sys.path``); a test of a
  benchmark runs it as a subprocess;
- no ``experiments/*.py`` imports a module of ``tests/`` (by name, ``from tests ...``, or by putting the folder on
  ``sys.path``), but the ones listed in :data:`ALLOWED_TEST_IMPORTS` until each is gone;
- every ``experiments/bench_*.py`` imports ``Benchmark`` from ``_harness`` and runs under ``with Benchmark(...)``;
- ``docs/measurements.md`` equals what ``tools/measurements.py`` writes now (``make measurements``).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
TESTS = ROOT / "tests"

# Benchmarks that still import the attacker's tools or the cluster fixtures of tests/ (the code they share with the
# tests has no home outside tests/ yet; it would go to the package's testing layer).  The test fails when a
# listed import is gone (so remove it here) as well as on any other benchmark -> tests import.
ALLOWED_TEST_IMPORTS: set[tuple[str, str]] = {
    ("bench_attacks", "<path>"), ("bench_attacks", "attack_kit"), ("bench_attacks", "site_targets"),
    ("bench_lifetime_decoder", "<path>"), ("bench_lifetime_decoder", "lifetime_attacks"),
    ("bench_lifetime_decoder", "site_targets"),
    ("bench_selection_decoder", "<path>"), ("bench_selection_decoder", "lifetime_attacks"),
    ("bench_selection_decoder", "site_targets"),
    ("bench_party_defences", "<path>"), ("bench_party_defences", "party_attacker"),
    ("bench_cluster", "<path>"), ("bench_cluster", "_fake_cluster"),
    ("bench_cluster_launch", "<path>"), ("bench_cluster_launch", "_ssh_node"),
}
_LOADERS = {"spec_from_file_location", "run_path", "import_module", "insert", "append", "extend"}


def _modules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py")} | {folder.name}


def _top(name: str | None) -> str:
    return (name or "").split(".")[0]


def _names_mentioning(tree: ast.Module, source: str, folder: str) -> set[str]:
    """Module-level names whose value spells the folder (``EXPERIMENTS = ROOT / "experiments"``)."""
    found = set()
    for node in tree.body:
        value = ast.get_source_segment(source, node.value) or "" if isinstance(node, ast.Assign) else ""
        if f'"{folder}"' in value or f"'{folder}'" in value:
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def imports_of(path: Path, folder: Path) -> set[str]:
    """What ``path`` imports of ``folder``: module names, or ``<path>`` for a file or ``sys.path`` entry of it."""
    source = path.read_text()
    tree = ast.parse(source)
    theirs = _modules(folder)
    spelled = {f'"{folder.name}"', f"'{folder.name}'"} | _names_mentioning(tree, source, folder.name)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {_top(a.name) for a in node.names if _top(a.name) in theirs}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _top(node.module) in theirs:
            found.add(_top(node.module))
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name in _LOADERS:
                text = " ".join(ast.get_source_segment(source, a) or "" for a in node.args)
                if any(s in text for s in spelled):
                    found.add("<path>")
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and "sys.path" in (
                ast.get_source_segment(source, t) or "") for t in node.targets):
            if any(s in (ast.get_source_segment(source, node.value) or "") for s in spelled):
                found.add("<path>")
    return found


def test_no_test_imports_a_benchmark():
    found = {f"{p.relative_to(ROOT)}: {m}" for p in sorted(TESTS.rglob("*.py")) for m in imports_of(p, EXPERIMENTS)}
    assert not found, f"tests import experiments/ (run the benchmark as a subprocess instead): {sorted(found)}"


def test_no_benchmark_imports_from_tests_but_the_listed_ones():
    found = {(p.stem, m) for p in sorted(EXPERIMENTS.glob("*.py")) for m in imports_of(p, TESTS)}
    assert not found - ALLOWED_TEST_IMPORTS, f"benchmarks import tests/: {sorted(found - ALLOWED_TEST_IMPORTS)}"
    assert not ALLOWED_TEST_IMPORTS - found, f"gone, remove from ALLOWED_TEST_IMPORTS: {ALLOWED_TEST_IMPORTS - found}"


def _uses_the_harness(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    imported = any(isinstance(n, ast.ImportFrom) and n.module == "_harness" and any(a.name == "Benchmark"
                                                                                   for a in n.names)
                   for n in ast.walk(tree))
    runs_under = any(isinstance(n, ast.With) and any(isinstance(i.context_expr, ast.Call)
                                                     and isinstance(i.context_expr.func, ast.Name)
                                                     and i.context_expr.func.id == "Benchmark" for i in n.items)
                     for n in ast.walk(tree))
    return imported and runs_under


def test_every_benchmark_records_through_the_harness():
    benchmarks = sorted(EXPERIMENTS.glob("bench_*.py"))
    assert len(benchmarks) >= 20
    assert [p.name for p in benchmarks if not _uses_the_harness(p)] == []


@pytest.mark.parametrize("source, folder, expected", [
    ("import bench_grid\n", EXPERIMENTS, {"bench_grid"}),
    ("from experiments import _harness\n", EXPERIMENTS, {"experiments"}),
    ("import importlib.util\nfrom pathlib import Path\nS = Path(__file__).parents[1] / 'experiments'\n"
     "spec = importlib.util.spec_from_file_location('x', S / 'bench_grid.py')\n", EXPERIMENTS, {"<path>"}),
    ("import sys\nsys.path.insert(0, 'experiments')\n", EXPERIMENTS, {"<path>"}),
    ("import subprocess, sys\nS = 'experiments/bench_grid.py'\nsubprocess.run([sys.executable, S])\n",
     EXPERIMENTS, set()),
    ("import sys\nfrom pathlib import Path\nROOT = Path('.')\nsys.path[:0] = [str(ROOT / 'tests')]\n", TESTS,
     {"<path>"}),
    ("def f():\n    import site_targets\n", TESTS, {"site_targets"}),
    ("import numpy\n", TESTS, set()),
], ids=["by-name", "package", "spec-from-file", "sys-path", "subprocess-allowed", "sys-path-slice", "in-function",
        "unrelated"])
def test_the_import_check_sees_each_way_in(tmp_path, source, folder, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert imports_of(path, folder) == expected


def test_the_harness_check_needs_the_import_and_the_with(tmp_path):
    probe = tmp_path / "bench_probe.py"
    probe.write_text("from _harness import Benchmark\n\ndef main():\n    with Benchmark('x', 'o.json') as b:\n"
                     "        b.figures['n'] = 1\n")
    assert _uses_the_harness(probe)
    probe.write_text("from _harness import Benchmark\n\ndef main():\n    b = Benchmark('x', 'o.json')\n")
    assert not _uses_the_harness(probe)


def test_the_measurements_page_is_current():
    spec = importlib.util.spec_from_file_location("measurements_tool", ROOT / "tools" / "measurements.py")
    tool = importlib.util.module_from_spec(spec)
    sys.modules["measurements_tool"] = tool
    spec.loader.exec_module(tool)
    page = (ROOT / "docs" / "measurements.md").read_text()
    assert page == tool.page(), "docs/measurements.md is stale: run make measurements"
    for path in sorted((EXPERIMENTS / "measured").glob("*.json")):
        assert f"`{path.name}`" in page  # one row per output file
