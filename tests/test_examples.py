"""Every script in ``examples/`` and every Python block of the README runs, as written.

The README's blocks are read from README.md at test time (never copied here), so an
example that stops working fails this test.  Both run in this process on the shared Ray
session (the scripts' own ``connect`` / Tune reuse it), so the suite pays no extra Ray
start; the RFMS example starts its sites as service processes.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def readme_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)


def _example(name: str) -> dict:
    return runpy.run_path(str(ROOT / "examples" / name), run_name="example")


def test_every_example_has_a_test_below():
    tested = {"parego_search.py", "nsga2_search.py", "pu_halving_scheduler.py", "rfms_grid.py",
              "secureboost_parties.py"}
    assert {p.name for p in EXAMPLES} == tested


def test_the_readme_has_python_blocks_and_the_test_finds_them():
    blocks = readme_blocks()
    assert len(blocks) >= 4
    assert all("import" in b for b in blocks)


@pytest.mark.process
@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_python_block_runs(index, ray_session, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    block = readme_blocks()[index]
    exec(compile(block, f"README.md python block {index}", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.strip(), "every README block prints what it computed"


def test_parego_example(ray_session, capsys):
    from raytune_fed.metrics import pareto_mask

    searcher = _example("parego_search.py")["main"]()
    front = searcher.core.pareto_front()
    assert len(front) >= 2 and pareto_mask(front).all()
    assert searcher.core.n_told == 16
    assert "Pareto front" in capsys.readouterr().out


def test_nsga2_example(ray_session):
    # two generations, not the script's three: each trial starts an actor (no reuse_actors in this example)
    searcher = _example("nsga2_search.py")["main"](generations=2)
    assert searcher.core.n_told == 2 * 4
    configs = searcher.core.pareto_configs()
    assert configs, "a feasible front"
    assert all(c["width"] * (1 + c["x"]) <= 40.0 for c in configs)


def test_pu_halving_scheduler_example(ray_session, capsys):
    scheduler = _example("pu_halving_scheduler.py")["main"]()
    assert scheduler.is_finished
    assert scheduler.rows_used <= scheduler.table.budget_samples
    top = len(scheduler.rung_rows) - 1
    assert any(rung == top and cid == scheduler.best_config_id for cid, rung, _, _ in scheduler.results())
    assert "test AUC" in capsys.readouterr().out


@pytest.mark.process
def test_rfms_grid_example(ray_session):
    frame = _example("rfms_grid.py")["main"]()
    assert len(frame) == 2 * 3                       # 2 cells x 3 methods
    assert set(frame["method"]) == {"lso", "fso5", "fmo"}
    assert np.all((frame["hypervolume"] >= 0) & (frame["hypervolume"] <= 1))


def test_secureboost_parties_example(ray_session):
    report = _example("secureboost_parties.py")["main"]()
    assert report.n_trees == 4 and report.n_federated_trees == 3
    assert report.op_counts.encryptions > 0
    assert report.utility_loss < 0.3                 # Synthetic1 is learnable: test AUC above 0.7
