"""``raytune-fed pu``: bad input (exit 2, one line), a real grid on Ray with resume, the tables of the report."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from raytune_fed.cli._main import main
from raytune_fed.errors import ConfigError
from raytune_fed.workflows.pu import PUGridSettings, build_grid, summarize, write_report
from raytune_fed.workflows.pu._grid import TIMING_COLUMNS


@pytest.fixture
def one_class_csv(tmp_path):
    path = tmp_path / "one_class.csv"
    path.write_text("a,b,y\n" + "".join(f"{i},{i % 3},pos\n" for i in range(30)))
    return path


@pytest.mark.parametrize("argv, message", [
    (["--c", "1.5"], r"c must be in \(0, 1\], got 1.5"),
    (["--c", "0"], r"c must be in \(0, 1\], got 0.0"),
    (["--dataset", "titanic", "--c", "0.001"], r"c=0.001 labels 0 of the .* positives outside the test part"),
    (["--dataset", "{csv}", "--target", "y"], r"target column 'y' has only one class \('pos'\)"),
    (["--budget-samples", "300"], r"ODE over 100 configurations: budget_samples=300 gives 0 rows per configuration"),
    (["--budget-seconds", "-1"], r"budget_seconds must be a finite number >= 0.0, got -1.0"),
    (["--schedule", "cosine"], r"unknown schedule 'cosine'; known schedules: \['sh', 'log', 'exp', 'linear'"),
    (["--methods", "ode,bagging"], r"unknown method 'bagging'; known methods: \['ode', 'upu', 'nnpu'"),
    (["--evaluator", "f1"], r"unknown evaluator 'f1'; known evaluators: \['ipm', 'auc'\]"),
    (["--reps", "0"], r"n_reps must be an integer >= 1, got 0"),
    (["--budget-factor", "0"], r"budget_factor must be > 0, got 0.0"),
    (["--rung-sampling", "stratified"], r"unknown rung sampling 'stratified'; known: \['proportional', 'balanced', "
                                        r"'uniform'\]"),
    (["--prior", "oracle"], r"unknown prior source 'oracle'; known: \['tice', 'true'\]"),
    (["--cv-reading", "paper"], r"unknown control-variate reading 'paper'; known: \['normalised', 'odds'\]"),
])
def test_bad_input_exits_2_with_one_line(argv, message, tmp_path, capsys, one_class_csv):
    out = tmp_path / "out"
    code = main(["pu", *[a.replace("{csv}", str(one_class_csv)) for a in argv], "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("raytune-fed: error:")
    assert re.search(message, lines[0]), lines[0]
    assert not (out / "results.parquet").exists()


def test_grid_expands_ode_variants_and_shares_the_split_seed():
    settings = PUGridSettings(datasets=("titanic", "twonorm"), cs=(0.01, 0.1), methods=("ode", "wsvm"),
                              evaluators=("ipm", "auc"), schedules=("sh", "exp"), control_variates=(True, False),
                              n_reps=2, seed=4)
    cells = build_grid(settings)
    assert len(cells) == 2 * 2 * 2 * (2 * 2 * 2 + 1)
    assert len({c.key for c in cells}) == len(cells)
    same_rep = [c for c in cells if (c.dataset, c.c, c.rep) == ("titanic", 0.01, 1)]
    assert len({c.seed().entropy for c in same_rep}) == 1 and len({tuple(c.seed().spawn_key) for c in same_rep}) == 1
    assert {c.variant for c in same_rep} == {"wsvm", "ode-ipm-sh", "ode-ipm-exp", "ode-auc-sh", "ode-auc-exp",
                                             "ode-ipm-sh-nocv", "ode-ipm-exp-nocv", "ode-auc-sh-nocv",
                                             "ode-auc-exp-nocv"}
    other = [c for c in cells if (c.dataset, c.c, c.rep) == ("titanic", 0.01, 0)][0]
    assert other.seed().spawn_key != same_rep[0].seed().spawn_key


def _frame():
    rows = []
    for rep, (a, b, t) in enumerate([(0.8, 0.7, 1.0), (0.9, 0.6, 3.0)]):
        for variant, ev, sch, cv, auc, secs in [("ode-ipm-selfpaced", "ipm", "selfpaced", True, a, t),
                                                ("ode-auc-selfpaced", "auc", "selfpaced", True, b, t),
                                                ("ode-ipm-exp", "ipm", "exp", True, b, t),
                                                ("ode-ipm-exp-nocv", "ipm", "exp", False, a, t)]:
            rows.append({"dataset": "d", "c": 0.1, "rep": rep, "method": "ode", "variant": variant, "evaluator": ev,
                         "schedule": sch, "control_variate": cv, "test_auc": auc, "seconds": secs})
        rows.append({"dataset": "d", "c": 0.1, "rep": rep, "method": "upu", "variant": "upu", "evaluator": None,
                     "schedule": None, "control_variate": None, "test_auc": 0.5, "seconds": 10 * t})
    return pd.DataFrame(rows)


def test_tables_are_means_over_replications():
    tables = summarize(_frame())["tables"]
    assert tables["main_variant"] == {"evaluator": "ipm", "schedule": "selfpaced", "control_variate": True}
    t2 = {r["column"]: r for r in tables["table2_test_auc"]}
    assert t2["ode-ipm"]["mean"] == pytest.approx(85.0) and t2["ode-ipm"]["sd"] == pytest.approx(7.0710678)
    assert t2["ode-auc"]["mean"] == pytest.approx(65.0) and t2["upu"]["mean"] == pytest.approx(50.0)
    t4 = {r["schedule"]: r["mean"] for r in tables["table4_schedules"]}
    assert t4 == pytest.approx({"selfpaced": 85.0, "exp": 65.0})
    t5 = {r["control_variate"]: r["mean"] for r in tables["table5_control_variate"]}
    assert t5 == pytest.approx({True: 65.0, False: 85.0}) and tables["table5_schedule"] == "exp"
    assert "table6_seconds" not in tables and "table6_ratio_to_ode" not in tables   # clock readings stay apart
    ratios = {r["column"]: r["ratio"] for r in summarize(_frame())["timings"]["table6_ratio_to_ode"]}
    assert ratios == pytest.approx({"ode": 1.0, "upu": 10.0})


def test_a_search_that_selected_nothing_is_counted_apart_not_averaged():
    frame = _frame()
    frame.loc[(frame["variant"] == "ode-ipm-exp") & (frame["rep"] == 1), "test_auc"] = float("nan")
    t4 = {r["schedule"]: r for r in summarize(frame)["tables"]["table4_schedules"]}
    assert t4["exp"]["mean"] == pytest.approx(70.0) and t4["exp"]["sd"] is None
    assert (t4["exp"]["n"], t4["exp"]["n_no_selection"]) == (1, 1) and t4["selfpaced"]["n_no_selection"] == 0
    frame.loc[frame["variant"] == "ode-ipm-exp", "test_auc"] = float("nan")
    t4 = {r["schedule"]: r for r in summarize(frame)["tables"]["table4_schedules"]}
    assert t4["exp"]["mean"] is None and (t4["exp"]["n"], t4["exp"]["n_no_selection"]) == (0, 2)


def test_a_stored_row_that_selected_nothing_passes_the_cell_checks_only_with_its_reason():
    from raytune_fed.workflows.pu._grid import PUCell

    cell = PUCell("titanic", 0.05, 2, "ode", "ipm", "exp", True, settings=PUGridSettings(datasets=("titanic",)))
    row = {"dataset": "titanic", "c": 0.05, "rep": 2, "method": "ode", "variant": cell.variant, "evaluator": "ipm",
           "schedule": "exp", "control_variate": True, "test_auc": float("nan"), "true_prior": 0.3, "prior": 0.7,
           "rows_used": 0, "n_train": 1156, "n_labelled": 19, "no_selection": "every job failed (613 discarded)"}
    assert cell.check_rows([row]) is None
    assert "not a finite number in [0, 1]" in cell.check_rows([{**row, "no_selection": None}])
    assert "only an ODE search that selected nothing" in cell.check_rows([{**row, "test_auc": 0.7}])
    upu = PUCell("titanic", 0.05, 2, "upu", None, None, None, settings=PUGridSettings(datasets=("titanic",)))
    upu_row = {**row, "method": "upu", "variant": "upu", "evaluator": None, "schedule": None, "control_variate": None}
    assert "only an ODE search that selected nothing" in upu.check_rows([upu_row])   # uPU always names a model
    wsvm = PUCell("titanic", 0.05, 2, "wsvm", None, None, None, settings=PUGridSettings(datasets=("titanic",)))
    assert wsvm.check_rows([{**upu_row, "method": "wsvm", "variant": "wsvm"}]) is None
    assert cell.check_rows([{**row, "test_auc": 0.7, "no_selection": None}]) is None


def test_report_page_holds_every_table_and_a_figure_per_dataset(tmp_path):
    page = write_report(tmp_path, _frame())
    assert page == tmp_path / "index.html"
    text = (tmp_path / "index.md").read_text()
    for title in ("Table 2", "Table 4", "Table 5", "Table 6", "Figures 3-5"):
        assert title in text and title in page.read_text()
    assert "| d | 0.1 | 85.00 ± 7.07 | 65.00 ± 7.07 | 50.00 ± 0.00 |" in text
    main_name = "ode-ipm-selfpaced"  # the main ODE variant has one name in every table and the figure
    assert "ode-ipm |" not in text and "| ode |" not in text and text.count(main_name) >= 3
    assert (tmp_path / "auc_vs_c_d.png").stat().st_size > 1000
    with pytest.raises(ConfigError, match="no results.parquet in"):
        write_report(tmp_path / "empty")


def test_cli_runs_a_grid_on_ray_and_resumes(ray_session, tmp_path, capsys):
    out = tmp_path / "pu"
    argv = ["pu", "--dataset", "titanic", "--c", "0.2", "--methods", "ode,upu", "--reps", "2",
            "--baseline-configs", "3", "--schedule", "sh", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    first = pd.read_parquet(out / "results.parquet")
    assert len(first) == 4 and set(first["variant"]) == {"ode-ipm-sh", "upu"}
    assert first["test_auc"].between(0.5, 1.0).all() and (first["seconds"] > 0).all()
    assert first.loc[first["method"] == "ode", "rows_used"].gt(0).all() and first["prior"].between(0, 1).all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_cells"] == 4 and {r["column"] for r in summary["tables"]["table2_test_auc"]} == \
        {"ode-ipm", "upu"}
    assert (out / "index.md").is_file() and (out / "auc_vs_c_titanic.png").is_file()
    capsys.readouterr()
    assert main(argv) == 0                          # everything stored: nothing runs again, same numbers
    again = pd.read_parquet(out / "results.parquet")
    compared = ["variant", "rep", "test_auc", "config", "rows_used", "prior"]
    assert again[compared].to_json() == first[compared].to_json()

    # the same command into a fresh directory recomputes every cell: the same rows but for the clock's columns,
    # and the same summary tables; the timings are kept apart from the tables
    other = tmp_path / "pu_again"
    assert main([*argv[:-1], str(other)]) == 0
    fresh = pd.read_parquet(other / "results.parquet")
    assert set(TIMING_COLUMNS) <= set(fresh.columns)
    pd.testing.assert_frame_equal(fresh.drop(columns=list(TIMING_COLUMNS)), first.drop(columns=list(TIMING_COLUMNS)))
    summary_again = json.loads((other / "summary.json").read_text())
    assert summary_again["tables"] == summary["tables"] and summary_again["n_cells"] == summary["n_cells"]
    assert {"grid_seconds", "table6_seconds"} <= set(summary_again["timings"])


def test_a_cell_key_holds_only_the_settings_its_method_uses():
    small = PUGridSettings(datasets=("titanic",), cs=(0.1,), methods=("ode", "upu"), n_reps=1)
    grown = PUGridSettings(datasets=("titanic", "chess"), cs=(0.1, 0.2), methods=("ode", "upu", "supervised"),
                           n_reps=2, baseline_configs=5, supervised_trials=3)
    keys = {c.variant: c.key for c in build_grid(small)}
    again = {c.variant: c.key for c in build_grid(grown) if (c.dataset, c.c, c.rep) == ("titanic", 0.1, 0)}
    assert again["ode-ipm-selfpaced"] == keys["ode-ipm-selfpaced"]   # ODE does not use baseline settings
    assert again["upu"] != keys["upu"]                                # the thinned baseline is another cell
    budget = PUGridSettings(datasets=("titanic",), cs=(0.1,), methods=("ode",), n_reps=1, budget_samples=5000)
    assert build_grid(budget)[0].key != keys["ode-ipm-selfpaced"]
    oracle = PUGridSettings(datasets=("titanic",), cs=(0.1,), methods=("ode",), n_reps=1, prior="true")
    assert build_grid(oracle)[0].key != keys["ode-ipm-selfpaced"]
    with pytest.raises(ConfigError, match=r"unknown prior source 'oracle'; known: \['tice', 'true'\]"):
        PUGridSettings(prior="oracle")
