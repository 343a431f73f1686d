"""The ask/tell protocol itself, through two minimal cores a later core resembles.

``RandomCore`` takes constraint values with each observation (as NSGA-II with constraints
will); ``GenerationCore`` hands out whole generations and waits for them (as NSGA-II and
halving rungs will): fewer than ``n`` proposals, none while waiting, ``discard`` for trials
that never report, ``is_finished`` at the end.  Both pass the shipped contract suite, and
the second drives the Tune adapter base, so the protocol carries what those cores need.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ray.tune.search import Searcher

from raytune_fed._checks import check_int
from raytune_fed.algorithms import SearchCore
from raytune_fed.errors import ConfigError
from raytune_fed.search import CoreSearcher
from raytune_fed.space import Float, Int, SearchSpace
from raytune_fed.testing import CORE_CHECKS, CoreCase

SPACE = SearchSpace((Float("x", 0.0, 1.0), Int("k", 0, 9)))


class RandomCore(SearchCore):
    """Uniform random proposals (constraints optional)."""

    def _propose(self, n: int, pending: list[dict]) -> list[dict]:
        return self.space.sample(n, self._rng)


class GenerationCore(SearchCore):
    """Generations of ``size`` random configurations; the next one only after the last was told."""

    def __init__(self, space: SearchSpace, *, seed: Any, size: int = 3, n_generations: int = 3) -> None:
        super().__init__(space, seed=seed)
        self.size = check_int("size", size, 1)
        self.n_generations = check_int("n_generations", n_generations, 1)
        self._done, self._out, self._waiting = 0, 0, 0

    @property
    def is_finished(self) -> bool:
        return self._done >= self.n_generations

    def _propose(self, n: int, pending: list[dict]) -> list[dict]:
        k = min(n, self.size - self._out)
        self._out += k
        self._waiting += k
        return self.space.sample(k, self._rng) if k else []

    def _on_tell(self, configs, Y, G) -> None:
        self._settle(len(configs))

    def discard(self, configs) -> None:
        super().discard(configs)
        self._settle(len(configs))

    def _settle(self, n: int) -> None:
        self._waiting -= n
        if self._out == self.size and self._waiting == 0:
            self._done, self._out = self._done + 1, 0

    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "size": self.size, "n_generations": self.n_generations}

    def _core_state(self) -> dict[str, int]:
        return {"done": self._done, "out": self._out, "waiting": self._waiting}

    def _set_core_state(self, state: Any) -> None:
        values = [check_int(f"state {k}", state[k], 0) for k in ("done", "out", "waiting")]
        self._done, self._out, self._waiting = values


def objective(config: dict) -> list[float]:
    return [(config["x"] - 0.3) ** 2 + 0.01 * config["k"]]


def two_objectives(config: dict) -> list[float]:
    return [config["x"], 1.0 - config["x"] + 0.1 * config["k"]]


def constraint(config: dict) -> list[float]:
    return [config["x"] - 0.8]  # feasible when x <= 0.8


def make_random_core(seed) -> RandomCore:
    return RandomCore(SPACE, seed=seed, n_objectives=2, n_constraints=1, n_initial_points=3)


def make_generation_core(seed) -> GenerationCore:
    return GenerationCore(SPACE, seed=seed, size=3, n_generations=4)


CASES = [CoreCase("RandomCore with a constraint", make_random_core, two_objectives, constraint,
                  avoids_pending=False),
         CoreCase("GenerationCore", make_generation_core, objective, exact_batch=False, avoids_pending=False)]


@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("check", CORE_CHECKS, ids=lambda c: c.__name__)
def test_minimal_cores_keep_the_contract(check, case):
    check(case)


def test_results_consider_feasible_rows_only():
    core = RandomCore(SPACE, seed=0, n_constraints=1)
    configs = [{"x": 0.1, "k": 1}, {"x": 0.9, "k": 1}, {"x": 0.5, "k": 1}]
    core.tell(configs, [[3.0], [1.0], [2.0]], constraints=[[0.0], [0.5], [-1.0]])
    assert core.best() == ({"x": 0.5, "k": 1}, 2.0)
    np.testing.assert_array_equal(core.feasible, [True, False, True])
    np.testing.assert_array_equal(core.constraint_values, [[0.0], [0.5], [-1.0]])
    multi = RandomCore(SPACE, seed=0, n_objectives=2, n_constraints=1)
    multi.tell(configs, [[1.0, 1.0], [0.0, 0.0], [2.0, 0.5]], constraints=[[0.0], [1.0], [0.0]])
    np.testing.assert_array_equal(multi.pareto_front(), [[1.0, 1.0], [2.0, 0.5]])
    assert multi.pareto_configs() == [configs[0], configs[2]]


def test_design_queue_serves_points_then_a_latin_hypercube():
    first = {"x": 1.0, "k": 9}
    core = RandomCore(SPACE, seed=0, n_initial_points=5, points_to_evaluate=[first])
    design = core.ask(5)
    assert design[0] == first
    U = SPACE.to_unit(design[1:])
    assert sorted(np.floor(U[:, 0] * 4).astype(int)) == [0, 1, 2, 3]  # one point per stratum of x


def test_a_generation_core_waits_and_finishes():
    core = GenerationCore(SPACE, seed=1, size=3, n_generations=2)
    first = core.ask(5)
    assert len(first) == 3 and core.ask(2) == []  # the generation is out: nothing until it is told
    core.tell(first[:2], [objective(c) for c in first[:2]])
    core.discard(first[2:])  # the third never reports
    second = core.ask(3)
    assert len(second) == 3 and not core.is_finished
    core.tell(second, [objective(c) for c in second])
    assert core.is_finished and core.ask(4) == []


class GenerationSearch(CoreSearcher):
    """A Tune searcher over GenerationCore: all a new searcher writes."""

    objectives_range = (1, 1)

    def __init__(self, space, metric, mode, *, seed: int, size: int = 3) -> None:
        super().__init__(space, metric, mode, seed=seed, options={"size": check_int("size", size, 1)})

    def _build_core(self, space, n_objectives, points, seed) -> GenerationCore:
        return GenerationCore(space, seed=seed, size=self._options["size"], n_generations=2)


def test_adapter_waits_for_a_generation_drops_failures_and_finishes():
    s = GenerationSearch(SPACE, "loss", "max", seed=0, size=2)
    a, b = s.suggest("a"), s.suggest("b")
    assert isinstance(a, dict) and isinstance(b, dict)
    assert s.suggest("c") is None  # waiting for the generation
    s.on_trial_complete("a", {"loss": 1.0})
    s.on_trial_complete("b", error=True)  # dropped: the core discards it, the generation completes
    c, d = s.suggest("c"), s.suggest("d")
    s.on_trial_complete("c", {"loss": 2.0})
    s.on_trial_complete("d", {"loss": 3.0})
    assert s.suggest("e") == Searcher.FINISHED
    np.testing.assert_allclose(s.core.values[:, 0], [-1.0, -2.0, -3.0])  # "max" flipped once
    assert s.core.configs == [a, c, d]


def test_constraints_are_checked_like_objectives():
    core = RandomCore(SPACE, seed=0, n_constraints=2)
    config = {"x": 0.5, "k": 1}
    with pytest.raises(ConfigError, match=r"constraints must have shape \(1, 2\)"):
        core.tell([config], [1.0], constraints=[[0.0]])
    with pytest.raises(ConfigError, match=r"constraints must be finite"):
        core.tell([config], [1.0], constraints=[[0.0, float("nan")]])
    with pytest.raises(ConfigError, match=r"needs constraints with 2 values per configuration"):
        core.tell([config], [1.0])
    assert core.n_told == 0
