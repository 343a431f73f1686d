"""Pure-logic tests of the GP surrogate and the GP-BO and ParEGO cores (no Ray).

The shared contract (lifecycle, shapes, reproducibility, state, bad input) is in
``tests/test_contracts.py``; these are the known answers specific to each piece.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from raytune_fed.algorithms import GPMinimizer, GPSettings, ParEGO
from raytune_fed.algorithms.gp import fit_gp
from raytune_fed.algorithms.parego import (
    default_lattice_size,
    n_inner_lattice_rows,
    normalize_objectives,
    sample_lattice_weights,
    spread_weights,
    tchebycheff,
)
from raytune_fed.errors import ConfigError
from raytune_fed.metrics import hypervolume
from raytune_fed.space import Categorical, Float, Int, SearchSpace

BRANIN_MIN = 0.397887
SCIPY_FTOL = 2.220446049250313e-09  # L-BFGS-B's default, which scikit-learn's fit uses


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


def run(core, f, n_rounds: int, batch: int = 1):
    for _ in range(n_rounds):
        configs = core.ask(batch)
        core.tell(configs, [np.atleast_1d(f(c)).tolist() for c in configs])
    return core


# ------------------------------------------------------------------ the GP surrogate

def _sklearn_gp(X, z, noise):
    d = X.shape[1]
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale=np.full(d, 0.5), length_scale_bounds=(1e-2, 1e2),
                                                       nu=2.5)
    if noise:
        kernel = kernel + WhiteKernel(1e-3, (1e-6, 0.5))
    gp = GaussianProcessRegressor(kernel, alpha=1e-10 if noise else 1e-6, n_restarts_optimizer=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gp.fit(X, z)


@pytest.mark.parametrize("noise", [False, True])
@pytest.mark.parametrize("n, d", [(15, 2), (40, 5)])
def test_gp_fit_matches_scikit_learn(noise, n, d):
    """The same model, start and bounds as GaussianProcessRegressor: the same optimum and predictions."""
    rng = np.random.default_rng(n + d)
    X, U = rng.random((n, d)), rng.random((7, d))
    y = np.sin(5 * X).sum(axis=1) + 0.05 * rng.standard_normal(n)
    post = fit_gp(X, y, noise=noise, ftol=SCIPY_FTOL)
    reference = _sklearn_gp(X, (y - y.mean()) / y.std(), noise)
    np.testing.assert_allclose(post.theta, reference.kernel_.theta, atol=1e-4)
    assert post.log_marginal_likelihood == pytest.approx(reference.log_marginal_likelihood_value_, abs=1e-8)
    mu, sd = post.predict(U)
    mu_sk, sd_sk = reference.predict(U, return_std=True)
    np.testing.assert_allclose(mu, y.mean() + y.std() * mu_sk, atol=1e-5)
    if not noise:  # scikit-learn's std includes the white-noise level; ours is the latent one
        np.testing.assert_allclose(sd, y.std() * sd_sk, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_gp_fit_tolerance_stays_within_a_hundredth_of_the_tight_optimum(seed):
    rng = np.random.default_rng(seed)
    X = rng.random((40, 4))
    y = np.abs(np.sin(6 * X[:, 0])) + X[:, 1] ** 2 + 0.01 * rng.standard_normal(40)
    tight = fit_gp(X, y, noise=True, ftol=SCIPY_FTOL)
    assert fit_gp(X, y, noise=True).log_marginal_likelihood == pytest.approx(tight.log_marginal_likelihood, abs=0.01)


def test_gp_restarts_never_end_below_the_default_start():
    rng = np.random.default_rng(3)
    X = rng.random((25, 3))
    y = np.cos(4 * X).sum(axis=1)
    single = fit_gp(X, y, noise=True)
    restarted = fit_gp(X, y, noise=True, n_restarts=3, rng=np.random.default_rng(0))
    assert restarted.log_marginal_likelihood >= single.log_marginal_likelihood - 1e-9


def test_expected_improvement_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    X = rng.random((12, 2))
    y = ((X - 0.4) ** 2).sum(axis=1)
    post = fit_gp(X, y, noise=False)
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
    gp_best = run(GPMinimizer(BRANIN_SPACE, n_initial_points=10, seed=0), branin, budget).best()[1]
    rng = np.random.default_rng(0)
    random_best = min(branin(c) for c in BRANIN_SPACE.sample(budget, rng))
    assert gp_best < BRANIN_MIN + 0.1
    assert gp_best - BRANIN_MIN < 0.2 * (random_best - BRANIN_MIN)


def test_gp_bo_on_mixed_space_returns_valid_distinct_configs():
    opt = run(GPMinimizer(MIXED, n_initial_points=6, seed=1), mixed_objective, 16)
    for c in opt.configs:
        MIXED.validate(c)
        assert isinstance(c["depth"], int)
    keys = {json.dumps(c, sort_keys=True) for c in opt.configs}
    assert len(keys) == len(opt.configs)
    assert opt.best()[1] < 0.8


def test_points_to_evaluate_come_first_even_beyond_the_design():
    first = [{"x1": 1.0, "x2": 2.0}, {"x1": -5.0, "x2": 15.0}, {"x1": 0.0, "x2": 0.0}]
    opt = GPMinimizer(BRANIN_SPACE, n_initial_points=2, points_to_evaluate=first, seed=0)
    assert opt.ask(2) + opt.ask(1) == first


def test_gp_pending_configs_are_constant_liars():
    opt = run(GPMinimizer(BRANIN_SPACE, n_initial_points=8, seed=3), branin, 12)
    (a,) = opt.ask()
    (b,) = opt.ask(pending=[a])
    ua, ub = BRANIN_SPACE.to_unit([a, b])
    assert np.abs(ua - ub).max() > 1e-3


def test_a_state_from_other_settings_is_refused_by_name():
    opt = run(GPMinimizer(BRANIN_SPACE, n_initial_points=4, seed=4), branin, 5)
    other = GPMinimizer(BRANIN_SPACE, n_initial_points=4, seed=4, gp=GPSettings(xi=0.1))
    with pytest.raises(ConfigError, match=r"other settings: gp=.*'xi': 0.0.*this one: .*'xi': 0.1"):
        other.set_state(opt.get_state())


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
    w = ParEGO(UNIT3, 3, seed=0).draw_weights(6)
    assert w.shape == (6, 3) and len({tuple(r) for r in w}) == 6
    assert np.allclose(w.sum(axis=1), 1.0) and np.all(w > -1e-12)
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
    np.testing.assert_allclose(normalize_objectives(np.array([[1.0, 10.0], [3.0, 10.0]])), [[0, 0], [1, 0]])


# ------------------------------------------------------------------ ParEGO core

def test_parego_improves_hypervolume_over_initial_design_on_zdt1():
    opt = run(ParEGO(UNIT3, 2, n_initial_points=10, seed=0), zdt1, 10)
    ref = (1.1, 11.0)
    hv_initial = hypervolume(opt.pareto_front(), ref)
    run(opt, zdt1, 8, batch=2)
    assert opt.n_told == 26
    assert hypervolume(opt.pareto_front(), ref) > hv_initial + 1.0


def test_pareto_front_drops_duplicates_like_metrics_and_configs_follow_it():
    opt = ParEGO(UNIT3, 2, seed=1)
    configs = UNIT3.from_unit(np.array([[0.1, 0, 0], [0.2, 0, 0], [0.3, 0, 0], [0.4, 0.9, 0.9]]))
    opt.tell(configs, [[1.0, 2.0], [1.0, 2.0], [2.0, 1.0], [3.0, 3.0]])
    np.testing.assert_array_equal(opt.pareto_front(), [[1.0, 2.0], [2.0, 1.0]])
    assert opt.pareto_configs() == [configs[0], configs[2]]


def test_parego_batch_uses_distinct_weights():
    opt = run(ParEGO(UNIT3, 2, n_initial_points=6, seed=2), zdt1, 8)
    batch = opt.ask(4)
    assert len({json.dumps(c, sort_keys=True) for c in batch}) == 4
    assert opt.last_weights_.shape == (4, 2) and len({tuple(r) for r in opt.last_weights_}) == 4


def test_parego_pending_points_are_constant_liars():
    opt = run(ParEGO(UNIT3, 2, n_initial_points=6, seed=3, lattice_size=2), zdt1, 8)
    # lattice_size=2 leaves a single inner weight (0.5, 0.5): only the liar separates the points
    (a,) = opt.ask()
    (b,) = opt.ask(pending=[a])
    c, d = opt.ask(2)
    ua, ub, uc, ud = UNIT3.to_unit([a, b, c, d])
    assert np.abs(ua - ub).max() > 1e-3 and np.abs(uc - ud).max() > 1e-3


@pytest.mark.process
def test_import_does_not_import_ray():
    code = "import sys, raytune_fed.search, raytune_fed.testing; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ bad input

BAD_INPUT = [
    (lambda: GPMinimizer(BRANIN_SPACE, n_initial_points=0, seed=0), r"n_initial_points must be an integer >= 1, got 0"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=-1), r"seed must be a non-negative int.*got -1"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=None), r"seed must be a non-negative int.*got None"),
    (lambda: GPMinimizer(BRANIN_SPACE), r"missing 1 required keyword-only argument: 'seed'"),
    (lambda: GPSettings(xi=float("nan")), r"xi must be a finite number >= 0"),
    (lambda: GPSettings(noise=1), r"noise must be True or False, got 1"),
    (lambda: GPSettings(n_starts=-1), r"n_starts must be an integer >= 0, got -1"),
    (lambda: GPSettings(n_candidates=0), r"n_candidates must be an integer >= 1, got 0"),
    (lambda: GPSettings.from_dict({"noise": True, "typo": 1}), r"GP settings must be a dict with keys among"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=0, gp={"noise": True}), r"gp must be a GPSettings"),
    (lambda: GPMinimizer({"x": (0, 1)}, seed=0), r"space must be a SearchSpace, got dict"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=0, points_to_evaluate=[{"x1": 99.0, "x2": 1.0}]), r"parameter 'x1'=99.0"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=0, points_to_evaluate={"x1": 1.0, "x2": 1.0}),
     r"points_to_evaluate must be a list of configurations"),
    (lambda: ParEGO(UNIT3, 2, seed=0, rho=-0.1), r"rho must be a finite number >= 0.0, got -0.1"),
    (lambda: ParEGO(UNIT3, 1, seed=0), r"n_objectives must be an integer >= 2, got 1"),
    (lambda: ParEGO(UNIT3, 2, seed=0, lattice_size=1), r"lattice_size must be an integer >= 2, got 1"),
    (lambda: ParEGO(UNIT3, 2, seed=0, sample_more_weights=0), r"sample_more_weights must be an integer >= 1"),
    (lambda: ParEGO(UNIT3, 2, seed=0).best(), r"best\(\) needs a single objective"),
    (lambda: GPMinimizer(UNIT3, seed=0).best(), r"no feasible result told yet"),
    (lambda: ParEGO(UNIT3, 2, seed=0).set_state(GPMinimizer(UNIT3, seed=0).get_state()),
     r"not a ParEGO state: .*kind='GPMinimizer'"),
    (lambda: GPMinimizer(BRANIN_SPACE, seed=0).set_state(GPMinimizer(UNIT3, seed=0).get_state()),
     r"saved for parameters \['x0', 'x1', 'x2'\]"),
    (lambda: ParEGO(UNIT3, 3, seed=0).set_state(ParEGO(UNIT3, 2, seed=0).get_state()),
     r"state has \(n_objectives, n_constraints\)=\(2, 0\), this ParEGO has \(3, 0\)"),
]


@pytest.mark.parametrize("make, message", BAD_INPUT)
def test_bad_input_raises_config_error(make, message):
    with pytest.raises((ConfigError, TypeError), match=message):
        make()
