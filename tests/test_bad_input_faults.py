"""Faults of the machine rather than of the input: a full disk and Ray's start timing out.

Each ends in one line and a non-zero exit, leaves nothing half-written, and charges no analyst an
answer for a site's own failure.  The disk is a real one: a 2 MiB tmpfs mounted for the test (this
needs root, as the suite's machine runs it) and filled with a real file until the kernel says
ENOSPC.  Ray's start timing out is a pure unit test: ``ray.init`` raises what Ray 2.60 raises then.
"""

from __future__ import annotations

import errno
import json
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _sites_csv import write_sites_csv
from attack_kit import balls
from site_targets import OWNER, SCHEDULE, SITE, UNIT, X, Y, policy

from raytune_fed.cli import main
from raytune_fed.errors import ConfigError
from raytune_fed.federation import Policy, Site, SiteClient, SiteSession
from raytune_fed.grid import Cell, CellResult, GridIncompleteError, run_cells
from raytune_fed.store import ResultStore

RFMS = ["rfms", "--target", "label", "--site-column", "site", "--learners", "elastic_net", "--reps", "1",
        "--pairs", "1", "--n-init", "2", "--n-iter", "1", "--n-folds", "2", "--no-report"]
RAY_TIMEOUT = ("The current node timed out during startup. This could happen because some of the raylet failed "
               "to startup or the GCS has become overloaded.")  # ray/_private/node.py, a bare Exception


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs at ``tmp_path / "disk"``, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with a file (returned) until the kernel says ENOSPC."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(bytes(size))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


@contextmanager
def filled(disk: Path):
    """``disk`` full while the block runs."""
    filler = fill(disk)
    try:
        yield
    finally:
        filler.unlink()


def _cli(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("raytune-fed: error: ")]
    assert "Traceback" not in err and len(errors) == 1, err
    return code, errors[0]


def test_a_full_disk_before_the_run_is_one_line_exit_2_and_writes_nothing(small_disk, tmp_path, capsys):
    csv = write_sites_csv(tmp_path / "sites.csv")
    with filled(small_disk):
        code, line = _cli([*RFMS, "--dataset", csv, "--sites", "local", "--out", str(small_disk / "out")], capsys)
        assert code == 2
        assert line == f"raytune-fed: error: cannot write results under '{small_disk / 'out'}': no space left on device"
        assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # not even an empty folder


def test_sites_whose_disk_is_full_fail_at_start_in_one_line_and_leave_no_ledger(small_disk, tmp_path, capsys):
    csv = write_sites_csv(tmp_path / "sites.csv")
    out = tmp_path / "out"
    (out / "sites").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(small_disk), str(out / "sites")], check=True)  # the sites' disk is full
    try:
        with filled(small_disk):
            code, line = _cli([*RFMS, "--dataset", csv, "--sites", "local", "--out", str(out)], capsys)
            assert code == 2
            assert line.startswith(f"raytune-fed: error: cannot start the grid's sites: cannot write their ledgers "
                                   f"under {out / 'sites'}/") and line.endswith(": no space left on device"), line
            assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", "-l", str(out / "sites")], check=True)
    assert sorted(p.name for p in out.iterdir()) == ["sites", "units"] and not list((out / "units").iterdir())


@dataclass(frozen=True)
class Step(Cell):
    """A grid cell whose run (on the cell ``fill_at``) fills the store's disk."""

    i: int
    disk: str
    fill_at: int = 1

    def config(self) -> dict:
        return {"i": self.i}

    @property
    def coordinates(self) -> tuple:
        return ("i", self.i)

    @property
    def root_seed(self) -> int:
        return 0

    @property
    def cost(self) -> float:
        return float(10 - self.i)  # run in order 0, 1, 2


def _fill_at(cell: Step) -> CellResult:
    if cell.i == cell.fill_at:
        fill(Path(cell.disk))
    return CellResult([{"i": cell.i, "value": "v" * 20000}])


