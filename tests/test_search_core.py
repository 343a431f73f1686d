"""Pure-logic tests of the GP-BO and ParEGO ask/tell cores (no Ray)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.metrics import pareto_mask
from raytune_fed.algorithms import GPMinimizer, ParEGO
from raytune_fed.space import Categorical, Float, Int, SearchSpace
from raytune_fed.algorithms._gp import fit_gp
from raytune_fed.algorithms.parego import (default_lattice_size, n_inner_lattice_rows,
                                       normalize_objectives, sample_lattice_weights, spread_weights,
                                       tchebycheff)

REPO = Path(__file__).resolve().parents[1]
BRANIN_MIN = 0.397887


def branin(c: dict) -> float:
    x1, x2 = c["x1"], c["x2"]
    b, cc, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + cc * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


BRANIN_SPACE = SearchSpace((Float("x1", -5.0, 10.0), Float("x2", 0.0, 15.0)))
UNIT3 = SearchSpace(tuple(Float(f"x{i}", 0.0, 1.0) for i in range(3)))
MIXED = SearchSpace((Float("lr", 1e-4, 1.0, log=True), Int("depth", 1, 6), Categorical("kind", ("a", "b", "c"))))


def zdt1(c: dict) -> list[float]:
    x = np.array([c[f"x{i}"] for i in range(3)])
    g = 1 + 9 * x[1:].sum() / 2
    return [float(x[0]), float(g * (1 - math.sqrt(x[0] / g)))]


def mixed_objective(c: dict) -> float:
    return (math.log10(c["lr"]) + 2) ** 2 + (c["depth"] - 4) ** 2 / 4 + {"a": 1.0, "b": 0.0, "c": 0.5}[c["kind"]]


def run_gp(opt: GPMinimizer, f, n: int) -> GPMinimizer:
    for _ in range(n):
        c = opt.ask()
        opt.tell(c, f(c))
    return opt


def run_parego(opt: ParEGO, f, n: int, batch: int = 1) -> ParEGO:
    for _ in range(n):
        for c in opt.ask(batch):
            opt.tell(c, f(c))
    return opt


def hypervolume_2d(front: np.ndarray, ref: tuple[float, float]) -> float:
    pts = front[np.all(front < ref, axis=1)]
    pts = pts[np.argsort(pts[:, 0])]
    hv, prev = 0.0, ref[1]
    for f1, f2 in pts:
        if f2 < prev:
            hv += (ref[0] - f1) * (prev - f2)
            prev = f2
    return hv


# ------------------------------------------------------------------ the GP surrogate

@pytest.mark.parametrize("noise", [False, True])
def test_posterior_matches_sklearn_predict(noise):
    rng = np.random.default_rng(1)
    X, U = rng.random((15, 3)), rng.random((7, 3))
    y = np.sin(5 * X).sum(axis=1)
    post = fit_gp(X, y, noise=noise, seed=0, n_restarts=0)
    mu, sd = post.predict(U)
    mu_sk, sd_sk = post.gp.predict(U, return_std=True)
    np.testing.assert_allclose(mu, post.y_mean + post.y_std * mu_sk, atol=1e-10)
    if not noise:  # sklearn's std includes the white-noise level; ours is the latent one
        np.testing.assert_allclose(sd, post.y_std * sd_sk, atol=1e-8)


def test_expected_improvement_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    X = rng.random((12, 2))
    y = ((X - 0.4) ** 2).sum(axis=1)
    post = fit_gp(X, y, noise=False, seed=0, n_restarts=0)
    best = float(y.min())
    for x in rng.random((3, 2)):
        _, grad = post.ei_and_grad(x, best, 0.0)
        eps = 1e-6
        num = [(post.ei_and_grad(x + eps * e, best, 0.0)[0] - post.ei_and_grad(x - eps * e, best, 0.0)[0])
               / (2 * eps) for e in np.eye(2)]
        np.testing.assert_allclose(grad, num, rtol=1e-4, atol=1e-9)


# ------------------------------------------------------------------ GPMinimizer

def test_gp_bo_beats_random_search_on_branin():
    budget = 30
    gp_best = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=10, seed=0), branin, budget).best()[1]
    rng = np.random.default_rng(0)
    random_best = min(branin(c) for c in BRANIN_SPACE.sample(budget, rng))
    assert gp_best < BRANIN_MIN + 0.1
    assert gp_best - BRANIN_MIN < 0.2 * (random_best - BRANIN_MIN)


def test_gp_bo_on_mixed_space_returns_valid_distinct_configs():
    opt = run_gp(GPMinimizer(MIXED, n_initial_points=6, seed=1), mixed_objective, 16)
    for c in opt.configs:
        MIXED.validate(c)
        assert isinstance(c["depth"], int)
    keys = {json.dumps(c, sort_keys=True) for c in opt.configs}
    assert len(keys) == len(opt.configs)
    assert opt.best()[1] < 0.8


def test_points_to_evaluate_come_first_then_design_then_model():
    first = [{"x1": 1.0, "x2": 2.0}, {"x1": -5.0, "x2": 15.0}]
    opt = GPMinimizer(BRANIN_SPACE, n_initial_points=4, points_to_evaluate=first, seed=0)
    asked = [opt.ask() for _ in range(2)]
    assert asked == first
    for c in asked + [opt.ask(), opt.ask()]:
        opt.tell(c, branin(c))
    assert len(opt._queue) == 0 and opt.n_told == 4


def test_gp_pending_configs_are_constant_liars():
    opt = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=8, seed=3), branin, 12)
    a = opt.ask()
    b = opt.ask([a])
    ua, ub = BRANIN_SPACE.to_unit([a, b])
    assert np.abs(ua - ub).max() > 1e-3


def test_gp_state_round_trip_reproduces_next_proposal():
    opt = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=6, seed=4), branin, 10)
    state = json.loads(json.dumps(opt.get_state()))
    fresh = GPMinimizer(BRANIN_SPACE, n_initial_points=50, seed=99)
    fresh.set_state(state)
    assert fresh.n_told == 10 and fresh.n_initial_points == 6
    pending = [opt.configs[0]]
    assert fresh.ask(pending) == opt.ask(pending)
    assert fresh.ask() == opt.ask()


def test_gp_state_round_trip_during_initial_design():
    opt = run_gp(GPMinimizer(MIXED, n_initial_points=8, seed=5), mixed_objective, 3)
    fresh = GPMinimizer(MIXED, seed=0)
    fresh.set_state(json.loads(json.dumps(opt.get_state())))
    assert [fresh.ask() for _ in range(3)] == [opt.ask() for _ in range(3)]


def test_same_seed_same_proposals():
    a = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=5, seed=11), branin, 9).configs
    b = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=5, seed=11), branin, 9).configs
    assert a == b


_SUBPROCESS_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from test_search_core import BRANIN_SPACE, UNIT3, branin, zdt1, run_gp, run_parego
from raytune_fed.algorithms import GPMinimizer, ParEGO
gp = run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=5, seed=11), branin, 8).configs
pe = run_parego(ParEGO(UNIT3, 2, n_initial_points=5, seed=11), zdt1, 4, batch=2).configs
print(json.dumps([gp, pe]))
"""


