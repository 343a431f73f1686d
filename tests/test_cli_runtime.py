"""The command line (help, one-line errors with exit codes, checks before Ray starts) and Ray placement."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.error import URLError

import pandas as pd
import pytest

from raytune_fed.cli import main
from raytune_fed.errors import ConfigError
from raytune_fed.runtime import check_address


def test_datasets_lists_the_embedded_sets(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["geo5_sim"]["sites"] == 5 and rows["geo5_sim"]["features"] == 1000
    assert rows["spambase"]["rows"] == 4597 and rows["synthetic2"]["classes"] == 10
    assert main(["datasets"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:5] == ["name", "rows", "features", "classes", "sites"]
    assert any(line.startswith("gina_agnostic_subset") for line in table)


@pytest.mark.process
def test_the_module_runs_as_a_program():
    out = subprocess.run([sys.executable, "-m", "raytune_fed.cli", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "usage: raytune-fed" in out.stdout
    assert all(command in out.stdout for command in ("datasets", "demo", "rfms", "report"))


@pytest.mark.parametrize("command", ["datasets", "demo", "rfms", "report"])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    shown = capsys.readouterr().out
    assert done.value.code == 0 and "usage: raytune-fed" in shown and "--help" in shown
    if command in ("demo", "rfms"):  # how resuming, interrupting and recomputing work
        assert "--recompute-damaged" in shown and "OUT/quarantine/" in shown and "exit 130 / 143" in shown


def test_openml_offline_is_one_line_and_exit_2(monkeypatch, tmp_path, capsys):
    from raytune_fed.data import _openml

    def offline(**kwargs):
        raise URLError("Name or service not known")

    monkeypatch.setattr(_openml, "fetch_openml", offline)
    code = main(["rfms", "--dataset", "openml:gina_agnostic", "--split", "drc", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "'openml:gina_agnostic' could not be fetched from OpenML" in err and "--dataset path/to/file.csv" in err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["rfms", "--reps", "many"])
    assert exc.value.code == 2 and "invalid int value: 'many'" in capsys.readouterr().err


# Bad input of every subcommand: tests/test_bad_input.py (one table per subcommand).


def test_report_of_a_missing_or_damaged_results_file_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no results.parquet in" in capsys.readouterr().err
    (tmp_path / "results.parquet").write_bytes(b"PAR1 this is not parquet")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"cannot read {tmp_path / 'results.parquet'} (damaged or not a results file)" in err
    frame = pd.DataFrame({"dataset": ["d"], "split": ["natural"], "learner": ["svm"], "method": ["lso"],
                          "experiment": ["e"], "hypervolume": [0.5], "settings": ["{not json"]})
    frame.to_parquet(tmp_path / "results.parquet")
    assert main(["report", str(tmp_path)]) == 2
    assert "its 'settings' column does not hold RFMS settings" in capsys.readouterr().err


@pytest.mark.parametrize("address", [None, "auto", "local", "10.0.0.1:6379", "head-node:6379", "ray://head:10001",
                                     "ray://head"])
def test_addresses_ray_accepts(address):
    assert check_address(address) == address


@pytest.mark.parametrize("address", ["not an address", "http://head:8265", "head:port", "", ":6379", 6379])
def test_addresses_refused_before_ray_is_touched(address):
    with pytest.raises(ConfigError, match="Ray address must be"):
        check_address(address)


def test_site_actors_go_to_nodes_that_declare_their_site(ray_session):
    from raytune_fed.runtime import site_placement

    assert site_placement("pinned") == {"resources": {"site:pinned": 0.001}}
    assert site_placement("elsewhere") == {}  # no node declares it: the actor may run anywhere
    assert site_placement("x", {"site:x": 1.0}) == {"resources": {"site:x": 0.001}}

    @ray_session.remote
    class Where:
        def __init__(self, name):
            self.name = name

        def resources(self):
            return ray_session.get_runtime_context().get_assigned_resources()

    pinned = Where.options(num_cpus=0, **site_placement("pinned")).remote("pinned")
    assert ray_session.get(pinned.resources.remote()).get("site:pinned") == pytest.approx(0.001)


def test_workers_run_at_the_priority_the_driver_was_started_with(ray_session):
    """Ray's default nices every worker 15 levels below the raylet, so on a busy machine the trials starved while
    the driver waited on them (a fresh clone's `make demo` beside two busy loops: 1,855 s of wall time for 215
    CPU-seconds).  The package's local sessions keep the workers at the driver's priority."""
    import os

    @ray_session.remote(num_cpus=0)
    def niceness():
        return os.nice(0)

    @ray_session.remote(num_cpus=0)
    class Actor:
        def niceness(self):
            return os.nice(0)

    actor = Actor.remote()
    assert ray_session.get(niceness.remote()) == os.nice(0)
    assert ray_session.get(actor.niceness.remote()) == os.nice(0)
    ray_session.kill(actor)