def test_a_disk_that_fills_mid_grid_stops_it_in_one_line_and_keeps_the_finished_cells(small_disk):
    store = ResultStore(small_disk / "out")
    cells = [Step(i, str(small_disk)) for i in range(3)]
    with pytest.raises(GridIncompleteError) as info:
        run_cells(cells, _fill_at, store, name="steps")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"steps: stopped: cannot write {store.units}/") and "no space left on device" in message
    assert "1 of 3 cells are stored" in message and "run the same command again to resume" in message
    assert len(store) == 1 and store.has(cells[0].config())
    assert not [p for p in small_disk.rglob("*") if p.name.startswith(".")]  # no temporary file left
    (small_disk / "filler").unlink()  # space again: the same call resumes and finishes
    result = run_cells(cells, lambda c: CellResult([{"i": c.i, "value": "v" * 20000}]), store, name="steps")
    assert (result.n_resumed, result.n_run) == (1, 2)


def _models(n: int) -> list:
    rng = np.random.default_rng(0)
    return [balls(X[rng.choice(len(X), 60, replace=False)]) for _ in range(n)]


def test_a_curator_whose_disk_is_full_charges_no_answer_and_keeps_a_whole_ledger(small_disk):
    settings = Policy.from_mapping(policy(small_disk))
    site = Site(X, Y, settings, owner_secret=OWNER)
    client = SiteClient(site, name=SITE)
    client.declare_schedule(SCHEDULE)
    session = client.open_session(UNIT, "curator")
    ledger = small_disk / "ledger.jsonl"
    models = iter(_models(40))
    session.query(next(models))
    with filled(small_disk):
        while True:  # the ledger's last page has room for a few lines; the first that does not fit fails
            left, size = session.status().budget_left, ledger.stat().st_size
            try:
                session.query(next(models))
            except Exception as exc:  # noqa: BLE001 - checked just below
                failed = exc
                break
        assert getattr(failed, "code", None) == "internal", failed
        added = ledger.read_bytes()[size:]  # nothing of the failed answer's line is left: at most whole lines
        assert added == b"" or added.endswith(b"\n") and all(  # counting an uncharged internal refusal
            json.loads(line)["event"] == "uncharged" and json.loads(line)["code"] == "internal"
            for line in added.splitlines()), added
        assert session.status().budget_left == left  # and it cost the analyst nothing
    n_before = session.status().n_queries
    session.query(next(models))  # space again: answered and charged as usual
    assert session.status().budget_left == left - 1 and session.status().n_queries == n_before + 1
    site.stop()
    again = SiteSession(SiteClient(Site(X, Y, settings, owner_secret=OWNER), name=SITE), session.ticket)
    assert again.status().budget_left == left - 1  # the ledger reads back whole, with the same charges


def test_ray_timing_out_at_start_is_one_line_saying_what_to_do(monkeypatch, tmp_path, capsys):
    import ray

    from raytune_fed.runtime import connect

    stopped = []

    def init(**kwargs):
        raise Exception(RAY_TIMEOUT)  # what Ray 2.60 raises when its raylet does not register in 30 s

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: stopped.append(True))
    with pytest.raises(ConfigError, match=r"^a local Ray session did not start in time \(Exception: The current "
                                          r"node timed out during startup\..*\); this machine may be too loaded .*: "
                                          r"run the same command again when it is less busy, or give the session "
                                          r"fewer CPUs than 2 \(--num-cpus\)$"):
        connect(num_cpus=2)
    assert stopped  # what the failed start left running is stopped
    csv = write_sites_csv(tmp_path / "sites.csv")
    code, line = _cli([*RFMS, "--dataset", csv, "--sites", "actor", "--num-cpus", "1", "--out", str(tmp_path / "o")],
                      capsys)
    assert code == 2 and "a local Ray session did not start in time" in line
    assert not (tmp_path / "o" / "results.parquet").exists()
