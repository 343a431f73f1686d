"""The package's seed convention: explicit seeds, derived streams, saved generators."""

import json
import subprocess
import sys

import numpy as np
import pytest

from raytune_fed.errors import ConfigError
from raytune_fed.random import as_generator, derive, generator_from_state, generator_state, seed_int, spawn


def test_derive_depends_on_coordinates_not_on_call_order():
    a = derive(7, "site", 3).generate_state(4)
    derive(7, "site", 4)  # another coordinate in between changes nothing
    assert (derive(7, "site", 3).generate_state(4) == a).all()
    assert not (derive(7, "site", 4).generate_state(4) == a).all()
    assert not (derive(8, "site", 3).generate_state(4) == a).all()


def test_derive_agrees_with_numpy_spawn():
    assert (derive(np.random.SeedSequence(0), 1).generate_state(2)
            == np.random.SeedSequence(0).spawn(2)[1].generate_state(2)).all()


@pytest.mark.process
def test_same_seed_same_numbers_in_another_process():
    code = ("from raytune_fed.random import derive, as_generator;"
            "print(as_generator(derive(11, 'cell', 'x', 2)).random(3).tolist())")
    here = as_generator(derive(11, "cell", "x", 2)).random(3).tolist()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == here


def test_generator_state_round_trips_through_json():
    g = as_generator(3)
    g.random(5)
    h = generator_from_state(json.loads(json.dumps(generator_state(g))))
    assert (g.random(4) == h.random(4)).all()


def test_spawn_and_seed_int_are_deterministic_for_ints():
    assert [s.generate_state(1)[0] for s in spawn(5, 3)] == [s.generate_state(1)[0] for s in spawn(5, 3)]
    assert seed_int(5) == seed_int(5) and 0 <= seed_int(5) < 2 ** 31


@pytest.mark.parametrize("bad", [None, -1, 1.5, True, "3"])
def test_bad_seeds_are_refused_with_the_value(bad):
    with pytest.raises(ConfigError, match=r"seed must be a non-negative int, a numpy SeedSequence or a Generator, got"):
        as_generator(bad)


@pytest.mark.parametrize("bad", [{"bit_generator": "MT19937"}, {"state": 1}, [1, 2]])
def test_malformed_generator_state_is_refused(bad):
    with pytest.raises(ConfigError, match="malformed random-generator state"):
        generator_from_state(bad)
