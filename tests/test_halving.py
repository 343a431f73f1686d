"""ODE's halving: schedule formulas, rung tables against hand-written ones, the ask/tell core, budgets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.algorithms.schedules import SCHEDULES, n_kept, n_rounds, pruning_parameter, rung_table
from raytune_fed.errors import ConfigError

# ------------------------------------------------------------------ schedules and rung tables

# K = 10 configurations, B = 300 rows, 200 training rows, eta0 = 0.9, mu = 0.45:
# T' = 3 (9 -> 4.05 -> 1.82 -> 0.82 <= 1), T = 4; r_t = floor(300 / (4 n_t)).
# sh:        discard floor(n/2).
# log:       eta = (1 - e^{-5t/4}) 0.9 + 0.1: 0.1, 0.742, 0.926      -> drop 1, 6, 2.
# exp:       eta = e^{5(t/4 - 1)} 0.9 + 0.1: 0.106, 0.121, 0.174, 0.358 -> drop 1, 1, 1, 2 (7 left: best of last).
# linear:    eta = 0.9 t/4 + 0.1: 0.1, 0.325, 0.55, 0.775            -> drop 1, 2, 3, 3.
# selfpaced: keep ceil(0.9 0.45^t 10) = 9, 5 (4.05), 2 (1.82), 1 (0.82).
EXPECTED_TABLES = {
    "sh": [(0, 10, 7, 5), (1, 5, 15, 3), (2, 3, 25, 2), (3, 2, 37, 1)],
    "log": [(0, 10, 7, 9), (1, 9, 8, 3), (2, 3, 25, 1)],
    "exp": [(0, 10, 7, 9), (1, 9, 8, 8), (2, 8, 9, 7), (3, 7, 10, 5)],
    "linear": [(0, 10, 7, 9), (1, 9, 8, 7), (2, 7, 10, 4), (3, 4, 18, 1)],
    "selfpaced": [(0, 10, 7, 9), (1, 9, 8, 5), (2, 5, 15, 2), (3, 2, 37, 1)],
}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_rung_table_matches_the_hand_written_one(schedule):
    table = rung_table(10, n_rows=200, budget_samples=300, schedule=schedule)
    assert table.n_rounds == 4
    assert table.as_rows() == EXPECTED_TABLES[schedule]
    assert table.total_rows == sum(n * r for _, n, r, _ in EXPECTED_TABLES[schedule]) <= 300


def test_pruning_parameters_follow_the_paper_formulas():
    k, big_t = 10, 4
    for t in range(big_t):
        x = t / big_t
        assert pruning_parameter("sh", t, big_t, k) == 0.5
        assert pruning_parameter("log", t, big_t, k) == pytest.approx((1 - math.exp(-5 * x)) * 0.9 + 0.1)
        assert pruning_parameter("exp", t, big_t, k) == pytest.approx(math.exp(5 * (x - 1)) * 0.9 + 0.1)
        assert pruning_parameter("linear", t, big_t, k) == pytest.approx(x * 0.9 + 0.1)
    for schedule in ("log", "linear"):
        assert pruning_parameter(schedule, 0, big_t, k) == pytest.approx(1 / k)   # one configuration dropped first
    with pytest.raises(ConfigError, match="selfpaced schedule keeps"):
        pruning_parameter("selfpaced", 0, big_t, k)


@pytest.mark.parametrize("k, eta0, mu, expected", [
    (10, 0.9, 0.45, 4), (100, 0.9, 0.45, 7), (2, 0.9, 0.45, 2), (100, 0.5, 0.5, 7), (64, 0.5, 0.5, 6),
    (1, 0.9, 0.45, 1),
])
def test_number_of_rounds_is_the_least_solution_plus_one(k, eta0, mu, expected):
    assert n_rounds(k, eta0=eta0, mu=mu) == expected
    t_prime = expected - 1
    assert eta0 * mu ** t_prime * k <= 1 + 1e-9 and (t_prime == 0 or eta0 * mu ** (t_prime - 1) * k > 1)


def test_selfpaced_leaves_exactly_one_configuration():
    for k in (2, 3, 7, 10, 33, 100, 600):
        table = rung_table(k, n_rows=10**6, schedule="selfpaced")
        assert table.rungs[-1].n_kept == 1 and len(table.rungs) <= table.n_rounds


def test_every_round_drops_at_least_one_and_keeps_at_least_one():
    for schedule in SCHEDULES:
        for k in (2, 5, 17, 100):
            for rung in rung_table(k, n_rows=10**6, schedule=schedule).rungs:
                assert 1 <= rung.n_kept < rung.n_configs
    assert n_kept("exp", 3, 2, n_configs=100, n_total_rounds=7) == 1


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_rows_never_exceed_the_budget(schedule):
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(2, 300))
        big_t = n_rounds(k)
        budget = int(rng.integers(big_t * k, 40 * big_t * k))
        n_rows = int(rng.integers(1, 2 * budget))
        table = rung_table(k, n_rows=n_rows, budget_samples=budget, schedule=schedule)
        assert table.total_rows <= budget
        assert all(r.n_rows <= n_rows for r in table.rungs)
        assert [r.n_rows for r in table.rungs] == sorted(r.n_rows for r in table.rungs)


# ------------------------------------------------------------------ the ask/tell core

def _configs(k):
    return [{"x": i / k} for i in range(k)]


def _metric(job):
    return (job["x"] - 0.37) ** 2 + 1.0 / job["n_rows"]


def _drive(core, batch=1000, fail=()):
    """Run a core to the end, feeding ``batch`` jobs at a time; returns the jobs in issue order."""
    issued = []
    while not core.is_finished:
        jobs = core.ask(batch)
        assert jobs, "a core that is not finished must issue work when nothing is pending"
        issued.extend(jobs)
        ok = [j for j in jobs if j["config_id"] not in fail]
        if ok:
            core.tell(ok, [[_metric(j)] for j in ok])
        if len(ok) < len(jobs):
            core.discard([j for j in jobs if j["config_id"] in fail])
    return issued


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_rows_actually_used_match_the_table_and_the_budget(schedule, asynchronous):
    core = SuccessiveHalving(_configs(10), n_rows=200, budget_samples=300, schedule=schedule, seed=3,
                             asynchronous=asynchronous)
    jobs = _drive(core, batch=3)
    used = sum(j["n_rows"] for j in jobs)
    assert used == core.rows_used == core.table.total_rows <= 300
    per_rung = [sum(1 for j in jobs if j["rung"] == r.index) for r in core.table.rungs]
    assert per_rung == [r.n_configs for r in core.table.rungs]
    assert all(j["n_rows"] == core.table.rungs[j["rung"]].n_rows for j in jobs)


def test_synchronous_core_waits_for_the_whole_rung():
    core = SuccessiveHalving(_configs(10), n_rows=200, budget_samples=300, schedule="sh", seed=0)
    first = core.ask(10)
    assert {j["rung"] for j in first} == {0} and len(first) == 10
    core.tell(first[:9], [[_metric(j)] for j in first[:9]])
    assert core.ask(5) == []                                # one rung-0 job is still out
    core.tell(first[9:], [[_metric(first[9])]])
    second = core.ask(10)
    assert [j["rung"] for j in second] == [1] * 5
    best5 = sorted(range(10), key=lambda i: _metric({"x": i / 10, "n_rows": 7}))[:5]
    assert sorted(j["config_id"] for j in second) == sorted(best5)


def test_asynchronous_core_promotes_before_the_rung_is_complete():
    core = SuccessiveHalving(_configs(10), n_rows=200, budget_samples=300, schedule="sh", seed=0, asynchronous=True)
    jobs = core.ask(4)
    core.tell(jobs, [[_metric(j)] for j in jobs])           # 4 of 10 told, kept share 5/10 -> 2 promotions
    promoted = core.ask(2)
    assert [j["rung"] for j in promoted] == [1, 1]
    best2 = sorted((j["config_id"] for j in jobs), key=lambda i: abs(i / 10 - 0.37))[:2]
    assert {j["config_id"] for j in promoted} == set(best2)  # the two nearest 0.37 among those told
    assert core.ask(1)[0]["rung"] == 0                      # no third promotion yet: back to rung 0


def test_round_zero_order_is_drawn_from_the_seed():
    orders = {tuple(j["config_id"] for j in SuccessiveHalving(_configs(10), n_rows=200, seed=s).ask(10))
              for s in range(4)}
    assert len(orders) == 4 and all(sorted(o) == list(range(10)) for o in orders)
    again = SuccessiveHalving(_configs(10), n_rows=200, seed=2).ask(10)
    assert tuple(j["config_id"] for j in again) in orders


def test_selection_is_the_best_of_the_last_rung_and_failures_rank_last():
    core = SuccessiveHalving(_configs(10), n_rows=200, budget_samples=300, schedule="sh", seed=0)
    _drive(core, fail={3, 4})
    job, value = core.best()
    assert core.configuration(job["config_id"]) == {"x": 0.5}  # 0.3 and 0.4 (nearest 0.37) failed at rung 0
    assert job["rung"] == len(core.table.rungs) - 1 and job in core.configs
    assert value == min(v for i, t, _, v in core.results() if t == len(core.table.rungs) - 1)
    assert all(t == 0 for i, t, _, _ in core.results() if i in (3, 4))


def test_ties_are_broken_by_the_seed_not_the_order():
    winners = set()
    for seed in range(12):
        core = SuccessiveHalving(_configs(8), n_rows=500, budget_samples=500, schedule="sh", seed=seed)
        while not core.is_finished:
            jobs = core.ask(100)
            core.tell(jobs, [[1.0]] * len(jobs))             # every configuration scores the same
        winners.add(core.best_id()[0])
    assert len(winners) > 2
    again = [SuccessiveHalving(_configs(8), n_rows=500, budget_samples=500, schedule="sh", seed=5) for _ in range(2)]
    for core in again:
        _drive(core)
    assert again[0].results() == again[1].results()


def test_time_budget_stops_the_search_and_picks_from_the_highest_rung():
    core = SuccessiveHalving(_configs(10), n_rows=200, budget_samples=300, schedule="sh", seed=0, budget_seconds=12.5)
    jobs = core.ask(10)
    core.tell(jobs, [[_metric(j)] for j in jobs], seconds=[1.0] * 10)
    assert not core.is_finished
    jobs = core.ask(10)
    core.tell(jobs[:3], [[_metric(j)] for j in jobs[:3]], seconds=[1.0] * 3)
    assert core.is_finished and core.ask(5) == []
    i, _ = core.best_id()
    told = [i for i, t, _, _ in core.results() if t == 1]
    assert len(told) == 3 \
        and core.configuration(i) == _configs(10)[min(told, key=lambda i: _metric({"x": i / 10, "n_rows": 15}))]


def test_state_round_trip_continues_exactly():
    def run(split_at):
        core = SuccessiveHalving(_configs(12), n_rows=300, budget_samples=400, schedule="linear", seed=9,
                                 asynchronous=True)
        steps = 0
        while not core.is_finished:
            if steps == split_at:
                state = json.loads(json.dumps(core.get_state()))
                core = SuccessiveHalving(_configs(12), n_rows=300, budget_samples=400, schedule="linear", seed=9,
                                         asynchronous=True)
                core.set_state(state)
            jobs = core.ask(2)
            core.tell(jobs, [[_metric(j)] for j in jobs])
            steps += 1
        return core.results(), core.best()

    assert run(split_at=4) == run(split_at=-1)


# Reproducibility in another process, the JSON state round trip and the shared bad-input table
# are the contract suite's (tests/test_contracts.py runs it over SuccessiveHalving).


# ------------------------------------------------------------------ bad input

def _core(**kwargs):
    args = {"n_rows": 200, "budget_samples": 300, "seed": 0, **kwargs}
    return SuccessiveHalving(args.pop("configs", _configs(10)), **args)


def _told_twice():
    core = _core()
    jobs = core.ask(1)
    core.tell(jobs, [[1.0]])
    core.tell(jobs, [[1.0]])


BAD_INPUT = [
    (lambda: rung_table(10, n_rows=200, budget_samples=39), r"budget_samples=39 gives 0 rows per configuration in the "
                                                             r"first round \(10 configurations x 4 rounds\); need "
                                                             r"budget_samples >= 40"),
    (lambda: rung_table(10, n_rows=200, budget_samples=79, min_rows=2), r"gives 1 rows.*need budget_samples >= 80"),
    (lambda: _core(budget_seconds=-1.0), r"budget_seconds must be a finite number >= 0.0, got -1.0"),
    (lambda: _core(budget_seconds=0), r"budget_seconds must be > 0"),
    (lambda: _core(schedule="cosine"), r"unknown schedule 'cosine'; known schedules: \['sh', 'log', 'exp', 'linear', "
                                       r"'selfpaced'\]"),
    (lambda: _core(configs=_configs(1)), r"n_configs must be an integer >= 2, got 1"),
    (lambda: _core(configs=[{"rung": 1}, {"rung": 2}]), r"reserved keys \['rung'\]"),
    (lambda: _core(configs=[{"a": 1}, {"b": 2}]), r"every configuration needs the same keys: \['a'\] but also"),
    (lambda: _core(configs=[{}, {}]), r"configurations need at least one key"),
    (lambda: _core(eta0=0.0), r"eta0 must be in \(0, 1\], got 0.0"),
    (lambda: _core(mu=1.0), r"mu must be in \(0, 1\), got 1.0"),
    (lambda: _core(budget_samples=2.5), r"budget_samples must be an integer >= 1, got 2.5"),
    (lambda: _core(asynchronous="yes"), r"asynchronous must be True or False"),
    (lambda: _core().ask(0), r"n must be an integer >= 1, got 0"),
    (lambda: _core().tell([{"x": 0.0, "config_id": 0, "rung": 0, "n_rows": 7}], [[1.0]]),
     r"job \(config_id=0, rung=0\) was never issued"),
    (lambda: (lambda c: c.tell([{**c.ask(1)[0], "n_rows": 3}], [[1.0]]))(_core()), r"is not the one ask\(\) issued"),
    (lambda: _core().tell([{"x": 0.0}], [[1.0]]), r"needs the config_id, rung and n_rows that ask\(\) gave it"),
    (lambda: _core().tell([{"x": 0.05, "config_id": 0, "rung": 0, "n_rows": 7}], [[1.0]]),
     r"parameter 'x': 0.05 is not one of"),
    (_told_twice, r"job \(config_id=\d+, rung=0\) was already told"),
    (lambda: (lambda c: c.discard(c.ask(1) * 2))(_core()), r"the same job is told twice in one call"),
    (lambda: (lambda c: c.tell(c.ask(2), [[1.0]]))(_core()), r"Y must have shape \(2, 1\)"),
    (lambda: (lambda c: c.tell(c.ask(1), [[float("nan")]]))(_core()), r"Y must be finite"),
    (lambda: (lambda c: c.tell(c.ask(1), [[float("inf")]]))(_core()), r"Y must be finite"),
    (lambda: (lambda c: c.tell(c.ask(1), [[1.0]], seconds=[-2]))(_core()), r"seconds must be a finite number >= 0"),
    (lambda: (lambda c: c.tell(c.ask(1), [[1.0]], seconds=[1, 2]))(_core()), r"seconds needs one entry per job \(1\)"),
    (lambda: _core().best(), r"no results told yet"),
    (lambda: _core().configuration(10), r"config_id must be an integer in \[0, 9\], got 10"),
    (lambda: _core().set_state({"version": 99, "kind": "SuccessiveHalving"}), r"not a SuccessiveHalving state"),
    (lambda: _core().set_state({**_core().get_state(), "version": 1}),
     r"unsupported SuccessiveHalving state version 1"),
    (lambda: _core().set_state({**_core().get_state(), "settings": {}}), r"other settings"),
    (lambda: _core().set_state({**_core().get_state(), "core": {"members": [[0]]}}), r"malformed"),
]


@pytest.mark.parametrize("call, message", BAD_INPUT)
def test_bad_input_is_refused_with_a_clear_message(call, message):
    with pytest.raises(ConfigError, match=message):
        call()
