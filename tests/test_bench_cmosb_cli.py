"""``experiments/bench_cmosb_seeds.py``, ``bench_nsga2.py`` and ``bench_party_wire.py`` run as a user runs them (a
subprocess: no test imports a benchmark): bad options end with one line and exit code 2 before Ray starts, and
``bench_nsga2`` resumes a finished run from another path to the same files.  Their scoring is tested where it
lives (``tests/test_cmosb_scoring.py``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # each test starts the benchmark's interpreter

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def run(name, *argv, cwd=None):
    done = subprocess.run([sys.executable, str(EXPERIMENTS / f"{name}.py"), *map(str, argv)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)
    err = done.stderr.strip().splitlines()
    return done.returncode, err[-1] if err else "", done


def test_bench_party_wire_names_unknown_paths_and_backends(tmp_path):
    code, line, _ = run("bench_party_wire", "--paths", "local,ssh", "--backends", "ckks", "--out", tmp_path / "o.json")
    assert code == 2 and "unknown backends or paths ['ckks', 'ssh']" in line
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["--variants", "table4,speed"], "--variants takes some of table4,leakage_penalty,leakage_domination"),
    (["--seeds", "0,x"], "--seeds takes comma-separated integers, got '0,x'"),
    (["--seeds", "1,1"], "--seeds lists a seed twice: '1,1'"),
    (["--max-leakage", "1.5"], "--max-leakage in (0, 1]"),
])
def test_bench_cmosb_seeds_names_bad_options(tmp_path, argv, message):
    code, line, _ = run("bench_cmosb_seeds", *argv, "--work", tmp_path / "w", "--out-dir", tmp_path / "out")
    assert code == 2 and message in line
    assert not (tmp_path / "w").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["--problems", "zdt1,zdt9"], "--problems takes some of zdt1,zdt2,zdt3,dtlz2,cmosb, got 'zdt1,zdt9'"),
    (["--modes", "direct,ssh"], "--modes takes direct and/or tune, got 'direct,ssh'"),
    (["--seeds", "1"], "need --seeds >= 2"),
])
def test_bench_nsga2_names_bad_options(tmp_path, argv, message):
    code, line, _ = run("bench_nsga2", *argv, "--out", tmp_path / "o.json")
    assert code == 2 and message in line
    assert not (tmp_path / "o.json").exists()


def _ran(done):
    """The runs a bench_nsga2 invocation made (it prints one line per run as it finishes)."""
    return [line for line in done.stdout.splitlines() if " HV=" in line]


def test_bench_nsga2_records_through_the_harness_and_resumes_from_another_path(tmp_path):
    """The record has the harness's schema; a rerun from another path to the same files runs nothing again and
    records no path of the machine; another problem size runs anew."""
    common = ["--modes", "direct", "--problems", "zdt1", "--seeds", "2", "--population", "4", "--generations", "2"]
    code, line, done = run("bench_nsga2", *common, "--n-var", "3", "--out", tmp_path / "o.json", "--work",
                           tmp_path / "w")
    assert code == 0, done.stderr[-2000:]
    first = json.loads((tmp_path / "o.json").read_text())
    assert first["schema"] == "raytune_fed.benchmark/1" and first["benchmark"] == "bench_nsga2"
    assert first["completed"] is True and first["command"].startswith("python experiments/bench_nsga2.py --modes")
    assert len(_ran(done)) == len(first["figures"]["runs"]) == 2 * 4  # two seeds x the four methods
    code, line, done = run("bench_nsga2", *common, "--n-var", "3", "--out", "o.json", "--work", "w", cwd=tmp_path)
    assert code == 0, done.stderr[-2000:]
    assert _ran(done) == []
    again = json.loads((tmp_path / "o.json").read_text())
    assert again["figures"]["runs"] == first["figures"]["runs"]
    assert str(tmp_path) not in (tmp_path / "o.json").read_text()
    code, line, done = run("bench_nsga2", *common, "--n-var", "4", "--out", "o.json", "--work", "w", cwd=tmp_path)
    assert code == 0, done.stderr[-2000:]
    assert len(_ran(done)) == 2 * 4
    assert json.loads((tmp_path / "o.json").read_text())["figures"]["settings"]["n_var"] == 4
