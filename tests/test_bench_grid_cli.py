"""``experiments/bench_grid.py`` run as a user runs it (a subprocess: no test imports a benchmark): bad options end
with one line and exit code 2 before Ray starts; ``--project-from`` recomputes a stored run's projection."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # each test starts the benchmark's interpreter

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "bench_grid.py"


def run(*argv):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, argv)], capture_output=True, text=True,
                          timeout=300)


def test_an_unknown_run_is_named(tmp_path):
    done = run("--runs", "local,bogus", "--out", tmp_path / "o.json")
    assert done.returncode == 2 and "--runs: unknown run(s) ['bogus']" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "o.json").exists()


def test_project_from_a_file_that_is_not_a_benchmark_is_refused(tmp_path):
    for name, text in (("notes.md", "# not json"), ("other.json", json.dumps({"runs": {}}))):
        (tmp_path / name).write_text(text)
        done = run("--project-from", tmp_path / name)
        assert done.returncode == 2
        assert f"--project-from {tmp_path / name}: not a bench_grid JSON with a local run" in done.stderr
        assert "Traceback" not in done.stderr


UNITS = [{"learner": "svm", "seconds": 10.0, "cpu_seconds": 8.0, "cores": 1, "local_cv_seconds": 5.0,
          "total_seconds": 10.0}] * 2
BODY = {"settings": {"n_init": 20, "n_iter": 40}, "runs": {"local_long_tail": {"units": UNITS}}}


@pytest.mark.parametrize("record", [
    BODY,  # written before the harness: the numbers at the top level
    {"schema": "raytune_fed.benchmark/1", "benchmark": "bench_grid", "revision": "abc1234", "figures": BODY},
], ids=["legacy", "harness"])
def test_project_from_recomputes_the_projection_of_measured_units(tmp_path, record):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(record))
    done = run("--project-from", path)
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(path.read_text())
    projection = (written["figures"] if "schema" in record else written)["projection"]
    assert written.get("revision") == record.get("revision")  # the record around the numbers is kept
    assert projection["from_run"] == "local_long_tail" and projection["n_units"] == 200
    assert projection["cpu_hours"] == pytest.approx(200 * 10 / 3600)
    assert projection["from_cpu_seconds"]["cpu_hours"] == pytest.approx(200 * 8 / 3600)
    assert projection["cores"]["2"]["one_core_per_unit_hours"] == pytest.approx(1000 / 3600)
