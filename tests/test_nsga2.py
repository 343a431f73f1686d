"""NSGA-II ask/tell core: generations, integer genes, constraints, failures, explicit state.

The shared core contract (lifecycle, reproducibility, state, bad input) runs in
``tests/test_contracts.py``; these tests cover what is NSGA-II's own.
"""

import json
import subprocess
import sys

import numpy as np
import pytest

from raytune_fed.algorithms.nsga2 import FAILED_VALUE, NSGA2
from raytune_fed.errors import ConfigError
from raytune_fed.metrics import hypervolume
from raytune_fed.space import Categorical, Float, Int, SearchSpace

MIXED = SearchSpace((Int("trees", 1, 16), Float("rate", 0.01, 0.3, log=True), Categorical("kind", ("a", "b", "c")),
                     Float("share", 0.0, 1.0)))
ZDT = SearchSpace(tuple(Float(f"x{i}", 0.0, 1.0) for i in range(6)))


def _mixed(c):
    return [c["trees"] / 16 + c["share"], 1 - c["share"] + c["rate"] + (c["kind"] == "b")]


def _zdt1(c):
    x = np.array([c[f"x{i}"] for i in range(6)])
    g = 1 + 9 * x[1:].mean()
    return [x[0], g * (1 - np.sqrt(x[0] / g))]


def _run(core, f, generations, constraint=None):
    for _ in range(generations):
        configs = core.ask(1000)
        core.tell(configs, [f(c) for c in configs],
                  constraints=None if constraint is None else [constraint(c) for c in configs])
    return core


def test_a_whole_generation_is_proposed_and_integer_genes_stay_integer():
    core = NSGA2(MIXED, 2, population_size=8, seed=0)
    first = core.ask(3) + core.ask(100)
    assert len(first) == 8 and core.ask(5) == []  # the rest waits for results
    for c in first:
        assert isinstance(c["trees"], int) and 1 <= c["trees"] <= 16 and c["kind"] in ("a", "b", "c")
        assert 0.01 <= c["rate"] <= 0.3
    core.tell(first[:5], [_mixed(c) for c in first[:5]])
    assert core.generation == 0 and core.ask(2) == []
    core.tell(first[5:], [_mixed(c) for c in first[5:]])
    offspring = core.ask(100)
    assert core.generation == 1 and len(offspring) == 8
    assert all(isinstance(c["trees"], int) for c in offspring)


@pytest.mark.parametrize("variation", [{}, {"crossover": "sbx", "crossover_eta": 2.0, "mutation_prob": 0.1}])
def test_search_improves_zdt1(variation):
    core = NSGA2(ZDT, 2, population_size=20, seed=3, **variation)
    core = _run(core, _zdt1, 1)
    start = hypervolume(core.pareto_front(), [1.1, 11.0])
    _run(core, _zdt1, 29)
    assert core.generation == 30
    assert hypervolume(core.pareto_front(), [1.1, 11.0]) > start + 0.5


WIDE = SearchSpace(tuple(Float(f"x{i:02d}", 0.0, 1.0) for i in range(30)))


def _zdt1_wide(c):
    x = np.array([c[f"x{i:02d}"] for i in range(30)])
    g = 1 + 9 * x[1:].mean()
    return [x[0], g * (1 - np.sqrt(x[0] / g))]


def _genes(configs, space):
    return np.array([[c[name] for name in space.names] for c in configs], dtype=float)


@pytest.mark.parametrize("seed", range(5))
def test_every_mating_crosses_so_no_offspring_is_a_mutated_copy_of_a_parent(seed):
    """Default variation: uniform crossover on every mating.  A mating that does not cross hands on a parent
    changed only by mutation (about one gene of 30): a near repeat that spends an evaluation."""
    core = NSGA2(WIDE, 2, population_size=30, seed=seed)
    parents = core.ask(100)
    core.tell(parents, [_zdt1_wide(c) for c in parents])
    P, children = _genes(parents, WIDE), _genes(core.ask(100), WIDE)
    assert len(children) == 30
    shared = (children[:, None, :] == P[None, :, :]).sum(axis=2)  # genes each child holds exactly from each parent
    # from a crossing of two first-generation parents (no values in common): genes from both, about 15 each
    assert shared.max() <= 30 - 4, f"an offspring shares {shared.max()} of 30 genes with one parent"
    assert (np.sort(shared, axis=1)[:, -2:].sum(axis=1) >= 30 - 4).all()  # the rest comes from a second parent


