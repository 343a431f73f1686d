"""The grid engine without Ray: keys and seeds, order, resume, failures, interrupts, damage, progress."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

import numpy as np
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.grid import (
    MAX_CELLS,
    Cell,
    CellResult,
    GridIncompleteError,
    ProgressBar,
    ProgressLines,
    RayExecutor,
    check_grid_size,
    make_progress,
    run_cells,
)
from raytune_fed.random import as_generator, derive
from raytune_fed.store import ResultStore


@dataclass(frozen=True)
class Square(Cell):
    x: int
    weight: float = 1.0
    seed_root: int = 7

    def config(self) -> dict:
        return {"x": self.x, "seed": self.seed_root}

    @property
    def coordinates(self) -> tuple:
        return ("x", self.x)

    @property
    def root_seed(self) -> int:
        return self.seed_root

    @property
    def cost(self) -> float:
        return self.weight


def square(cell: Square) -> CellResult:
    draw = float(as_generator(cell.seed()).random())
    return CellResult([{"x": cell.x, "y": cell.x ** 2, "draw": draw}], [{"seconds": 0.001 * cell.x}])


def _rows(result) -> list[list[dict]]:
    return [r.rows for r in result.records]


def test_a_cell_has_a_content_key_and_a_seed_from_its_coordinates():
    a, b = Square(3), Square(3, weight=9.0)  # cost is scheduling, not content
    assert a.key == b.key and a.key != Square(4).key
    assert a.seed().entropy == derive(7, "x", 3).entropy and a.seed().spawn_key == derive(7, "x", 3).spawn_key
    assert as_generator(a.seed()).random() == as_generator(Square(3).seed()).random()
    assert as_generator(a.seed()).random() != as_generator(Square(4).seed()).random()
    assert as_generator(a.seed("search")).random() != as_generator(a.seed()).random()


def test_cells_run_longest_first_and_a_rerun_skips_stored_cells(tmp_path):
    cells = [Square(0, 1.0), Square(1, 3.0), Square(2, 2.0), Square(3, 3.0)]
    order: list[int] = []

    def run(cell):
        order.append(cell.x)
        return square(cell)

    store = ResultStore(tmp_path)
    result = run_cells(cells, run, store)
    assert order == [1, 3, 2, 0]  # by cost, ties in the given order
    assert [r.rows[0]["x"] for r in result.records] == [0, 1, 2, 3]  # records in the cells' order
    assert (result.n_run, result.n_resumed) == (4, 0)
    frame = result.frame()
    assert list(frame["y"]) == [0, 1, 4, 9] and list(frame["seconds"]) == [0.0, 0.001, 0.002, 0.003]
    assert list(frame["cell_key"]) == [c.key for c in cells]
    assert list(result.usage_by_key()) == [cells[i].key for i in (1, 3, 2, 0)]  # in the order they finished
    order.clear()
    again = run_cells(cells + [Square(4)], run, ResultStore(tmp_path))
    assert order == [4] and (again.n_run, again.n_resumed) == (1, 4)
    assert list(again.usage_by_key()) == [Square(4).key]  # only what this call ran
    assert _rows(again)[:4] == _rows(result)


def test_a_finished_grid_reruns_without_starting_anything(tmp_path):
    """Nothing left to run: the Ray executor is not even asked to connect."""
    cells = [Square(x) for x in range(3)]
    store = ResultStore(tmp_path)
    first = run_cells(cells, square, store)
    again = run_cells(cells, None, store, RayExecutor())
    assert (again.n_run, again.n_resumed) == (0, 3) and _rows(again) == _rows(first)


def test_a_cell_that_raises_is_recorded_and_the_others_finish(tmp_path):
    cells = [Square(x) for x in range(4)]

    def flaky(cell):
        if cell.x == 2:
            raise ValueError("no square for two today")
        return square(cell)

    store = ResultStore(tmp_path)
    said: list[str] = []
    with pytest.raises(GridIncompleteError, match=r"grid: 1 of 4 cells did not finish: 1 failed .* no results were "
                                                  r"written\. First: x 2: ValueError: no square for two today"):
        run_cells(cells, flaky, store, progress=ProgressLines(said.append))
    assert len(store) == 3 and store.failed_keys() == {cells[2].key}
    failure = json.loads((store.failures_dir / f"{cells[2].key}.json").read_text())
    assert (failure["error_type"], failure["message"], failure["kind"]) == (
        "ValueError", "no square for two today", "failed")
    assert any("FAILED ValueError: no square for two today" in line for line in said)
    # the same call with the cause fixed runs only the failed cell, and clears its failure
    said.clear()
    result = run_cells(cells, square, store, progress=ProgressLines(said.append))
    assert result.n_run == 1 and store.failed_keys() == set()
    assert any("retrying 1 cell(s) that failed before" in line for line in said)


def test_an_interrupt_leaves_a_store_the_same_call_resumes(tmp_path):
    cells = [Square(x) for x in range(5)]

    def interrupted(cell):
        if cell.x == 2:
            raise KeyboardInterrupt
        return square(cell)

    store = ResultStore(tmp_path / "interrupted")
    with pytest.raises(KeyboardInterrupt):
        run_cells(cells, interrupted, store)
    assert len(store) == 2 and store.failed_keys() == set()  # an interrupt is not a failure
    resumed = run_cells(cells, square, store)
    assert resumed.n_run == 3
    straight = run_cells(cells, square, ResultStore(tmp_path / "straight"))
    assert _rows(resumed) == _rows(straight)


def _damage_random_bytes(path):
    path.write_bytes(np.random.default_rng(1).bytes(80))


def _damage_truncate(path):
    path.write_bytes(path.read_bytes()[:55])


def _damage_json_list(path):
    path.write_text("[]")


def _damage_missing_key(path):
    record = json.loads(path.read_text())
    del record["checksum"]
    path.write_text(json.dumps(record))


def _damage_edited_value(path):
    record = json.loads(path.read_text())
    record["rows"][0]["y"] = 5
    path.write_text(json.dumps(record))


@pytest.mark.parametrize("damage, reason", [
    (_damage_random_bytes, "not readable JSON"),
    (_damage_truncate, "not readable JSON"),
    (_damage_json_list, "holds a JSON list"),
    (_damage_missing_key, r"lacks the field\(s\) \['checksum'\]"),
    (_damage_edited_value, "rows do not match their checksum"),
])
def test_a_damaged_unit_file_is_reported_by_name_and_recomputed_on_request(tmp_path, damage, reason):
    cells = [Square(x) for x in range(3)]
    store = ResultStore(tmp_path)
    first = run_cells(cells, square, store)
    damage(store.path(cells[1].key))
    ran: list[int] = []

    def run(cell):
        ran.append(cell.x)
        return square(cell)

    said: list[str] = []
    with pytest.raises(GridIncompleteError, match="1 with a damaged unit file") as info:
        run_cells(cells, run, store, progress=ProgressLines(said.append))
    assert ran == [] and info.value.problems[0][0] == "x 1"
    named = [line for line in said if f"unit file {store.path(cells[1].key)} is damaged" in line]
    assert len(named) == 1 and re.search(reason, named[0]) and "--recompute-damaged" in named[0]
    healed = run_cells(cells, run, store, recompute_damaged=True, progress=ProgressLines(said.append))
    assert ran == [1] and _rows(healed) == _rows(first)
    assert [p.name.split(".")[0] for p in store.quarantine_dir.iterdir()] == [cells[1].key]


def test_another_driver_storing_the_same_cell_first_is_no_conflict(tmp_path):
    """Two drivers on one --out: the other one stores the cell (other timings) while this one runs it."""
    store = ResultStore(tmp_path)

    def raced(cell):
        result = square(cell)
        store.put(cell.config(), result.rows, [{"seconds": 99.0}])  # the other driver, first
        return result

    result = run_cells([Square(1), Square(2)], raced, store)
    assert [t["seconds"] for r in result.records for t in r.timing] == [99.0, 99.0]


def test_bad_grids_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match="have the same configuration"):
        run_cells([Square(1), Square(1, weight=2.0)], square, ResultStore(tmp_path))
    with pytest.raises(ConfigError, match=f"would have {MAX_CELLS + 1:,} cells \\(why\\); at most {MAX_CELLS:,}"):
        check_grid_size(MAX_CELLS + 1, "why")
    assert check_grid_size(MAX_CELLS) == MAX_CELLS


def test_run_cell_must_return_rows(tmp_path):
    with pytest.raises(GridIncompleteError, match="TypeError: run_cell must return a CellResult or a list of row"):
        run_cells([Square(1)], lambda cell: 42, ResultStore(tmp_path))
    result = run_cells([Square(2)], lambda cell: [{"x": cell.x}], ResultStore(tmp_path))
    assert result.records[0].rows == [{"x": 2}] and result.records[0].timing == [{}]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert isinstance(make_progress(_Terminal()), ProgressBar)
    assert isinstance(make_progress(io.StringIO()), ProgressLines)
    terminal = _Terminal()
    run_cells([Square(x, weight=x + 1.0) for x in range(3)], square, ResultStore(tmp_path / "bar"),
              progress=make_progress(terminal), name="squares")
    shown = terminal.getvalue()
    assert "\r" in shown and shown.endswith("\n")
    assert re.search(r"squares \[#{24}\] 3/3 cells, \d+:\d\d elapsed, ~\d+:\d\d left", shown)
    lines: list[str] = []
    run_cells([Square(x) for x in range(2)], square, ResultStore(tmp_path / "lines"),
              progress=ProgressLines(lines.append), name="squares")
    assert lines[0] == "squares: 2 cells (0 already done), 2 to run"
    assert re.fullmatch(r"\[1/2\] x 0: \d+\.\d s \(\d+:\d\d elapsed, ~--:-- left\)", lines[1])  # no estimate yet
    assert lines[2].startswith("[2/2] x 1: ")


def test_a_narrow_terminal_gets_lines_and_a_bar_never_wraps(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert isinstance(make_progress(_Terminal()), ProgressLines)
    for columns in (40, 72, 120):
        bar = ProgressBar(_Terminal(), columns=columns)
        bar.start("a-long-grid-name", 1234, 17, 1000.0)
        bar.close()
        drawn = bar.stream.getvalue().replace("\x1b[2K", "").split("\r")
        assert all(len(line.rstrip("\n")) < columns for line in drawn), (columns, drawn)


def test_the_time_estimate_counts_down_between_events_at_this_runs_rate(monkeypatch):
    from raytune_fed.grid import _progress

    now = [0.0]
    monkeypatch.setattr(_progress.time, "monotonic", lambda: now[0])
    lines: list[str] = []
    p = ProgressLines(lines.append)
    p.start("g", 10, 0, 10.0)
    now[0] = 10.0
    p.step("a", 10.0)
    assert p.left() is None                      # one step: no estimate yet
    now[0] = 20.0
    p.step("b", 10.0)
    first = p.left()
    assert first == pytest.approx(80.0)          # 8 cost left at 0.1 per second
    now[0] = 30.0                                # no event for 10 s: the estimate falls by 10 s, never rises
    assert p.left() == pytest.approx(first - 10.0)
    now[0] = 21.0
    p.step("c", 1.0)                             # the rate is the run's: 3 cost in 21 s
    assert p.left() == pytest.approx(7 / (3 / 21.0))
