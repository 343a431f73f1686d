"""``load_results(OUT)``: each workflow's run as flat tables, and the one console summary format.

One tiny real run per workflow through ``main()`` (RFMS on site actors, PU cells as Ray tasks,
CMOSB as Tune runs: conftest's ``cmosb_cli_run``), then the flat tables against the rows
``results.parquet`` stores, and the command's printed summary against the shared format.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

import raytune_fed
from raytune_fed.cli._main import main
from raytune_fed.errors import ConfigError
from raytune_fed.report import Results, format_summary_table
from raytune_fed.workflows import load_results


def _scalar(value) -> bool:
    if value is None or isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return True
    return isinstance(value, str) and not value.lstrip().startswith(("{", "["))  # no JSON text


def assert_flat(frame: pd.DataFrame) -> None:
    """Every cell a scalar: no lists, arrays, dicts or JSON strings."""
    for column in frame.columns:
        bad = [v for v in frame[column] if not _scalar(v)]
        assert not bad, f"column {column!r} holds non-scalars, e.g. {bad[0]!r}"


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b or (a is None and isinstance(b, float) and math.isnan(b))


def summary_lines(stdout: str, title: str) -> list[list[str]]:
    """The summary table the command printed after ``title``: its header and rows, split on runs of spaces."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    table = []
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith(("report:", "results:", "wins")):
            break
        table.append(re.split(r"\s{2,}", line.strip()))
    return table


# -- the console format -----------------------------------------------------------------------------------------

def test_one_value_shows_a_dash_for_sd_and_no_value_a_dash_for_the_mean():
    rows = [{"method": "lso", "mean": 0.5, "sd": 0.25, "n": 2}, {"method": "fmo", "mean": 0.75, "sd": None, "n": 1},
            {"method": "rand_mo", "mean": None, "sd": float("nan"), "n": 0, "failed": 2}]
    text = format_summary_table("hypervolume", rows, ("method",), digits=2, extra={"failed": "failed"})
    lines = text.splitlines()
    assert lines[0] == "hypervolume"
    assert [line.split() for line in lines[1:]] == [["method", "mean", "sd", "n", "failed"],
                                                   ["lso", "0.50", "0.25", "2"], ["fmo", "0.75", "-", "1"],
                                                   ["rand_mo", "-", "-", "0", "2"]]
    assert "nan" not in text.lower() and len({len(line) for line in lines[1:]}) == 1  # aligned columns


def test_results_name_their_tables_and_refuse_an_unknown_one():
    results = Results("rfms", pd.DataFrame({"a": [1]}), {"selected": pd.DataFrame({"b": [2]})})
    assert results["trials"] is results.trials and results["selected"] is results.tables["selected"]
    with pytest.raises(KeyError, match=r"no table 'lockbox' in these rfms results; known: \['trials', 'selected'\]"):
        results["lockbox"]


def _missing(d):
    return d / "missing"


def _a_file(d):
    (d / "x.txt").write_text("x")
    return d / "x.txt"


def _foreign(d):
    pd.DataFrame({"loss": [0.1]}).to_parquet(d / "results.parquet")
    return d


def _garbage(d):
    (d / "results.parquet").write_bytes(b"PAR1 not parquet")
    return d / "results.parquet"


@pytest.mark.parametrize("make, message", [
    (_missing, "no results.parquet in .*missing: run a grid"),
    (_a_file, r"no results.parquet in .*x.txt"),
    (_foreign, r"results.parquet was not written by rfms, pu or cmosb: its columns \['loss'\] match none of them"),
    (_garbage, r"cannot read .*results.parquet \(damaged or not a results file\)"),
])
def test_bad_paths_are_one_clear_error(tmp_path, make, message):
    with pytest.raises(ConfigError, match=message):
        load_results(make(tmp_path))