def test_same_seed_same_proposals_in_another_process():
    out = subprocess.run([sys.executable, "-c", _SUBPROCESS_SCRIPT.format(tests=str(REPO / "tests"))],
                         capture_output=True, text=True, check=True, cwd=REPO)
    gp, pe = json.loads(out.stdout)
    assert gp == run_gp(GPMinimizer(BRANIN_SPACE, n_initial_points=5, seed=11), branin, 8).configs
    assert pe == run_parego(ParEGO(UNIT3, 2, n_initial_points=5, seed=11), zdt1, 4, batch=2).configs


def test_import_does_not_import_ray():
    code = "import sys, raytune_fed.search; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ ParEGO pieces

def test_default_lattice_sizes_follow_mlrmbo():
    assert [default_lattice_size(k) for k in range(2, 9)] == [100000, 450, 75, 37, 23, 10, 10]


@pytest.mark.parametrize("k, s, n", [(2, 100000, 50), (3, 450, 40), (5, 37, 20), (8, 10, 30)])
def test_lattice_weights_are_distinct_simplex_rows_without_margins(k, s, n):
    w = sample_lattice_weights(k, s, n, np.random.default_rng(0))
    assert w.shape == (n, k)
    assert np.all(w >= 0) and np.allclose(w.sum(axis=1), 1.0)
    assert len({tuple(r) for r in w}) == n
    assert not np.any(np.isclose(w, 1.0))  # no margin (unit) vectors
    np.testing.assert_allclose(w * s, np.round(w * s), atol=1e-6)  # on the lattice