def test_polynomial_mutation_steps_with_index_10_and_stays_within_the_bounds():
    """Without crossover and with every gene mutated, an offspring is its parent moved by polynomial mutation:
    index 10 moves a gene on [0, 1] by about 1 / (10 + 2) on average (index 20: about 1 / 22); offspring stay
    within every parameter's bounds, integer genes integer."""
    core = NSGA2(WIDE, 2, population_size=40, crossover_prob=0.0, mutation_prob=1.0, seed=0)
    parents = core.ask(100)
    core.tell(parents, [_zdt1_wide(c) for c in parents])
    P, children = _genes(parents, WIDE), _genes(core.ask(100), WIDE)
    steps = np.abs(children[:, None, :] - P[None, :, :]).sum(axis=2).min(axis=1) / WIDE.dim  # to the nearest parent
    assert 0.06 < steps.mean() < 0.11, steps.mean()
    assert ((children >= 0.0) & (children <= 1.0)).all()
    mixed = NSGA2(MIXED, 2, population_size=12, crossover_prob=0.0, mutation_prob=1.0, seed=1)
    for _ in range(4):
        configs = mixed.ask(100)
        for c in configs:
            assert 1 <= c["trees"] <= 16 and isinstance(c["trees"], int) and 0.01 <= c["rate"] <= 0.3
            assert c["kind"] in ("a", "b", "c") and 0.0 <= c["share"] <= 1.0
        mixed.tell(configs, [_mixed(c) for c in configs])


@pytest.mark.parametrize("seed", range(3))
def test_200_evaluations_on_30_variable_zdt1_beat_as_many_uniform_draws(seed):
    """A floor: 10 generations of 20 reach clearly more hypervolume than 200 configurations drawn uniformly (the
    benchmark's reference point; NSGA-II's first generation is such a draw)."""
    core = _run(NSGA2(WIDE, 2, population_size=20, seed=seed), _zdt1_wide, 10)
    assert core.n_told == 200
    draws = np.random.default_rng(seed).random((200, 30))
    uniform = [_zdt1_wide(dict(zip(WIDE.names, x))) for x in draws]
    assert hypervolume(core.values, [1.1, 10.0]) > hypervolume(uniform, [1.1, 10.0]) + 0.3


@pytest.mark.parametrize("handling", ["domination", "penalty"])
def test_the_constrained_front_is_feasible(handling):
    core = NSGA2(ZDT, 2, population_size=20, n_constraints=1, constraint_handling=handling,
                 constrained_objectives=[0], seed=1)
    _run(core, _zdt1, 15, constraint=lambda c: [0.4 - c["x0"]])  # feasible: x0 >= 0.4
    configs = core.pareto_configs()
    assert configs and all(c["x0"] >= 0.4 for c in configs)
    parents = core.population()
    assert np.mean([c["x0"] >= 0.4 for c in parents]) >= 0.9


@pytest.mark.parametrize("handling", ["domination", "penalty"])
def test_a_bound_no_evaluation_violates_makes_the_unconstrained_search_again(handling):
    """A bound that every evaluation of the unconstrained search meets (Synthetic2's leakage <= 0.6) needs no
    constrained run: the same seed makes the same proposals, generation after generation."""
    free = _run(NSGA2(ZDT, 2, population_size=10, seed=4), _zdt1, 12)
    bounded = _run(NSGA2(ZDT, 2, population_size=10, n_constraints=1, constraint_handling=handling,
                         constrained_objectives=[0], seed=4), _zdt1, 12, constraint=lambda c: [c["x0"] - 1.5])
    assert bounded.population() == free.population() and bounded.ask(100) == free.ask(100)
    tight = _run(NSGA2(ZDT, 2, population_size=10, n_constraints=1, constraint_handling=handling,
                       constrained_objectives=[0], seed=4), _zdt1, 12, constraint=lambda c: [0.3 - c["x0"]])
    assert tight.population() != free.population()  # a bound that binds changes the search


