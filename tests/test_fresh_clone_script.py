"""``tools/fresh_clone.py`` and ``suite_cpu.py``: output parsed right; bad options end with one line, exit 2."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "fresh_clone.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("fresh_clone", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fresh_clone"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("line, counts, seconds", [
    ("1362 passed, 3 warnings in 512.30s (0:08:32)", {"passed": 1362, "warnings": 3}, 512.3),
    ("2 failed, 1360 passed, 1 deselected in 12.00s", {"failed": 2, "passed": 1360, "deselected": 1}, 12.0),
    ("===== 5 passed, 1 error in 1.25s =====", {"passed": 5, "error": 1}, 1.25),
])
def test_pytest_closing_line_is_read(script, line, counts, seconds):
    found = script.pytest_counts(f"collected\n....F\n{line}\nmake: leaving\n")
    assert found["counts"] == counts and found["pytest_seconds"] == seconds


def test_output_without_a_closing_line_has_no_counts(script):
    assert script.pytest_counts("raytune-fed demo --out results/demo\nmean hypervolume 0.45\n") is None


@pytest.mark.parametrize("argv, message", [
    (["--steps", " , "], "--steps names no make target"),
    (["--busy", "-1"], "--busy must be >= 0, got -1"),
    (["--revision", "no-such-revision-xyz"], "--revision is not a commit of this repository: 'no-such-revision-xyz'"),
])
def test_bad_options_are_one_line_and_exit_2(script, capsys, tmp_path, argv, message):
    with pytest.raises(SystemExit) as stopped:
        script.main([*argv, "--out", str(tmp_path / "o.json")])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "o.json").exists()


def test_suite_cpu_sums_tests_per_file_slowest_first():
    spec = importlib.util.spec_from_file_location("suite_cpu", SCRIPT.parent / "suite_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = [["tests/a.py::t1", 1.0, 2.0], ["tests/b.py::t1", 5.0, 6.0], ["tests/a.py::t2[x]", 0.5, 1.0]]
    summary = module.summarise(rows, total_cpu=9.0)
    assert [(f["file"], f["cpu_seconds"], f["tests"]) for f in summary["files"]] == [
        ("tests/b.py", 5.0, 1), ("tests/a.py", 1.5, 2)]
    assert summary["tests"][0]["test"] == "tests/b.py::t1" and summary["tests_cpu_seconds"] == 6.5
    assert summary["total_cpu_seconds"] == 9.0 and summary["n_tests"] == 3


def test_recorded_output_names_no_path_of_this_machine(script, tmp_path):
    import tempfile
    clone = tmp_path / "clone"
    lines = [f"{clone}/raytune_fed/x.py:1: warning", f"  {tempfile.gettempdir()}/pip-build-env-ab12/overlay/lib/y.py:3"]
    assert script.relative_lines(lines, clone) == ["./raytune_fed/x.py:1: warning", "  <tmp>/overlay/lib/y.py:3"]
