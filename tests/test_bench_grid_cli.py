"""``experiments/bench_grid.py``: bad options end with one line and exit code 2 before Ray starts."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "bench_grid.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_grid", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(bench, monkeypatch, *argv):
    monkeypatch.setattr(sys, "argv", ["bench_grid.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        bench.main()
    return stopped.value.code


def test_an_unknown_run_is_named(bench, monkeypatch, capsys):
    assert run(bench, monkeypatch, "--runs", "local,bogus") == 2
    assert "--runs: unknown run(s) ['bogus']" in capsys.readouterr().err


def test_project_from_a_file_that_is_not_a_benchmark_is_refused(bench, monkeypatch, capsys, tmp_path):
    for name, text in (("notes.md", "# not json"), ("other.json", json.dumps({"runs": {}}))):
        (tmp_path / name).write_text(text)
        assert run(bench, monkeypatch, "--project-from", str(tmp_path / name)) == 2
        err = capsys.readouterr().err
        assert f"--project-from {tmp_path / name}: not a bench_grid JSON with a local run" in err
        assert "Traceback" not in err


def test_project_from_recomputes_the_projection_of_measured_units(bench, monkeypatch, tmp_path, capsys):
    units = [{"learner": "svm", "seconds": 10.0, "cpu_seconds": 8.0, "cores": 1, "local_cv_seconds": 5.0,
              "total_seconds": 10.0}] * 2
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"settings": {"n_init": 20, "n_iter": 40},
                                "runs": {"local_long_tail": {"units": units}}}))
    monkeypatch.setattr(sys, "argv", ["bench_grid.py", "--project-from", str(path)])
    bench.main()
    projection = json.loads(path.read_text())["projection"]
    assert projection["from_run"] == "local_long_tail" and projection["n_units"] == 200
    assert projection["cpu_hours"] == pytest.approx(200 * 10 / 3600)
    assert projection["from_cpu_seconds"]["cpu_hours"] == pytest.approx(200 * 8 / 3600)
    assert projection["cores"]["2"]["one_core_per_unit_hours"] == pytest.approx(1000 / 3600)