def test_penalty_adds_alpha_times_the_violation_to_the_bounded_objective():
    core = NSGA2(ZDT, 2, population_size=4, n_constraints=1, constraint_handling="penalty",
                 constrained_objectives=[1], penalty=20.0, seed=0)
    configs = core.ask(4)
    core.tell(configs, [[0.5, 0.5]] * 4, constraints=[[0.1], [-1.0], [0.0], [0.2]])
    F = core._algorithm.pop.get("F")
    assert sorted(F[:, 1].round(6).tolist()) == [0.5, 0.5, 2.5, 4.5]


def test_survival_objectives_are_what_survival_ranks_under_each_handling():
    """The same values survival ranked above, per row; on every objective when a constraint bounds none."""
    Y, G = [[0.5, 0.5]] * 3, [[0.1], [-1.0], [0.2]]
    on_one = NSGA2(ZDT, 2, population_size=4, n_constraints=1, constraint_handling="penalty",
                   constrained_objectives=[1], penalty=20.0, seed=0)
    assert on_one.survival_objectives(Y, G).round(6).tolist() == [[0.5, 2.5], [0.5, 0.5], [0.5, 4.5]]
    on_all = NSGA2(ZDT, 2, population_size=4, n_constraints=1, constraint_handling="penalty",
                   constrained_objectives=[None], penalty=10.0, seed=0)
    assert on_all.survival_objectives(Y, G).round(6).tolist() == [[1.5, 1.5], [0.5, 0.5], [2.5, 2.5]]
    dominated = NSGA2(ZDT, 2, population_size=4, n_constraints=1, constraint_handling="domination", seed=0)
    assert dominated.survival_objectives(Y, G).tolist() == Y


def test_discarded_members_close_the_generation_and_rank_last():
    core = NSGA2(ZDT, 2, population_size=4, seed=0)
    configs = core.ask(4)
    core.tell([configs[0], configs[2]], [[0.1, 0.1], [0.2, 0.2]])
    core.discard([configs[1]])
    assert core.generation == 0 and core.ask(4) == []
    core.discard([configs[3]])
    assert core.generation == 1 and core.n_told == 2
    F = core._algorithm.pop.get("F")
    assert sorted(F[:, 0].tolist()) == [0.1, 0.2, FAILED_VALUE, FAILED_VALUE]
    assert core.pareto_configs() == [configs[0]]
    with pytest.raises(ConfigError, match="not an asked, untold member of generation 2"):
        core.discard([configs[1]])


def test_points_to_evaluate_join_the_initial_population_and_n_generations_ends_the_search():
    point = {"trees": 3, "rate": 0.1, "kind": "c", "share": 0.5}
    core = NSGA2(MIXED, 2, population_size=4, n_generations=2, points_to_evaluate=[point], seed=0)
    first = core.ask(10)
    assert first[0] == point and len(first) == 4
    core.tell(first, [_mixed(c) for c in first])
    second = core.ask(10)
    core.tell(second, [_mixed(c) for c in second])
    assert core.generation == 2 and core.is_finished and core.ask(3) == []


def test_state_round_trip_continues_exactly_as_an_uninterrupted_run():
    def run(stop_at):
        core = NSGA2(MIXED, 2, population_size=10, n_constraints=1, seed=4)
        asked = []
        for gen in range(5):
            configs = core.ask(4) + core.ask(100)
            core.tell(configs[:3], [_mixed(c) for c in configs[:3]],
                      constraints=[[c["trees"] - 10] for c in configs[:3]])
            if gen == stop_at:
                state = json.loads(json.dumps(core.get_state()))
                core = NSGA2(MIXED, 2, population_size=10, n_constraints=1, seed=4)
                core.set_state(state)
            core.tell(configs[3:], [_mixed(c) for c in configs[3:]],
                      constraints=[[c["trees"] - 10] for c in configs[3:]])
            asked += configs
        return asked, core.get_state()

    straight, final = run(-1)
    for stop in (0, 2):
        resumed, final2 = run(stop)
        assert resumed == straight and final2 == final


