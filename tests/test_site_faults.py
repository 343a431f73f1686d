"""A site actor killed mid-grid costs no cell: Ray restarts it from its ledger and rows file, the
cells' calls wait for it and are sent again, and a query it charged before dying is answered
from its ledger, not charged twice.

Marked ``faults`` (``pytest -m "not faults"`` leaves it out): it runs a small RFMS grid twice
on the shared local Ray session.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from _sites_csv import write_sites_csv

from raytune_fed.store import ResultStore
from raytune_fed.workflows.rfms import RFMSSettings, run_grid

pytestmark = pytest.mark.faults

SETTINGS = dict(n_init=4, n_iter=6, n_folds=3, methods=("lso", "fso5", "fso_th", "fmo"), guard_k=0)
COMPARED = ["experiment", "method", "hypervolume", "selected", "openbox_outbag", "curator_outbag", "lockbox_loss",
            "n_refused_evaluations", "n_withheld_finals", "unit_n_ledger_queries"]


def _queries(ledger: Path) -> int:
    return ledger.read_text().count('"event":"query"') if ledger.exists() else 0


def _site_actor_pid(ledger: Path) -> int | None:
    """The process that holds ``ledger`` open: the site actor writing it (the only one: a site's ledger
    is its own)."""
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(ledger) for fd in os.listdir(f"/proc/{pid}/fd")):
                return pid
        except OSError:  # not ours, or gone
            continue
    return None


def _kill_mid_queries(out: Path, site: str, after: int, killed: list) -> threading.Thread:
    """SIGKILL ``site``'s actor the moment its ledger records its ``after``-th answered query: the
    answer is charged and on disk but (most likely) not yet delivered, the worst moment to crash."""
    def watch() -> None:
        give_up = time.monotonic() + 600
        ledger, pid, size = None, None, -1
        while time.monotonic() < give_up:
            if ledger is None:
                found = list(out.glob(f"sites/*/{site}.ledger.jsonl"))
                ledger = found[0].resolve() if found else None
                time.sleep(0.01)
                continue
            if pid is None:
                pid = _site_actor_pid(ledger)
                continue
            now = ledger.stat().st_size
            if now != size:
                size = now
                if _queries(ledger) >= after:
                    os.kill(pid, signal.SIGKILL)
                    killed.append((pid, _queries(ledger)))
                    return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_site_actor_killed_mid_queries_costs_no_cell(ray_session, tmp_path):
    data = write_sites_csv(tmp_path / "three_sites.csv")
    settings = RFMSSettings(dataset=data, target="label", site_column="site", **SETTINGS)
    grid = dict(learners=["elastic_net"], n_reps=1, n_pairs=4)
    killed: list = []
    watcher = _kill_mid_queries(tmp_path / "killed", "b", after=12, killed=killed)
    frame = run_grid(settings, out=tmp_path / "killed", max_retries=0, **grid)  # no cell may need a retry
    watcher.join(timeout=5)
    assert killed, "the site actor was never killed: the grid finished first"
    ledger = next((tmp_path / "killed").glob("sites/*/b.ledger.jsonl"))
    assert _queries(ledger) > killed[0][1]  # it answered again after the kill
    store = ResultStore(tmp_path / "killed")
    keys = sorted(frame["cell_key"].unique())
    assert sorted(p.stem for p in store.units.glob("*.json")) == keys and store.failed_keys() == set()

    straight = run_grid(settings, out=tmp_path / "straight", **grid)
    as_json = [f[COMPARED].sort_values(COMPARED[:2]).to_json() for f in (frame, straight)]
    assert as_json[0] == as_json[1]
    assert (frame["method"] == "fso_th").sum() == len(keys)
    # every query the cells sent to the killed site is in its ledger once: none was charged twice
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    charged = sum(e["event"] in ("query", "refused") and e.get("charged") for e in lines if e.get("method", "query")
                  == "query")
    straight_ledger = next((tmp_path / "straight").glob("sites/*/b.ledger.jsonl"))
    again = [json.loads(line) for line in straight_ledger.read_text().splitlines()]
    assert charged == sum(e["event"] in ("query", "refused") and e.get("charged") for e in again
                          if e.get("method", "query") == "query")
