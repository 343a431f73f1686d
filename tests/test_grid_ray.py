"""The grid engine on Ray: a killed worker is retried, a failing cell stays alone, an unplaceable
cell is reported instead of awaited (all on the shared local session)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raytune_fed.grid import Cell, Demand, GridIncompleteError, ProgressLines, RayExecutor, run_cells
from raytune_fed.random import as_generator
from raytune_fed.store import ResultStore


@pytest.fixture(scope="module", autouse=True)
def _ship_this_module_by_value():
    """Ray workers cannot import test modules: send this module's classes by value."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@dataclass(frozen=True)
class Job(Cell):
    x: int
    need: Demand = field(default=Demand(), compare=False)

    def config(self) -> dict:
        return {"job": self.x}

    @property
    def coordinates(self) -> tuple:
        return ("job", self.x)

    @property
    def root_seed(self) -> int:
        return 0

    @property
    def demand(self) -> Demand:
        return self.need


@dataclass(frozen=True)
class Work:
    """Runs a job, leaving one file per attempt (holding the worker's pid) in ``folder``."""

    folder: str
    wait_to_be_killed: int | None = None
    fail: int | None = None

    def __call__(self, cell: Job) -> list[dict]:
        folder = Path(self.folder)
        attempt = len(list(folder.glob(f"attempt-{cell.x}-*"))) + 1
        tmp = folder / f".attempt-{cell.x}-{attempt}"
        tmp.write_text(str(os.getpid()))
        tmp.rename(folder / f"attempt-{cell.x}-{attempt}")
        if cell.x == self.wait_to_be_killed and attempt == 1:
            time.sleep(120)  # the test kills this process long before
        if cell.x == self.fail:
            raise ValueError(f"job {cell.x} cannot be done")
        return [{"x": cell.x, "draw": float(as_generator(cell.seed()).random())}]


def _attempts(folder: Path, x: int) -> list[int]:
    return [int(p.read_text()) for p in sorted(folder.glob(f"attempt-{x}-*"))]


def _kill_first_attempt(folder: Path, x: int) -> threading.Thread:
    def kill() -> None:
        path, deadline = folder / f"attempt-{x}-1", time.monotonic() + 120
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(int(path.read_text()), signal.SIGKILL)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_a_killed_worker_is_retried_and_every_cell_is_stored_once(ray_session, tmp_path):
    jobs = [Job(x) for x in range(4)]
    killer = _kill_first_attempt(tmp_path, 0)
    store = ResultStore(tmp_path / "out")
    lines: list[str] = []
    result = run_cells(jobs, Work(str(tmp_path), wait_to_be_killed=0), store, RayExecutor(max_retries=2),
                       progress=ProgressLines(lines.append))
    killer.join(timeout=5)
    first, second = _attempts(tmp_path, 0)  # killed once (by pid), then retried in another process
    assert first != second
    retried = [line for line in lines if "retrying it" in line]  # the retry is said, on one line
    assert retried == [next(line for line in lines
                            if line.startswith("job 0: its worker was lost (WorkerCrashedError"))]
    assert retried[0].endswith("retrying it once a node can host it (retry 1 of 2)")
    assert [r.key for r in result.records] == [j.key for j in jobs] and len(store) == 4
    assert sorted(p.stem for p in store.units.glob("*.json")) == sorted(j.key for j in jobs)
    assert all(len(_attempts(tmp_path, x)) == 1 for x in (1, 2, 3)) and store.failed_keys() == set()
    same = run_cells(jobs, Work(str(tmp_path)), ResultStore(tmp_path / "straight"), RayExecutor())
    assert [r.rows for r in same.records] == [r.rows for r in result.records]


def test_a_worker_killed_more_often_than_the_retries_allow_fails_its_cell_only(ray_session, tmp_path):
    jobs = [Job(x) for x in range(3)]
    killer = _kill_first_attempt(tmp_path, 1)
    store = ResultStore(tmp_path / "out")
    with pytest.raises(GridIncompleteError, match="1 of 3 cells did not finish.*job 1: WorkerCrashedError"):
        run_cells(jobs, Work(str(tmp_path), wait_to_be_killed=1), store, RayExecutor(max_retries=0))
    killer.join(timeout=5)
    assert len(store) == 2 and store.failed_keys() == {jobs[1].key}


def test_a_cell_that_raises_is_not_retried_and_does_not_stop_the_grid(ray_session, tmp_path):
    jobs = [Job(x) for x in range(4)]
    store = ResultStore(tmp_path / "out")
    with pytest.raises(GridIncompleteError, match="job 2: ValueError: job 2 cannot be done"):
        run_cells(jobs, Work(str(tmp_path), fail=2), store, RayExecutor(max_retries=2))
    assert len(store) == 3 and len(_attempts(tmp_path, 2)) == 1  # an exception would only raise again


def test_a_cell_no_node_can_host_is_reported_instead_of_awaited(ray_session, tmp_path):
    """The session's one node declares site:pinned with 2 CPUs: a cell needing 3 CPUs there, or a
    resource nobody declares, can never start; the old grid waited for them forever."""
    jobs = [Job(0), Job(1, Demand(num_cpus=3, site="pinned")), Job(2, Demand(resources={"site:nowhere": 1})),
            Job(3, Demand(site="pinned"))]
    store = ResultStore(tmp_path / "out")
    with pytest.raises(GridIncompleteError, match="2 of 4 cells did not finish") as info:
        run_cells(jobs, Work(str(tmp_path)), store, RayExecutor(placement_timeout=0.5, poll_seconds=0.1))
    problems = dict(info.value.problems)
    assert "the 1 node(s) declaring site:pinned offer at most 2 CPU (the cell needs 3 CPU" in problems["job 1"]
    assert "no live node declares resource 'site:nowhere'" in problems["job 2"]
    assert len(store) == 2 and not _attempts(tmp_path, 1) and not _attempts(tmp_path, 2)
