"""Search spaces: clipping at the edges, the vectorised unit cube against scalar decoding, checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.space import Categorical, Float, Int, SearchSpace

MIXED = SearchSpace((Float("a", -5.0, 10.0), Float("lr", 1e-4, 1e-1, log=True), Int("d", 1, 6),
                     Int("n", 1, 100, log=True), Categorical("k", ("x", "y", "z"))))


def test_categorical_decode_clips_below_and_above():
    c = Categorical("k", ("x", "y", "z"))
    assert [c.decode(u) for u in (-0.5, 0.0, 0.34, 0.99, 1.0, 7.0)] == ["x", "x", "y", "z", "z", "z"]


def test_log_float_decode_stays_inside_its_bounds():
    p = Float("lr", 1e-4, 1e-1, log=True)
    assert p.decode(1.0) <= 0.1 and p.decode(1.0) == 0.1
    assert p.decode(0.0) == 1e-4 and p.decode(-3.0) == 1e-4 and p.decode(2.0) == 0.1
    assert p.contains(p.decode(1.0))


@pytest.mark.parametrize("param", [Float("f", 0.1, 0.3), Float("g", 1e-4, 1e-1, log=True), Int("i", -3, 9),
                                   Int("j", 1, 1000, log=True), Float("h", 2.0 ** -15, 2.0 ** 15, log=True)])
def test_decoded_values_never_leave_the_range(param):
    u = np.concatenate([np.linspace(-0.5, 1.5, 401), [np.nextafter(1.0, 0.0), 1.0, np.nextafter(0.0, 1.0)]])
    values = param.decode_array(u)
    assert np.all(values >= param.low) and np.all(values <= param.high)
    assert param.decode(1.0) == param.high and param.decode(0.0) == param.low


def test_vectorised_transforms_match_scalar_decoding():
    u = np.random.default_rng(0).random((500, MIXED.dim)) * 1.2 - 0.1
    configs = MIXED.from_unit(u)
    slow = [{p.name: p.decode(x) for p, x in zip(MIXED.params, row)} for row in u]
    assert configs == slow
    encoded = MIXED.to_unit(configs)
    slow_encoded = np.array([[p.encode(c[p.name]) for p in MIXED.params] for c in configs])
    np.testing.assert_array_equal(encoded, slow_encoded)
    np.testing.assert_array_equal(MIXED.snap(u), encoded)


def test_decoded_configurations_are_plain_python():
    (config,) = MIXED.from_unit(np.full((1, MIXED.dim), 0.5))
    assert [type(v) for v in config.values()] == [float, float, int, int, str]
    assert json.loads(json.dumps(config)) == config


def test_normalize_returns_plain_values_in_parameter_order():
    raw = {"k": np.str_("y"), "n": np.int64(7), "d": 3.0, "lr": np.float64(0.01), "a": 2}
    (out,) = MIXED.normalize([raw])
    assert out == {"a": 2.0, "lr": 0.01, "d": 3, "n": 7, "k": "y"}
    assert list(out) == MIXED.names and [type(v) for v in out.values()] == [float, float, int, int, str]


def test_categorical_prefers_a_choice_of_the_same_type():
    c = Categorical("c", (1, True, "1"))
    assert [c.choices[i] for i in c.index_of([True, 1, "1", 1.0])] == [True, 1, "1", 1]


def test_space_round_trips_through_json():
    assert SearchSpace.from_dict(json.loads(json.dumps(MIXED.to_dict()))) == MIXED


GOOD = {"a": 0.0, "lr": 0.01, "d": 2, "n": 5, "k": "x"}
BAD_CONFIGS = [
    ({**GOOD, "a": "1"}, r"parameter 'a'='1' is not a number"),
    ({**GOOD, "a": True}, r"parameter 'a'=True is not a number"),
    ({**GOOD, "a": 10.5}, r"parameter 'a'=10.5 is outside Float"),
    ({**GOOD, "lr": float("nan")}, r"parameter 'lr'=nan is outside"),
    ({**GOOD, "d": 2.5}, r"parameter 'd'=2.5 is outside Int"),
    ({**GOOD, "d": 7}, r"parameter 'd'=7 is outside Int"),
    ({**GOOD, "k": "w"}, r"parameter 'k': 'w' is not one of \('x', 'y', 'z'\)"),
    ({k: v for k, v in GOOD.items() if k != "n"}, r"configuration is missing parameter 'n'"),
    ({**GOOD, "extra": 1}, r"unknown parameters \['extra'\]"),
    ([("a", 1)], r"must be a mapping of parameter values"),
]


@pytest.mark.parametrize("config, message", BAD_CONFIGS)
def test_bad_configurations_raise_config_error(config, message):
    with pytest.raises(ConfigError, match=message):
        MIXED.normalize([config])


BAD_SPACES = [
    (lambda: Float("x", 1.0, 1.0), r"need finite low < high, got low=1.0, high=1.0"),
    (lambda: Float("x", 0.0, 1.0, log=True), r"log-scaled range needs low > 0, got low=0.0"),
    (lambda: Float("x", 0.0, float("inf")), r"need finite low < high"),
    (lambda: Float("", 0.0, 1.0), r"non-empty string name"),
    (lambda: Int("i", 0.5, 3), r"integer bounds must be ints"),
    (lambda: Categorical("c", ()), r"non-empty tuple of choices"),
    (lambda: Categorical("c", ["a"]), r"non-empty tuple of choices, got \['a'\]"),
    (lambda: SearchSpace((Float("x", 0, 1), Float("x", 0, 2))), r"duplicate parameter names"),
    (lambda: SearchSpace(()), r"needs at least one parameter"),
    (lambda: SearchSpace(({"x": 1},)), r"tuple of Float/Int/Categorical parameters"),
    (lambda: SearchSpace.from_dict({"params": [{"type": "Normal", "name": "x"}]}), r"malformed search space"),
    (lambda: MIXED.from_unit(np.zeros((2, 3))), r"expected points with 5 coordinates, got shape \(2, 3\)"),
    (lambda: MIXED.latin_hypercube(0, np.random.default_rng(0)), r"n must be an integer >= 1 for a design"),
]


@pytest.mark.parametrize("make, message", BAD_SPACES)
def test_bad_spaces_raise_config_error(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_latin_hypercube_has_one_point_per_stratum():
    space = SearchSpace((Float("x", 0.0, 1.0), Float("y", 0.0, 1.0)))
    for n in (3, 8):  # 3 points are not optimised, more are (scipy's random-cd)
        U = space.to_unit(space.latin_hypercube(n, np.random.default_rng(1)))
        for column in U.T:
            assert sorted(np.floor(column * n).astype(int)) == list(range(n))
