"""``experiments/bench_cmosb_constrained.py`` and ``bench_party_wire.py``: bad options end with one line and
exit code 2 before Ray starts."""

import importlib.util
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(module, monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["bench.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    err = capsys.readouterr().err.strip().splitlines()
    return stopped.value.code, err[-1] if err else ""


def test_unknown_constraints_are_named(monkeypatch, capsys, tmp_path):
    code, line = run(_load("bench_cmosb_constrained"), monkeypatch, capsys, "--constraints", "privacy_leakage,speed",
                     "--work", str(tmp_path))
    assert code == 2 and "--constraints takes privacy_leakage and/or training_cost, got 'privacy_leakage,speed'" in line


def _finished(tmp_path, **settings):
    work = tmp_path / "table4" / "synthetic1"
    (work / "runs").mkdir(parents=True)
    base = {"dataset": "synthetic1", "population": 20, "generations": 40, "seed": 0, "he": "plain",
            "n_sample": 1000, "max_cost": None, "max_leakage": None}
    (work / "settings.json").write_text(json.dumps({"settings": {**base, **settings}, "op_times": {}}))
    pd.DataFrame({"utility_loss": [0.1]}).to_parquet(work / "runs" / "cmosb.parquet")
    return work


@pytest.mark.parametrize("settings, message", [
    ({"population": 12, "seed": 3}, "that run differs in population, seed"),
    ({"max_leakage": 0.6}, "that run differs in constraints"),
])
def test_mosb_from_a_different_search_is_refused(monkeypatch, capsys, tmp_path, settings, message):
    work = _finished(tmp_path, **settings)
    code, line = run(_load("bench_cmosb_constrained"), monkeypatch, capsys, "--mosb-from", str(work),
                     "--work", str(tmp_path / "w"))
    assert code == 2 and f"--mosb-from {work}: {message}" in line
    assert not (tmp_path / "w").exists()


def test_mosb_from_a_folder_without_a_finished_run_is_refused(monkeypatch, capsys, tmp_path):
    code, line = run(_load("bench_cmosb_constrained"), monkeypatch, capsys, "--mosb-from", str(tmp_path / "none"),
                     "--work", str(tmp_path / "w"))
    assert code == 2 and "no finished CMOSB run there" in line


def test_bench_party_wire_names_unknown_paths_and_backends(monkeypatch, capsys):
    code, line = run(_load("bench_party_wire"), monkeypatch, capsys, "--paths", "local,ssh", "--backends", "ckks")
    assert code == 2 and "unknown backends or paths ['ckks', 'ssh']" in line