def test_rfms_long_tables_follow_the_stored_lists_and_json():
    from raytune_fed.workflows.rfms import flat_results

    row = {"experiment": "e1", "method": "fmo", "hypervolume": 0.5, "n_selected": 2, "curators": np.array(["b", "c"]),
           "unit_n_ledger_queries": np.array([7, 8]), "openbox_outbag": np.array([0.1, 0.2]),
           "curator_outbag": np.array([0.3, np.nan]), "lockbox_loss": np.array([0.4, np.nan]),
           "selected": json.dumps([{"C": 1.0, "gamma": 0.1}, {"C": 2.0, "gamma": 0.2}]),
           "refusals": json.dumps({"queries": {"b": {"guard": 2}}, "withheld_finals": {"a": 1}}),
           "settings": json.dumps({"n_init": 3, "methods": ["fmo", "lso"], "target": None})}
    lso = {**row, "method": "lso", "n_selected": 0, "selected": "[]", "openbox_outbag": np.array([]),
           "curator_outbag": np.array([]), "lockbox_loss": np.array([]), "refusals": '{"queries": {}}'}
    results = flat_results(pd.DataFrame([row, lso]))
    assert results.trials.columns.tolist() == ["experiment", "method", "hypervolume", "n_selected",
                                               "settings.n_init", "settings.methods", "settings.target"]
    assert results.trials["settings.methods"].tolist() == ["fmo,lso"] * 2
    selected = results.tables["selected"]
    assert selected[["method", "model", "config.C", "config.gamma", "openbox_outbag"]].values.tolist() == [
        ["fmo", 0, 1.0, 0.1, 0.1], ["fmo", 1, 2.0, 0.2, 0.2]]
    assert np.isnan(selected["lockbox_loss"].iloc[1]) and selected["curator_outbag"].iloc[0] == 0.3
    assert results.tables["curators"].values.tolist() == [["e1", "b", 7], ["e1", "c", 8]]
    assert results.tables["refusals"][["method", "site", "kind", "n"]].values.tolist() == [
        ["fmo", "b", "query", 2], ["fmo", "a", "final", 1]]
    for frame in (results.trials, *results.tables.values()):
        assert_flat(frame)


# -- RFMS: one experiment x three methods on site actors ---------------------------------------------------------

@pytest.fixture(scope="module")
def rfms_run(ray_session, tmp_path_factory):
    import contextlib
    import io

    out = tmp_path_factory.mktemp("load_rfms") / "run"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["rfms", "--dataset", "geo5_sim", "--learners", "elastic_net", "--methods", "lso,fmo,rand_mo",
                     "--pairs", "1", "--reps", "1", "--n-init", "3", "--n-iter", "2", "--n-folds", "3", "--no-report",
                     "--out", str(out)])
    assert code == 0
    return out, stdout.getvalue()


def test_rfms_trials_are_flat_and_the_selected_models_a_long_table(rfms_run):
    out, _ = rfms_run
    stored = pd.read_parquet(out / "results.parquet")
    results = raytune_fed.load_results(out)       # the package's own name for it, a directory
    assert results.workflow == "rfms" and set(results.tables) == {"selected", "curators", "refusals"}
    trials, selected, curators = results.trials, results.tables["selected"], results.tables["curators"]
    for frame in (trials, *results.tables.values()):
        assert_flat(frame)
    assert len(trials) == len(stored) == 3 and list(trials["method"]) == list(stored["method"])
    settings = json.loads(stored["settings"].iloc[0])
    assert trials["settings.n_init"].tolist() == [3] * 3 and trials["settings.methods"].iloc[0] == "lso,fmo,rand_mo"
    assert set(settings) == {c.removeprefix("settings.") for c in trials if c.startswith("settings.")}
    for column in ("hypervolume", "n_selected", "n_curator_queries", "openbox", "lockbox", "replication", "seconds"):
        assert trials[column].tolist() == stored[column].tolist(), column

    # one row per selected model, its configuration and losses those the stored row lists
    assert len(selected) == stored["n_selected"].sum()
    for _, row in stored.iterrows():
        mine = selected[(selected["experiment"] == row["experiment"]) & (selected["method"] == row["method"])]
        assert mine["model"].tolist() == list(range(row["n_selected"]))
        configs = json.loads(row["selected"])
        assert [{k: r[f"config.{k}"] for k in c} for c, (_, r) in zip(configs, mine.iterrows())] == configs
        for name in ("openbox_outbag", "curator_outbag", "lockbox_loss"):
            assert all(same(a, float(b)) for a, b in zip(mine[name], row[name])), name
    for _, row in stored.iterrows():   # what the sites refused: the stored JSON, one row per site and code
        mine = results.tables["refusals"].query("experiment == @row.experiment and method == @row.method")
        told = json.loads(row["refusals"])
        assert {(r.site, r.code): r.n for r in mine.itertuples() if r.kind == "query"} == \
            {(site, code): n for site, codes in told["queries"].items() for code, n in codes.items()}
        assert {r.site: r.n for r in mine.itertuples() if r.kind == "final"} == told["withheld_finals"]
    first = stored.iloc[0]
    assert curators["curator"].tolist() == list(first["curators"])
    assert curators["n_ledger_queries"].tolist() == list(first["unit_n_ledger_queries"])
    assert load_results(out / "results.parquet").trials.equals(trials)   # the file itself names the run too