def test_small_lattice_draws_exactly_the_inner_rows():
    assert n_inner_lattice_rows(3, 3) == 7
    w = sample_lattice_weights(3, 3, 7, np.random.default_rng(1))
    expected = {(2, 1, 0), (2, 0, 1), (1, 2, 0), (0, 2, 1), (1, 0, 2), (0, 1, 2), (1, 1, 1)}
    assert {tuple(int(v) for v in np.round(r * 3)) for r in w} == expected
    with pytest.raises(ConfigError, match="cannot draw 8 distinct weight vectors"):
        sample_lattice_weights(3, 3, 8, np.random.default_rng(1))


def test_spread_weights_drops_the_most_crowded_row():
    w = np.array([[0.1, 0.9], [0.12, 0.88], [0.5, 0.5], [0.9, 0.1]])
    np.testing.assert_allclose(spread_weights(w, 3), w[1:])
    # the closest pair's rows tie on nearest-neighbour distance; the earlier row goes (R's which.min)
    np.testing.assert_allclose(spread_weights(w, 2), [[0.5, 0.5], [0.9, 0.1]])


def test_draw_weights_gives_n_distinct_spread_vectors():
    opt = ParEGO(UNIT3, 3, seed=0)
    w = opt.draw_weights(6)
    assert w.shape == (6, 3) and len({tuple(r) for r in w}) == 6
    assert np.allclose(w.sum(axis=1), 1.0) and np.all(w > -1e-12)
    # spreading keeps the nearest-neighbour distance above what 6 random rows give
    rng = np.random.default_rng(0)

    def min_nn(v):
        d = np.sqrt(((v[:, None] - v[None]) ** 2).sum(-1))
        return d[~np.eye(len(v), dtype=bool)].min()

    random_nn = np.median([min_nn(sample_lattice_weights(3, 450, 6, rng)) for _ in range(30)])
    spread_nn = np.median([min_nn(ParEGO(UNIT3, 3, n_initial_points=1, seed=s).draw_weights(6)) for s in range(30)])
    assert spread_nn > random_nn


def test_tchebycheff_hand_computed():
    Y = np.array([[0.2, 0.6], [1.0, 0.0], [0.0, 0.0]])
    w = np.array([0.3, 0.7])
    # row 1: w*y = (0.06, 0.42) -> 0.42 + 0.05 * 0.48; row 2: (0.3, 0) -> 0.3 + 0.05 * 0.3
    np.testing.assert_allclose(tchebycheff(Y, w), [0.444, 0.315, 0.0])
    np.testing.assert_allclose(tchebycheff(Y, w, rho=0.0), [0.42, 0.3, 0.0])


def test_normalize_objectives_min_max_per_column():
    Y = np.array([[1.0, 10.0, 5.0], [3.0, 10.0, 6.0], [2.0, 30.0, 7.0]])
    np.testing.assert_allclose(normalize_objectives(Y), [[0, 0, 0], [1, 0, 0.5], [0.5, 1, 1]])
    Y2 = np.array([[1.0, 10.0], [3.0, 10.0]])
    np.testing.assert_allclose(normalize_objectives(Y2), [[0, 0], [1, 0]])  # constant column -> 0


def test_pareto_mask():
    Y = np.array([[1, 5], [2, 2], [3, 3], [5, 1], [2, 2], [1, 6]])
    assert pareto_mask(Y).tolist() == [True, True, False, True, True, False]


# ------------------------------------------------------------------ ParEGO core

def test_parego_improves_hypervolume_over_initial_design_on_zdt1():
    opt = ParEGO(UNIT3, 2, n_initial_points=10, seed=0)
    run_parego(opt, zdt1, 10)
    ref = (1.1, 11.0)
    hv_initial = hypervolume_2d(opt.pareto_front(), ref)
    run_parego(opt, zdt1, 8, batch=2)
    hv_final = hypervolume_2d(opt.pareto_front(), ref)
    assert opt.n_told == 26
    assert hv_final > hv_initial + 1.0


def test_pareto_helpers_agree():
    opt = run_parego(ParEGO(UNIT3, 2, n_initial_points=8, seed=1), zdt1, 8)
    front, configs = opt.pareto_front(), opt.pareto_configs()
    assert len(front) == len(configs) >= 1
    np.testing.assert_allclose([zdt1(c) for c in configs], front)


