"""ODE and the baselines on real PU splits, in one process: budgets, determinism, every method, bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest

from raytune_fed.algorithms.schedules import SCHEDULES
from raytune_fed.data import load_dataset
from raytune_fed.errors import ConfigError
from raytune_fed.simulation import pu_dataset, pu_split
from raytune_fed.workflows.pu import (
    METHOD_NAMES,
    ODESettings,
    check_methods,
    configuration_set,
    nested_order,
    run_method,
    run_ode,
)


@pytest.fixture(scope="module")
def split():
    data = pu_dataset(load_dataset("titanic"))
    return pu_split(data.X, data.y, c=0.2, seed=0, name="titanic")


CONFIGS = configuration_set(["upu"])[::10]          # 10 configurations: a small Omega for fast tests


def test_nested_order_spreads_labelled_rows_over_every_prefix():
    s = np.r_[np.ones(30), np.zeros(270)].astype(int)
    order = nested_order(s, 5, "proportional")
    assert sorted(order.tolist()) == list(range(300))
    assert s[order[0]] == 1 and s[order[1]] == 0
    for r in (2, 10, 50, 123, 300):
        assert abs(s[order[:r]].sum() - r * 0.1) <= 1.5
    assert np.array_equal(order, nested_order(s, 5, "proportional"))
    assert not np.array_equal(order, nested_order(s, 6, "proportional"))


def test_balanced_order_alternates_until_the_labelled_rows_run_out():
    s = np.r_[np.ones(30), np.zeros(270)].astype(int)
    order = nested_order(s, 5)                              # the default
    assert sorted(order.tolist()) == list(range(300))
    assert s[order[:60]].tolist() == [1, 0] * 30 and s[order[60:]].sum() == 0
    for r in (2, 7, 33, 59, 61, 200):
        assert s[order[:r]].sum() == min((r + 1) // 2, 30)
    uniform = nested_order(s, 5, "uniform")
    assert sorted(uniform.tolist()) == list(range(300)) and not np.array_equal(uniform, order)
    with pytest.raises(ConfigError, match=r"unknown rung sampling 'random'; known: \['proportional', 'balanced'"):
        nested_order(s, 5, "random")


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_ode_never_feeds_more_rows_than_the_budget(split, schedule):
    budget = 600
    result = run_ode(split, ODESettings(schedule=schedule, budget_samples=budget), prior=0.3, seed=1,
                     configs=CONFIGS)
    assert result.rows_fed == result.rows_used <= budget
    assert result.config in CONFIGS and 0.5 < result.test_auc <= 1.0
    assert result.rows_final == split.n_train


def test_ode_default_budget_is_n_and_the_choice_is_reproducible(split):
    a = run_ode(split, ODESettings(), prior=0.3, seed=2, configs=CONFIGS)
    b = run_ode(split, ODESettings(), prior=0.3, seed=2, configs=CONFIGS)
    assert a.config == b.config and a.trace == b.trace and a.rows_used <= split.n_pu
    auc_run = run_ode(split, ODESettings(evaluator="auc", control_variate=False), prior=0.3, seed=2, configs=CONFIGS)
    assert auc_run.rows_used == a.rows_used


def test_every_method_runs_on_a_split(split):
    for name in METHOD_NAMES:
        result = run_method(name, split, seed=3, ode=ODESettings(), supervised_trials=3, max_configs=4)
        assert result.method == name and 0.0 <= result.test_auc <= 1.0 and result.seconds > 0
        assert (result.prior is not None) == (name in ("ode", "upu", "nnpu"))


def test_the_control_variate_is_used_only_where_its_conditions_hold(split):
    from raytune_fed.workflows.pu._ode import ValidationCriterion

    n_val = int(split.s_val.sum())
    assert min(n_val, int(split.s_train.sum())) >= 6
    on = ValidationCriterion(split, ODESettings(cv_max_normaliser_se=1.0), seed=0)
    assert on.uses_control_variate and on.ratio.shape == (n_val,)
    assert not ValidationCriterion(split, ODESettings(cv_min_rows=n_val + 1), seed=0).uses_control_variate
    assert not ValidationCriterion(split, ODESettings(cv_max_normaliser_se=0.0), seed=0).uses_control_variate
    assert not ValidationCriterion(split, ODESettings(control_variate=False), seed=0).uses_control_variate


def test_the_odds_reading_uses_the_classifier_odds_without_the_normaliser(split):
    from raytune_fed.workflows.pu._ode import ValidationCriterion

    shipped = ValidationCriterion(split, ODESettings(cv_max_normaliser_se=1.0), seed=0)
    odds = ValidationCriterion(split, ODESettings(cv_reading="odds"), seed=0)
    assert odds.uses_control_variate and not odds.shrink and odds.min_rows == 2
    # the same classifier: the two ratios differ by the normaliser alone, one factor for every row
    factor = odds.ratio / shipped.ratio
    assert np.allclose(factor, factor[0]) and not np.isclose(factor[0], 1.0)


def test_an_ode_search_where_every_fit_fails_selects_nothing_and_says_why(split):
    import dataclasses

    from raytune_fed.errors import NoSelectionError

    flat = dataclasses.replace(split, X_train=np.zeros_like(split.X_train))   # every feature constant: no fit
    with pytest.raises(NoSelectionError, match=r"every job failed \(\d+ discarded\)"):
        run_ode(flat, ODESettings(), prior=0.3, seed=0, configs=CONFIGS)
    result = run_method("ode", flat, seed=0, prior="true")
    assert np.isnan(result.test_auc) and result.config == {} and result.rows_used == 0
    assert result.no_selection.startswith("every job failed") and result.prior == flat.unlabelled_prior()
    assert run_method("ode", split, seed=0, prior="true").no_selection is None


def test_a_wsvm_that_cannot_fit_names_no_model_and_says_why():
    from sklearn.preprocessing import StandardScaler

    from raytune_fed.errors import NoModelError
    from raytune_fed.models.pu import WSVM
    from raytune_fed.random import derive, seed_int
    from raytune_fed.workflows.pu._grid import PUCell, PUGridSettings, cell_split

    # titanic at c = 0.01, replication 7 of the benchmark: 4 labelled training rows; Elkan-Noto's c is far below
    # the truth, so every unlabelled row gets weight 1 and no negative is left
    cell = PUCell("titanic", 0.01, 7, "wsvm", None, None, None, settings=PUGridSettings(datasets=("titanic",)))
    small = cell_split(cell)
    X = StandardScaler().fit_transform(small.X_train)
    with pytest.raises(NoModelError, match=r"with c estimated at 0\.00\d+ every unlabelled row is weighted fully "):
        WSVM(random_state=seed_int(derive(cell.seed(), "wsvm"))).fit(X, small.s_train)
    result = run_method("wsvm", small, seed=cell.seed())
    assert np.isnan(result.test_auc) and result.config == {} and result.rows_used == 0
    assert "no negative is left to train on" in result.no_selection


BAD_INPUT = [
    (lambda s: ODESettings(evaluator="f1"), r"unknown evaluator 'f1'"),
    (lambda s: ODESettings(schedule="cosine"), r"unknown schedule 'cosine'"),
    (lambda s: ODESettings(learners=("svm",)), r"unknown learner 'svm'; known learners: \['nnpu', 'upu'\]"),
    (lambda s: ODESettings(learners=()), r"at least one PU learner"),
    (lambda s: ODESettings(rung_sampling="stratified"), r"unknown rung sampling 'stratified'"),
    (lambda s: ODESettings(budget_factor=0), r"budget_factor must be > 0, got 0"),
    (lambda s: ODESettings(cv_min_rows=1), r"cv_min_rows must be an integer >= 2, got 1"),
    (lambda s: ODESettings(cv_reading="paper"), r"unknown control-variate reading 'paper'; known: \['normalised', "
                                                r"'odds'\]"),
    (lambda s: check_methods(["ode", "magic"]), r"unknown method 'magic'; known methods: \['ode', 'upu', 'nnpu', "
                                                r"'wsvm', 'supervised'\]"),
    (lambda s: check_methods(["ode", "ode"]), r"methods must be distinct"),
    (lambda s: check_methods([]), r"no methods given"),
    (lambda s: run_ode(s, ODESettings(budget_samples=50), prior=0.3, seed=0, configs=CONFIGS),
     r"budget_samples=50 gives 1 rows per configuration in the first round \(10 configurations x 4 rounds\); "
     r"need budget_samples >= 80 for 2 row\(s\) each"),
    (lambda s: run_ode(s, ODESettings(budget_seconds=-1.0), prior=0.3, seed=0, configs=CONFIGS),
     r"budget_seconds must be a finite number >= 0.0, got -1.0"),
    (lambda s: run_method("upu", s, seed=0, max_configs=0), r"max_configs must be an integer >= 1 or None, got 0"),
]


@pytest.mark.parametrize("call, message", BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(split, call, message):
    with pytest.raises(ConfigError, match=message):
        call(split)


def test_tune_path_and_in_process_core_pick_the_same_configuration(ray_session, split, tmp_path):
    from raytune_fed.workflows.pu import run_ode_tune

    settings = ODESettings(schedule="sh", budget_samples=2 * 4 * len(CONFIGS[:6]))
    core = run_ode(split, settings, prior=0.3, seed=5, configs=CONFIGS[:6])
    tuned = run_ode_tune(split, settings, prior=0.3, seed=5, storage_path=str(tmp_path), configs=CONFIGS[:6])
    assert tuned.config == core.config and tuned.test_auc == core.test_auc
    assert tuned.rows_used == core.rows_used <= settings.budget_samples
    # every rung report is kept in the driver: one per trial and rung it ran, as many as the core fitted
    assert len(tuned.reports) == tuned.n_trial_rungs == len(core.trace)
    assert {r["config_id"] for r in tuned.reports} == set(range(6))
    assert sum(r["rung"] == 0 for r in tuned.reports) == 6
    # Tune's file loggers wrote nothing, and the switch stayed inside this run (no process-wide variable)
    written = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    assert not written & {"progress.csv", "result.json"} and not any(n.startswith("events.out") for n in written)
    assert "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS" not in os.environ
