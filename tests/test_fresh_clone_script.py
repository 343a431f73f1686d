"""``experiments/fresh_clone.py``: pytest's closing line is read right; bad options end with one line, exit 2."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "fresh_clone.py"


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
