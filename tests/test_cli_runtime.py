"""The command line (datasets, help, one-line errors with exit code 2) and Ray placement."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.error import URLError

import pytest

from raytune_fed.cli import main


def test_datasets_lists_the_embedded_sets(capsys):
    assert main(["datasets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["geo5_sim"]["sites"] == 5 and rows["geo5_sim"]["features"] == 1000
    assert rows["spambase"]["rows"] == 4597 and rows["synthetic2"]["classes"] == 10
    assert main(["datasets"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:5] == ["name", "rows", "features", "classes", "sites"]
    assert any(line.startswith("gina_agnostic_subset") for line in table)


@pytest.mark.parametrize("command", ["datasets", "demo", "rfms", "report"])
def test_every_subcommand_has_help(command):
    out = subprocess.run([sys.executable, "-m", "raytune_fed.cli", command, "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "usage: raytune-fed" in out.stdout and "--help" in out.stdout


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


def test_report_of_a_missing_directory_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "nothing" in capsys.readouterr().err


def test_site_actors_go_to_nodes_that_declare_their_site(ray_session):
    from raytune_fed.runtime import site_placement

    assert site_placement("pinned") == {"resources": {"site:pinned": 0.001}}
    assert site_placement("elsewhere") == {}  # no node declares it: the actor may run anywhere

    @ray_session.remote
    class Where:
        def __init__(self, name):
            self.name = name

        def resources(self):
            return ray_session.get_runtime_context().get_assigned_resources()

    pinned = Where.options(num_cpus=0, **site_placement("pinned")).remote("pinned")
    assert ray_session.get(pinned.resources.remote()).get("site:pinned") == pytest.approx(0.001)