def test_rfms_prints_its_summary_in_the_shared_format(rfms_run):
    _, stdout = rfms_run
    table = summary_lines(stdout, "hypervolume")
    assert table[0] == ["learner", "method", "mean", "sd", "n"]
    assert [(r[1], r[3], r[4]) for r in table[1:]] == [("lso", "-", "1"), ("fmo", "-", "1"), ("rand_mo", "-", "1")]


# -- PU: ODE and uPU, one replication, cells as Ray tasks ---------------------------------------------------------

@pytest.fixture(scope="module")
def pu_run(ray_session, tmp_path_factory):
    import contextlib
    import io

    out = tmp_path_factory.mktemp("load_pu") / "run"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["pu", "--dataset", "titanic", "--c", "0.2", "--methods", "ode,upu", "--reps", "1",
                     "--baseline-configs", "3", "--schedule", "sh", "--no-report", "--out", str(out)])
    assert code == 0
    return out, stdout.getvalue()


def test_pu_trials_spread_the_selected_configuration_into_columns(pu_run):
    out, _ = pu_run
    stored = pd.read_parquet(out / "results.parquet")
    results = load_results(out)
    assert results.workflow == "pu" and dict(results.tables) == {}
    trials = results.trials
    assert_flat(trials)
    assert len(trials) == len(stored) == 2 and set(trials["variant"]) == {"ode-ipm-sh", "upu"}
    assert "config" not in trials
    for (_, mine), (_, row) in zip(trials.iterrows(), stored.iterrows()):
        config = json.loads(row["config"])
        assert config and {k: mine[f"config.{k}"] for k in config} == config
        for column in ("variant", "rep", "test_auc", "rows_used", "prior", "true_prior", "seconds"):
            assert same(mine[column], row[column]), column


def test_pu_prints_its_summary_in_the_shared_format_without_nan(pu_run):
    out, stdout = pu_run
    table = summary_lines(stdout, "test AUC (%)")
    stored = pd.read_parquet(out / "results.parquet").set_index("variant")
    assert table[0] == ["dataset", "c", "variant", "mean", "sd", "n"]
    assert [(r[2], r[4], r[5]) for r in table[1:]] == [("ode-ipm-sh", "-", "1"), ("upu", "-", "1")]
    assert [float(r[3]) for r in table[1:]] == [round(100 * stored.loc[v, "test_auc"], 2)
                                                for v in ("ode-ipm-sh", "upu")]
    assert "nan" not in stdout.lower()


# -- CMOSB: conftest's one tiny run of every method ----------------------------------------------------------------

def test_cmosb_trials_name_the_hyperparameters_as_config_columns(cmosb_cli_run):
    from raytune_fed.workflows.cmosb import OBJECTIVES, PARAMETERS

    run = cmosb_cli_run
    assert run.code == 0, run.stderr
    stored = pd.read_parquet(run.out / "results.parquet")
    results = load_results(run.out)
    assert results.workflow == "cmosb" and dict(results.tables) == {}
    trials = results.trials
    assert_flat(trials)
    assert len(trials) == len(stored) == 10   # cmosb 2, es 4 (one --point), gs 1, bo 3 x 1
    assert not set(PARAMETERS) & set(trials.columns)
    for name in PARAMETERS:
        assert trials[f"config.{name}"].tolist() == stored[name].tolist(), name
    for name in (*OBJECTIVES, "method", "run", "preset", "encryptions"):
        assert trials[name].tolist() == stored[name].tolist(), name


def test_cmosb_prints_its_summary_in_the_shared_format(cmosb_cli_run):
    from raytune_fed.workflows.cmosb import summarize

    run = cmosb_cli_run
    table = summary_lines(run.stdout, "hypervolume on normalised objectives")
    methods = summarize(run.frame, {"privacy_leakage": ("<=", 0.9)})["datasets"]["synthetic1"]["methods"]
    labels = {"cmosb": "CMOSB", "es": "ES", "gs": "GS", "bo": "BO"}
    assert table[0] == ["dataset", "method", "mean", "sd", "n", "evaluated", "feasible", "on the front"]
    assert sorted(r[1] for r in table[1:]) == sorted(labels.values())
    for method, m in methods.items():
        printed = next(r for r in table[1:] if r[1] == labels[method])
        assert printed[2:] == [f"{m['hypervolume']:.3f}", "-", "1", str(m["n_evaluated"]), str(m["n_feasible"]),
                               str(len(m["front"]))]
