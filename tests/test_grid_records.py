"""Records edited consistently (the checksum recomputed) are not published: each cell checks its own rows.

A tiny RFMS grid runs in this process (sites "local", no Ray); then its unit file is edited the way a
careless hand or a wrong merge would, with the row count and checksum made to match, so the store's own
checks pass.  The next run must report the file as damaged, by name and with the reason, write no
results, and not start Ray or the sites; ``--recompute-damaged`` gives back the original rows.
"""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest
from _sites_csv import write_sites_csv

from raytune_fed.cli import main
from raytune_fed.grid import Cell, CellResult, GridIncompleteError, ProgressLines, run_cells
from raytune_fed.store import ResultStore, rows_checksum


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished one-cell grid (three methods) and the arguments that made it."""
    d = tmp_path_factory.mktemp("records")
    data = write_sites_csv(d / "sites.csv")
    out = d / "out"
    argv = ["rfms", "--dataset", data, "--target", "label", "--site-column", "site", "--learners", "elastic_net",
            "--methods", "lso,fmo,rand_mo", "--reps", "1", "--pairs", "1", "--n-init", "3", "--n-iter", "2",
            "--n-folds", "2", "--sites", "local", "--no-report"]
    assert main([*argv, "--out", str(out)]) == 0
    return out, argv


def _edit(path, change) -> None:
    record = json.loads(path.read_text())
    change(record["rows"])
    record["n_rows"], record["checksum"] = len(record["rows"]), rows_checksum(record["rows"])
    record["timing"] = [{} for _ in record["rows"]]  # a consistent editor keeps one timing per row
    path.write_text(json.dumps(record, allow_nan=True))


def _set(i, field, value):
    def change(rows):
        rows[i][field] = value
    return change


EDITS = [
    (lambda rows: rows.pop(1), r"it holds rows for method \['lso', 'rand_mo'\] where the cell gives one row each for "
                               r"\['lso', 'fmo', 'rand_mo'\]"),
    (lambda rows: rows.insert(1, dict(rows[1])), r"rows for method \['lso', 'fmo', 'fmo', 'rand_mo'\]"),
    (lambda rows: rows.reverse(), r"rows for method \['rand_mo', 'fmo', 'lso'\]"),
    (_set(0, "hypervolume", float("nan")), r"its lso row: its hypervolume is nan, not a finite number in \[0, 1\]"),
    (_set(2, "hypervolume", 0.999), r"its rand_mo row: its hypervolume 0.999 is not the .* of its own losses"),
    (_set(1, "lockbox_loss", [0.0]), r"its fmo row: its lockbox_loss is not a list of \d+ losses|hypervolume .* is "
                                     r"not the .* of its own losses"),
    (_set(0, "openbox_outbag", [None]), r"its openbox_outbag is None, not a finite number|not a list of"),
    (_set(0, "replication", 7), r"its lso row: its replication is 7, not this cell's 0"),
    (_set(0, "learner", "svm"), r"its learner is 'svm', not this cell's 'elastic_net'"),
    (_set(1, "n_evaluations", -3), r"its n_evaluations is -3, not an integer"),
    (_set(1, "n_withheld_finals", 1), r"its n_withheld_finals is 1 where its losses withhold 0"),
    (_set(0, "settings", "{}"), r"its settings column is not this grid's settings"),
]


@pytest.mark.parametrize("change, reason", EDITS, ids=[f"edit{i}" for i in range(len(EDITS))])
def test_a_consistently_edited_record_is_reported_and_not_published(finished, tmp_path, capsys, change, reason,
                                                                    monkeypatch):
    import ray

    original, argv = finished
    out = tmp_path / "out"
    shutil.copytree(original, out)
    (out / "results.parquet").unlink()
    (out / "summary.json").unlink()
    unit = next((out / "units").glob("*.json"))
    rows = json.loads(unit.read_text())["rows"]
    _edit(unit, change)

    def no_ray(*args, **kwargs):
        raise AssertionError("a rerun with nothing to run started Ray")

    monkeypatch.setattr(ray, "init", no_ray)
    actor_argv = [a for a in argv if a not in ("--sites", "local")]  # the default deployment starts Ray actors
    assert main([*actor_argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "rfms: 1 cells (0 already done, 1 not run: damaged unit files), 0 to run" in err
    import re

    named = [line for line in err.splitlines() if f"unit file {unit} is damaged: its rows fail the cell's checks: "
             in line]
    assert named and re.search(reason, named[0]), err
    assert not (out / "results.parquet").exists() and not (out / "summary.json").exists()
    assert not (out / "sites").exists() or len(list((out / "sites").iterdir())) == 1  # no new sites were started

    monkeypatch.undo()
    assert main([*argv, "--out", str(out), "--recompute-damaged"]) == 0
    capsys.readouterr()
    assert json.loads(unit.read_text())["rows"] == rows
    columns = list(rows[0])  # timings aside
    assert pd.read_parquet(out / "results.parquet")[columns].equals(
        pd.read_parquet(original / "results.parquet")[columns])


def test_the_untouched_record_passes_every_check(finished):
    from raytune_fed.workflows.rfms import RFMSSettings

    out, _ = finished
    record = json.loads(next((out / "units").glob("*.json")).read_text())
    frame = pd.read_parquet(out / "results.parquet")
    assert list(frame["method"]) == ["lso", "fmo", "rand_mo"]
    assert all(math.isfinite(v) for v in frame["hypervolume"])
    settings = RFMSSettings.from_config(json.loads(record["rows"][0]["settings"]))
    from raytune_fed.workflows.rfms._spec import ExperimentSpec, rows_problem

    c = record["config"]
    spec = ExperimentSpec(settings, c["openbox"], c["lockbox"], tuple(c["curators"]), c["replication"], c["learner"],
                          ("a", "b", "c"))
    assert spec.key == record["key"] and spec.check_rows(record["rows"]) is None \
        and rows_problem(spec, record["rows"]) is None


class Twice(Cell):
    """A cell whose rows must hold its own x and a finite y."""

    def __init__(self, x: int) -> None:
        self.x = x

    def config(self) -> dict:
        return {"x": self.x}

    @property
    def coordinates(self) -> tuple:
        return ("x", self.x)

    @property
    def root_seed(self) -> int:
        return 0

    def check_rows(self, rows):
        if len(rows) != 1 or rows[0].get("x") != self.x:
            return f"not the one row of x={self.x}"
        if not isinstance(rows[0].get("y"), (int, float)) or not math.isfinite(rows[0]["y"]):
            return f"y is {rows[0].get('y')!r}"
        return None


def test_a_cell_whose_fresh_rows_fail_its_checks_is_recorded_as_failed_not_stored(tmp_path):
    store = ResultStore(tmp_path)
    lines: list[str] = []

    def run(cell):
        return CellResult([{"x": cell.x, "y": float("nan") if cell.x == 1 else 2.0 * cell.x}])

    with pytest.raises(GridIncompleteError, match=r"x 1: StoreError: the cell's rows fail its checks: y is nan"):
        run_cells([Twice(0), Twice(1)], run, store, progress=ProgressLines(lines.append))
    assert len(store) == 1 and store.failed_keys() == {Twice(1).key}
