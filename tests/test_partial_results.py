"""Results readable while a grid runs: ``results.partial.parquet`` of the stored cells, the report page built from
it and marked partial, ``load_results`` saying so, and the file gone once the grid completes.

The engine tests run cells in this process; the PU test runs the real PU cells in this process (the engine's
in-process executor); the last test stops a real ``raytune-fed rfms`` (sites in its own process, no Ray) with
Ctrl-C, reports on what it left, and resumes it to the end through the command line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from _sites_csv import write_sites_csv

from raytune_fed.cli._main import main
from raytune_fed.errors import ConfigError
from raytune_fed.grid import (
    Cell,
    CellResult,
    GridIncompleteError,
    GridSnapshot,
    InProcessExecutor,
    ProgressLines,
    run_cells,
)
from raytune_fed.grid._engine import records_frame
from raytune_fed.report._page import partial_note
from raytune_fed.store import ResultStore, StoreWriteError
from raytune_fed.workflows import load_results, recognise
from raytune_fed.workflows._results import (
    PARTIAL_FILE,
    PARTIAL_KEY,
    RESULTS_FILE,
    Partial,
    PartialResults,
    partial_of,
    read_results,
    remove_partial,
    results_file,
    write_partial,
)


@dataclass(frozen=True)
class Cube(Cell):
    x: int

    def config(self) -> dict:
        return {"x": self.x}

    @property
    def coordinates(self) -> tuple:
        return ("x", self.x)

    @property
    def root_seed(self) -> int:
        return 0


def cube(cell: Cube) -> CellResult:
    return CellResult([{"x": cell.x, "y": cell.x ** 3}, {"x": cell.x, "y": -cell.x}], [{"seconds": 0.5}] * 2)


def failing(*bad: int):
    def run(cell: Cube) -> CellResult:
        if cell.x in bad:
            raise ValueError(f"no cube for {cell.x}")
        return cube(cell)
    return run


def _meta(path) -> dict:
    return json.loads(pq.read_schema(path).metadata[PARTIAL_KEY])


def _stored_frame(store: ResultStore, cells) -> pd.DataFrame:
    return records_frame([store.load(c.key) for c in cells if store.inspect(c.key).state == "done"])


# -- the engine and the shared writer ---------------------------------------------------------------------------

def test_a_grid_with_failed_cells_leaves_a_partial_file_of_exactly_its_stored_cells(tmp_path):
    cells = [Cube(x) for x in range(6)]
    store = ResultStore(tmp_path)
    with pytest.raises(GridIncompleteError, match="2 of 6 cells did not finish"):
        run_cells(cells, failing(1, 4), store, name="cubes", on_partial=PartialResults(tmp_path), partial_every=0)
    path = tmp_path / PARTIAL_FILE
    assert not (tmp_path / RESULTS_FILE).exists()
    assert results_file(tmp_path) == path
    partial = pd.read_parquet(path)
    pd.testing.assert_frame_equal(partial, _stored_frame(store, cells))
    assert partial["x"].tolist() == [0, 0, 2, 2, 3, 3, 5, 5]  # the cells' order, two rows each
    meta = _meta(path)
    assert (meta["workflow"], meta["n_done"], meta["n_total"], meta["unit"]) == ("cubes", 4, 6, "cells")
    assert meta["missing"] == ["x 1", "x 4"]
    assert partial_of(path) == Partial("cubes", 4, 6, ("x 1", "x 4"))
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # written through a temp file, moved


def test_an_interrupt_leaves_the_cells_stored_before_it_and_a_resumed_grid_counts_them(tmp_path):
    cells = [Cube(x) for x in range(5)]
    store = ResultStore(tmp_path)

    def interrupted(cell):
        if cell.x == 2:
            raise KeyboardInterrupt
        return cube(cell)

    seen: list[GridSnapshot] = []
    with pytest.raises(KeyboardInterrupt):
        run_cells(cells, interrupted, store, on_partial=seen.append, partial_every=0)
    assert [(s.n_done, s.missing) for s in seen] == [(1, ("x 1", "x 2", "x 3", "x 4")),
                                                      (2, ("x 2", "x 3", "x 4")),
                                                      (2, ("x 2", "x 3", "x 4"))]  # the last: when it stopped
    pd.testing.assert_frame_equal(seen[-1].frame(), _stored_frame(store, cells))

    seen.clear()
    with pytest.raises(GridIncompleteError):  # a resumed run, in which x 4 fails
        run_cells(cells, failing(4), store, on_partial=seen.append, partial_every=0)
    # the resumed cells are in every snapshot; the last one is written when the grid stops incomplete
    assert [s.n_done for s in seen] == [3, 4, 4] and seen[-1].missing == ("x 4",)
    assert [r.rows[0]["x"] for r in seen[-1].records] == [0, 1, 2, 3]


def test_snapshots_are_throttled_and_a_complete_grid_gets_none_at_its_end(tmp_path):
    cells = [Cube(x) for x in range(4)]
    seen: list[GridSnapshot] = []
    run_cells(cells, cube, ResultStore(tmp_path / "a"), on_partial=seen.append, partial_every=1e9)
    assert [s.n_done for s in seen] == [1]  # the first stored cell, then nothing for 1e9 s; complete: no final
    seen.clear()
    with pytest.raises(GridIncompleteError):
        run_cells(cells, failing(3), ResultStore(tmp_path / "b"), on_partial=seen.append, partial_every=1e9)
    assert [s.n_done for s in seen] == [1, 3]  # the first, then the final one of a grid that stopped incomplete
    seen.clear()
    run_cells(cells, cube, ResultStore(tmp_path / "c"), on_partial=seen.append, partial_every=0)
    assert [s.n_done for s in seen] == [1, 2, 3]  # every cell but the one that completes the grid
    with pytest.raises(ConfigError, match=r"partial_every must be a finite number >= 0.0, got -1"):
        run_cells(cells, cube, ResultStore(tmp_path / "d"), on_partial=seen.append, partial_every=-1)


def _full_disk(snapshot):
    raise StoreWriteError(Path(PARTIAL_FILE), OSError(28, "No space left on device"))


def _arrow_refuses(snapshot):
    raise ValueError("ArrowInvalid: Could not convert 'a' with type str: tried to convert to double")


@pytest.mark.parametrize("hook, said_why", [(_full_disk, "no space left on device"),
                                            (_arrow_refuses, "could not convert")])
def test_a_partial_file_that_cannot_be_written_is_said_once_and_the_grid_goes_on(tmp_path, hook, said_why):
    said: list[str] = []
    with pytest.raises(GridIncompleteError, match="1 of 4 cells did not finish"):
        run_cells([Cube(x) for x in range(4)], failing(3), ResultStore(tmp_path),
                  progress=ProgressLines(said.append), on_partial=hook, partial_every=0)
    notes = [line for line in said if "partial results could not be written" in line]
    assert len(notes) == 1 and said_why in notes[0].lower(), said
    assert len(ResultStore(tmp_path)) == 3  # every cell that could finish is stored


def test_no_stored_cell_means_no_partial_file(tmp_path):
    cells = [Cube(x) for x in range(3)]
    write_partial(tmp_path, pd.DataFrame({"x": [9]}), Partial("cubes", 1, 3, ("x 1", "x 2")))  # an old run's
    with pytest.raises(GridIncompleteError):
        run_cells(cells, failing(0, 1, 2), ResultStore(tmp_path), on_partial=PartialResults(tmp_path))
    assert not (tmp_path / PARTIAL_FILE).exists()
    with pytest.raises(ConfigError, match=r"no results.parquet in .*: run a grid .* results.partial.parquet once a "
                                          r"cell has finished"):
        recognise(tmp_path)


def test_the_newer_of_a_complete_and_a_partial_file_is_read(tmp_path):
    complete = pd.DataFrame({"dataset": ["d"], "variant": ["upu"], "test_auc": [0.5]})
    complete.to_parquet(tmp_path / RESULTS_FILE, index=False)
    write_partial(tmp_path, complete.assign(test_auc=0.75), Partial("pu", 1, 2, ("d rep=1 upu",)))
    os.utime(tmp_path / RESULTS_FILE, (1_000_000, 1_000_000))  # a finished run, then the same --out run again
    frame, partial = read_results(tmp_path)
    assert frame["test_auc"].tolist() == [0.75] and partial == Partial("pu", 1, 2, ("d rep=1 upu",))
    os.utime(tmp_path / PARTIAL_FILE, (900_000, 900_000))  # the grid completed but the old file stayed
    frame, partial = read_results(tmp_path)
    assert frame["test_auc"].tolist() == [0.5] and partial is None
    remove_partial(tmp_path)
    remove_partial(tmp_path)  # nothing to remove is no error
    assert results_file(tmp_path) == tmp_path / RESULTS_FILE


def _no_metadata(d):
    pd.DataFrame({"test_auc": [0.5], "variant": ["upu"]}).to_parquet(d / PARTIAL_FILE)


def _bad_counts(d):
    write_partial(d, pd.DataFrame({"test_auc": [0.5], "variant": ["upu"]}), Partial("pu", 3, 2, ()))


def _torn(d):
    write_partial(d, pd.DataFrame({"test_auc": [0.5], "variant": ["upu"]}), Partial("pu", 1, 2, ("a",)))
    data = (d / PARTIAL_FILE).read_bytes()
    (d / PARTIAL_FILE).write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("make, message", [
    (_no_metadata, r"results.partial.parquet is not a partial results file \(no raytune_fed.partial metadata\)"),
    (_bad_counts, r"results.partial.parquet: its raytune_fed.partial metadata is damaged \(ValueError: n_done 3, "
                  r"n_total 2\)"),
    (_torn, r"cannot read .*results.partial.parquet \(damaged or not a results file\)"),
])
def test_a_damaged_partial_file_is_one_clear_error(tmp_path, make, message):
    make(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_results(tmp_path)


def test_the_partial_note_names_the_first_missing_cells_and_counts_the_rest():
    assert partial_note(3, 4, ["a"]) == "partial: 3 of 4 cells; missing: a"
    assert partial_note(1, 8, list("abcdefg"), "runs") == "partial: 1 of 8 runs; missing: a, b, c, d, e and 2 more"


# -- a real workflow ---------------------------------------------------------------------------------------------

def test_a_stopped_pu_grid_reports_partial_and_completes_to_the_same_rows(tmp_path, capsys):
    from raytune_fed.workflows.pu import PUGridSettings, run_grid
    from raytune_fed.workflows.pu._grid import build_grid, run_cell

    settings = PUGridSettings(datasets=("titanic",), cs=(0.2,), methods=("ode", "upu"), schedules=("sh",), n_reps=2,
                              baseline_configs=2)
    cells = build_grid(settings)
    missing = "titanic c=0.2 rep=1 ode-ipm-sh"
    assert missing in [c.label for c in cells]

    def stops_at_one_cell(cell):
        if cell.label == missing:
            raise RuntimeError("the worker's node went away")
        return run_cell(cell)

    store = ResultStore(tmp_path)
    with pytest.raises(GridIncompleteError):
        run_cells(cells, stops_at_one_cell, store, InProcessExecutor(), name="pu", on_partial=PartialResults(tmp_path),
                  partial_every=0)
    stored = _stored_frame(store, cells)
    assert len(stored) == 3

    with pytest.raises(ConfigError, match=r"holds a partial pu grid \(3 of 4 cells\).*partial=True"):
        load_results(tmp_path)                      # a script that reads results never takes a partial grid unasked
    results = load_results(tmp_path, partial=True)
    assert (results.workflow, results.complete, results.missing) == ("pu", False, (missing,))
    assert (results.n_done, results.n_total, len(results.trials)) == (3, 4, 3)
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"report (pu, partial: 3 of 4 cells): {tmp_path / 'index.html'}"
    banner = f"partial: 3 of 4 cells; missing: {missing}"
    html, md = (tmp_path / "index.html").read_text(), (tmp_path / "index.md").read_text()
    assert f'<div class="partial" id="partial">{banner}.' in html and "<h1>PU model selection report (partial)" in html
    assert md.startswith(f"# PU model selection report (partial)\n\n> **{banner}.")

    frame = run_grid(settings, out=tmp_path, executor=InProcessExecutor())  # the same grid again, to its end
    assert not (tmp_path / PARTIAL_FILE).exists() and results_file(tmp_path) == tmp_path / RESULTS_FILE
    complete = pd.read_parquet(tmp_path / RESULTS_FILE)
    assert len(complete) == len(frame) == 4 and set(complete["cell_key"]) == {c.key for c in cells}
    kept = complete[complete["cell_key"].isin(set(stored["cell_key"]))].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, stored)  # the partial rows are the complete file's rows of those cells
    done = load_results(tmp_path)
    assert (done.complete, done.missing, done.n_done, done.n_total, len(done.trials)) == (True, (), None, None, 4)
    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"report (pu): {tmp_path / 'index.html'}")
    assert "partial" not in (tmp_path / "index.md").read_text().split("\n")[0]
    assert 'class="partial"' not in (tmp_path / "index.html").read_text()


@pytest.mark.process
def test_rfms_stopped_with_ctrl_c_reports_partial_and_the_same_command_completes_it(tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "raytune_fed.cli", "rfms", "--dataset", data, "--target", "label", "--site-column",
            "site", "--learners", "svm", "--methods", "lso,fmo", "--n-init", "4", "--n-iter", "12", "--n-folds", "3",
            "--pairs", "6", "--reps", "1", "--guard-k", "0", "--sites", "local", "--no-report", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "COLUMNS", "LINES")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    while not (out / PARTIAL_FILE).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the partial file appears once the first cell is stored
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert not (out / RESULTS_FILE).exists()

    store = ResultStore(out)
    units = {p.stem for p in store.units.glob("*.json")}
    partial = pd.read_parquet(out / PARTIAL_FILE)
    meta = _meta(out / PARTIAL_FILE)
    assert 1 <= len(units) < 6 and (meta["workflow"], meta["n_done"], meta["n_total"]) == ("rfms", len(units), 6)
    assert set(partial["cell_key"]) == units and len(partial) == 2 * len(units)  # lso and fmo per cell
    assert len(meta["missing"]) == 6 - len(units) and all(m.startswith("svm openbox=") for m in meta["missing"])
    pd.testing.assert_frame_equal(partial, records_frame(
        [store.load(k) for k in dict.fromkeys(partial["cell_key"])]))

    report = subprocess.run([sys.executable, "-m", "raytune_fed.cli", "report", str(out)], capture_output=True,
                            text=True, env=env, timeout=300)
    assert report.returncode == 0, report.stderr
    assert f"report (rfms, partial: {len(units)} of 6 cells)" in report.stdout
    banner = f"partial: {len(units)} of 6 cells; missing: {', '.join(meta['missing'][:5])}"
    assert banner in (out / "index.html").read_text() and banner in (out / "index.md").read_text()
    results = load_results(out, partial=True)
    assert not results.complete and results.missing == tuple(meta["missing"]) and len(results.trials) == len(partial)

    finished = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert finished.returncode == 0, finished.stderr
    assert not (out / PARTIAL_FILE).exists()
    complete = pd.read_parquet(out / RESULTS_FILE)
    assert len(complete) == 12 and complete["cell_key"].nunique() == 6
    kept = complete[complete["cell_key"].isin(units)].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, partial)
    assert load_results(out).complete


def test_recognise_reads_a_partial_file_too(tmp_path):
    write_partial(tmp_path, pd.DataFrame({"hypervolume": [0.5], "experiment": ["e"]}), Partial("rfms", 1, 2, ("b",)))
    assert recognise(tmp_path) == "rfms" and recognise(tmp_path / PARTIAL_FILE) == "rfms"


def test_cmosb_keeps_a_partial_file_of_its_finished_runs_and_drops_it_with_the_results(cmosb_cli_run, tmp_path,
                                                                                      capsys):
    """CMOSB runs its own Tune loop, a run per method: its partial file counts finished runs (``runs/<name>.parquet``,
    what its resume reads), through the same writer and the same page banner."""
    import shutil

    from raytune_fed.workflows.cmosb import write_outputs
    from raytune_fed.workflows.cmosb._report import keep_partial

    assert cmosb_cli_run.code == 0, cmosb_cli_run.stderr
    full = cmosb_cli_run.frame
    names = list(dict.fromkeys(full["run"]))
    assert len(names) >= 3
    shutil.copytree(cmosb_cli_run.out / "runs", tmp_path / "runs")
    shutil.copy(cmosb_cli_run.out / "settings.json", tmp_path / "settings.json")
    keep_partial(tmp_path, "synthetic1", names)
    assert not (tmp_path / PARTIAL_FILE).exists()  # every run finished: the complete results are the caller's
    lost = names[1:3]
    for name in lost:
        (tmp_path / "runs" / f"{name}.parquet").unlink()  # as if the run stopped before these two finished
    keep_partial(tmp_path, "synthetic1", names)

    kept = full[~full["run"].isin(lost)].reset_index(drop=True)
    partial = pd.read_parquet(tmp_path / PARTIAL_FILE)
    pd.testing.assert_frame_equal(partial, kept)
    assert partial_of(tmp_path / PARTIAL_FILE) == Partial("cmosb", len(names) - 2, len(names), tuple(lost), "runs")
    results = load_results(tmp_path, partial=True)
    assert (results.workflow, results.complete, results.missing, len(results.trials)) == (
        "cmosb", False, tuple(lost), len(kept))
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 0
    assert f"report (cmosb, partial: {len(names) - 2} of {len(names)} runs)" in capsys.readouterr().out
    banner = f"partial: {len(names) - 2} of {len(names)} runs; missing: {', '.join(lost)}"
    assert banner in (tmp_path / "index.html").read_text() and banner in (tmp_path / "index.md").read_text()

    write_outputs(full, tmp_path)  # the resumed run's end: results.parquet, and no partial file left
    assert not (tmp_path / PARTIAL_FILE).exists() and load_results(tmp_path).complete