@pytest.mark.parametrize("n_told", [0, 12])
def test_parego_ask_n_returns_n_distinct_points(n_told):
    opt = run_parego(ParEGO(UNIT3, 2, n_initial_points=6, seed=2), zdt1, n_told)
    batch = opt.ask(4)
    assert len(batch) == 4
    assert len({json.dumps(c, sort_keys=True) for c in batch}) == 4
    if n_told:
        assert opt.last_weights_.shape == (4, 2) and len({tuple(r) for r in opt.last_weights_}) == 4


def test_parego_pending_points_are_constant_liars():
    opt = run_parego(ParEGO(UNIT3, 2, n_initial_points=6, seed=3, lattice_size=2), zdt1, 8)
    # lattice_size=2 leaves a single inner weight (0.5, 0.5): only the liar separates the points
    a = opt.ask()[0]
    b = opt.ask(pending=[a])[0]
    c, d = opt.ask(2)
    ua, ub, uc, ud = UNIT3.to_unit([a, b, c, d])
    assert np.abs(ua - ub).max() > 1e-3 and np.abs(uc - ud).max() > 1e-3


def test_parego_state_round_trip_reproduces_next_proposals():
    opt = run_parego(ParEGO(UNIT3, 2, n_initial_points=6, seed=4), zdt1, 9)
    fresh = ParEGO(UNIT3, 2, n_initial_points=20, seed=0, rho=0.3)
    fresh.set_state(json.loads(json.dumps(opt.get_state())))
    assert fresh.n_told == 9 and fresh.rho == 0.05
    assert fresh.ask(3) == opt.ask(3)
    np.testing.assert_allclose(fresh.values, opt.values)


# ------------------------------------------------------------------ bad input

BAD_INPUT = [
    (lambda: GPMinimizer(BRANIN_SPACE, n_initial_points=0), r"n_initial_points must be an integer >= 1, got 0"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=-1), r"seed must be an integer >= 0, got -1"),
    (lambda: GPMinimizer(BRANIN_SPACE, xi=float("nan")), r"xi must be a finite number >= 0"),
    (lambda: GPMinimizer({"x": (0, 1)}), r"space must be a SearchSpace, got dict"),
    (lambda: GPMinimizer(BRANIN_SPACE, points_to_evaluate=[{"x1": 99.0, "x2": 1.0}]), r"parameter 'x1'=99.0"),
    (lambda: GPMinimizer(BRANIN_SPACE).tell({"x1": 0.0, "x2": 1.0}, float("nan")), r"value must be a finite number"),
    (lambda: GPMinimizer(BRANIN_SPACE).tell({"x1": 0.0}, 1.0), r"missing parameter 'x2'"),
    (lambda: ParEGO(UNIT3, 2, rho=-0.1), r"rho must be a finite number >= 0.0, got -0.1"),
    (lambda: ParEGO(UNIT3, 1), r"n_objectives must be an integer >= 2, got 1"),
    (lambda: ParEGO(UNIT3, 2, lattice_size=1), r"lattice_size must be an integer >= 2, got 1"),
    (lambda: ParEGO(UNIT3, 2, n_initial_points=0), r"n_initial_points must be an integer >= 1"),
    (lambda: ParEGO(UNIT3, 2).tell({"x0": 0.1, "x1": 0.2, "x2": 0.3}, [1.0]), r"expected 2 objective values, got 1"),
    (lambda: ParEGO(UNIT3, 2).tell({"x0": 0.1, "x1": 0.2, "x2": 0.3}, [1.0, math.inf]), r"must be finite"),
    (lambda: ParEGO(UNIT3, 2).ask(0), r"n must be an integer >= 1, got 0"),
    (lambda: ParEGO(UNIT3, 2).set_state(GPMinimizer(UNIT3).get_state()), r"n_objectives=None"),
    (lambda: GPMinimizer(BRANIN_SPACE).set_state(GPMinimizer(UNIT3).get_state()), r"saved for parameters"),
    (lambda: GPMinimizer(UNIT3).set_state({**GPMinimizer(UNIT3).get_state(), "version": 0}), r"state version 0"),
]


@pytest.mark.parametrize("make, message", BAD_INPUT)
def test_bad_input_raises_config_error(make, message):
    with pytest.raises(ConfigError, match=message):
        make()
