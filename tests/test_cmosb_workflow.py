"""The CMOSB workflow's pure parts: method plans, the grid, settings checks, Table IV's hypervolume."""

from __future__ import annotations

import pandas as pd
import pytest

from raytune_fed.errors import ConfigError, DatasetError
from raytune_fed.workflows.cmosb import (
    ES_PRESETS,
    PARAMETERS,
    CMOSBSettings,
    grid_values,
    search_space,
    summarize,
)
from raytune_fed.workflows.cmosb._methods import es_config, trial_params
from raytune_fed.workflows.cmosb._run import check_point, plan


def test_es_presets_are_the_papers():
    assert {n: (c["n_federated_trees"], c["max_depth"], c["learning_rate"], c["subsample"])
            for n, c in ES_PRESETS.items()} == {"fate": (5, 3, 0.3, 0.8), "vf2boost": (20, 7, 0.1, 0.8),
                                                 "average": (10, 5, 0.3, 0.8)}
    assert all(es_config(n)["n_local_trees"] == 1 and es_config(n)["purity_threshold"] == 1.0 for n in ES_PRESETS)
    assert trial_params({"es": {"name": "fate", **es_config("fate")}}) == es_config("fate")


def test_grid_takes_the_midpoints_of_equal_slices():
    assert grid_values(search_space(binary=True), 2) == {
        "n_federated_trees": [5, 12], "n_local_trees": [4, 12], "max_depth": [3, 6], "subsample": [0.325, 0.775],
        "purity_threshold": [0.775, 0.925], "learning_rate": [0.0825, 0.2275]}
    assert grid_values(search_space(binary=False), 1)["purity_threshold"] == [0.55]


def test_plan_lists_one_tune_run_per_method_and_one_per_bo_objective():
    runs = plan(CMOSBSettings(population=4, generations=3, max_leakage=0.5), binary=True)
    assert [r.name for r in runs] == ["cmosb", "es", "gs", "bo_utility_loss", "bo_training_cost",
                                      "bo_privacy_leakage"]
    assert (runs[0].num_samples, runs[0].max_concurrent, runs[3].num_samples) == (12, 4, 4)
    searcher = runs[0].make_searcher()
    assert searcher._options["constraints"] == [["privacy_leakage", "<=", 0.5]]
    assert searcher._options["constraint_handling"] == "penalty"
    point = {"n_f": 2, "n_l": 0, "d": 2, "r": 1.0, "theta_p": 0.9, "eta": 0.1}
    runs = plan(CMOSBSettings(baselines=("gs",), points=(point,)), binary=True)
    assert [r.name for r in runs] == ["cmosb", "gs", "es"]
    assert [c["name"] for c in runs[-1].param_space["es"]["grid_search"]] == ["point0"]


GOOD_POINT = {"n_f": 5, "n_l": 1, "d": 3, "r": 0.8, "theta_p": 1.0, "eta": 0.3}


@pytest.mark.parametrize("change, message", [
    ({"d": 0}, r"max_depth must be an integer in \[1, 12\], got 0"),
    ({"r": 1.5}, r"subsample must be in \(0, 1\], got 1.5"),
    ({"theta_p": 0.0}, r"purity_threshold must be in \(0, 1\], got 0.0"),
    ({"theta_p": 1.2}, r"purity_threshold must be in \(0, 1\], got 1.2"),
    ({"n_f": 0}, r"n_federated_trees must be an integer >= 1, got 0"),
    ({"depth": 3}, r"unknown \['depth'\]"),
])
def test_bad_points_name_the_parameter_and_value(change, message):
    with pytest.raises(ConfigError, match=message):
        check_point({**GOOD_POINT, **change})