@pytest.mark.process
def test_the_same_seed_asks_the_same_in_another_process():
    code = ("from raytune_fed.algorithms.nsga2 import NSGA2\n"
            "from raytune_fed.space import SearchSpace, Float, Int\n"
            "core = NSGA2(SearchSpace((Int('a', 1, 9), Float('b', 0, 1))), 2, population_size=6, seed=11)\n"
            "cs = core.ask(6); core.tell(cs, [[c['a'], c['b']] for c in cs]); print(core.ask(6))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    core = NSGA2(SearchSpace((Int("a", 1, 9), Float("b", 0, 1))), 2, population_size=6, seed=11)
    cs = core.ask(6)
    core.tell(cs, [[c["a"], c["b"]] for c in cs])
    assert out == repr(core.ask(6))


@pytest.mark.parametrize("kwargs, message", [
    ({"population_size": 1}, r"population_size must be an integer >= 2, got 1"),
    ({"constraint_handling": "ignore"}, r"constraint_handling must be one of \['domination', 'penalty'\]"),
    ({"n_constraints": 1, "constrained_objectives": [2]}, "constrained_objectives must give one objective index"),
    ({"crossover_prob": 1.5}, r"crossover_prob must be in \[0, 1\], got 1.5"),
    ({"crossover": "one_point"}, r"crossover must be one of \['uniform', 'sbx'\], got 'one_point'"),
    ({"crossover_eta": 2.0}, r"crossover_eta applies to crossover='sbx' only"),
    ({"n_generations": 0}, r"n_generations must be an integer >= 1, got 0"),
    ({"points_to_evaluate": [dict.fromkeys(ZDT.names, 0.5)] * 3, "population_size": 2},
     r"points_to_evaluate has 3 .* population_size=2"),
    ({"seed": -1}, "seed must be a non-negative int"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        NSGA2(ZDT, 2, **{"seed": 0, **kwargs})


def test_a_stranger_or_a_second_tell_is_rejected_and_leaves_the_core_as_it_was():
    core = NSGA2(MIXED, 2, population_size=4, n_constraints=1, seed=0)
    configs = core.ask(4)
    core.tell(configs[:1], [[1.0, 2.0]], constraints=[[0.0]])
    before = json.dumps(core.get_state())
    stranger = {**configs[1], "share": 0.123456}
    for told in ([stranger], [configs[0]], [configs[1], configs[1]]):
        with pytest.raises(ConfigError, match="not an asked, untold member of generation 1"):
            core.tell(told, [[1.0, 2.0]] * len(told), constraints=[[0.0]] * len(told))
        assert json.dumps(core.get_state()) == before
    other = NSGA2(MIXED, 2, population_size=6, n_constraints=1, seed=0)
    with pytest.raises(ConfigError, match="other settings: population_size=4"):
        other.set_state(core.get_state())


def test_population_history_names_the_survivors_of_every_generation():
    core = NSGA2(MIXED, 2, population_size=6, seed=2)
    asked = {}
    for g in range(4):
        configs = core.ask(100)
        asked.update({(g, i): c for i, c in enumerate(configs)})
        core.tell(configs[::-1], [_mixed(c) for c in configs[::-1]])  # told in reverse: slots are ask order
    history = core.population_history()
    assert len(history) == 4 and all(len(h) == 6 for h in history)
    assert sorted(history[0]) == [(0, i) for i in range(6)]
    for g in range(1, 4):  # a population holds last population's members and this generation's offspring
        assert set(history[g]) <= set(history[g - 1]) | {(g, i) for i in range(6)}
    assert sorted(map(repr, core.population())) == sorted(repr(core._genome.decode(core._genome.encode(asked[m])))
                                                          for m in history[-1])
    restored = NSGA2(MIXED, 2, population_size=6, seed=2)
    restored.set_state(json.loads(json.dumps(core.get_state())))
    assert restored.population_history() == history