@pytest.mark.parametrize("kwargs, error, message", [
    ({"dataset": "nope"}, DatasetError, r"unknown CMOSB dataset 'nope'; known: \['default_credit', 'sensorless'"),
    ({"he": "paillier"}, ConfigError, r"unknown HE scheme 'paillier'"),
    ({"population": 1}, ConfigError, r"population must be an integer in \[2, \d+\], got 1"),
    ({"generations": 0}, ConfigError, r"generations must be an integer in \[1, \d+\], got 0"),
    ({"baselines": ("es", "random")}, ConfigError, r"unknown baselines \['random'\]"),
    ({"max_cost": -1.0}, ConfigError, r"max_cost must be a finite number of seconds > 0, got -1.0"),
    ({"max_leakage": 1.5}, ConfigError, r"max_leakage must be in \(0, 1\], got 1.5"),
    ({"op_times": None}, ConfigError, r"op_times must be one of \['reference', 'calibrate'\] .*got None"),
    ({"op_times": "fast"}, ConfigError, r"op_times must be one of .*got 'fast'"),
])
def test_bad_settings_raise_one_line_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        CMOSBSettings(**kwargs).check()


def _frame(points, methods, scale=10.0):
    rows = []
    for method, (u, c, p) in zip(methods, points):
        rows.append({"dataset": "d", "method": method, "run": method, "utility_loss": u,
                     "training_cost": c * scale, "privacy_leakage": p, **{k: 1 for k in PARAMETERS}})
    return pd.DataFrame(rows)


def test_hypervolume_is_taken_on_objectives_normalised_per_dataset():
    frame = _frame([(0.0, 0.0, 0.5), (0.5, 0.5, 0.0), (1.0, 1.0, 1.0)], ["cmosb", "cmosb", "es"])
    summary = summarize(frame)
    methods = summary["datasets"]["d"]["methods"]
    # boxes 1 x 1 x 0.5 and 0.5 x 0.5 x 1 overlap in 0.5 x 0.5 x 0.5
    assert methods["cmosb"]["hypervolume"] == pytest.approx(0.625)
    assert methods["es"]["hypervolume"] == 0.0
    assert summary["datasets"]["d"]["bounds"]["training_cost"] == [0.0, 10.0]
    assert len(methods["cmosb"]["front"]) == 2


def test_constraints_keep_only_feasible_rows_on_the_front():
    frame = _frame([(0.0, 0.0, 0.5), (0.5, 0.5, 0.0), (1.0, 1.0, 1.0)], ["cmosb", "cmosb", "es"])
    methods = summarize(frame, {"privacy_leakage": ("<=", 0.4)})["datasets"]["d"]["methods"]
    assert methods["cmosb"]["n_feasible"] == 1 and methods["cmosb"]["hypervolume"] == pytest.approx(0.25)
    assert [r["privacy_leakage"] for r in methods["cmosb"]["front"]] == [0.0]
    assert methods["es"]["n_feasible"] == 0 and methods["es"]["front"] == []



def test_cmosb_hypervolume_grows_by_generation_over_feasible_rows():
    frame = _frame([(1.0, 1.0, 1.0), (0.5, 0.5, 0.0), (0.0, 0.0, 0.5), (0.0, 0.0, 0.0)],
                   ["es", "cmosb", "cmosb", "cmosb"])
    frame["generation"] = [-1, 0, 1, 1]
    assert summarize(frame)["datasets"]["d"]["cmosb_hypervolume_by_generation"] == pytest.approx([0.25, 1.0])
    constrained = summarize(frame, {"privacy_leakage": ("<=", 0.4)})["datasets"]["d"]
    assert constrained["cmosb_hypervolume_by_generation"] == pytest.approx([0.25, 1.0])
    frame.loc[3, "privacy_leakage"] = 0.45  # the last generation's best point is now infeasible
    constrained = summarize(frame, {"privacy_leakage": ("<=", 0.4)})["datasets"]["d"]
    assert constrained["cmosb_hypervolume_by_generation"] == pytest.approx([0.25, 0.25])


def test_hypervolume_by_generation_is_zero_until_a_feasible_row_exists():
    from raytune_fed.workflows.cmosb import hypervolume_by_generation

    frame = _frame([(0.5, 0.5, 0.9), (0.5, 0.5, 0.0), (0.0, 0.0, 0.0)], ["cmosb"] * 3, scale=1.0)
    frame["generation"] = [0, 1, 2]
    ok = frame["privacy_leakage"].to_numpy() <= 0.4
    assert hypervolume_by_generation(frame, ok) == pytest.approx([0.0, 0.25, 1.0])
    assert hypervolume_by_generation(frame.iloc[:0], ok[:0]) == []
