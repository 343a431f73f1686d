"""NSGA-II as an ask/tell core around pymoo's ``NSGA2`` (no Ray), on :class:`SearchCore`.

A whole generation is proposed at once: :meth:`~SearchCore.ask` hands out the members of
the current generation (the initial population, then ``population_size`` offspring);
once every member is told (or discarded), pymoo's survival (non-dominated sorting and
crowding) picks the next parents and the next ask draws offspring through pymoo's own
ask/tell.  ``ask`` returns fewer configurations than asked, even none, while the rest of a
generation is still being evaluated.  All objectives are minimised.  The observations,
the random stream and the constraint values live in :class:`SearchCore`; this core keeps
only the open generation (genes, which were handed out, which observation answered each)
and pymoo's parents.

The initial population is ``points_to_evaluate`` (at most ``population_size``) topped up
with configurations drawn uniformly over the genes.  ``n_generations`` (optional) ends
the search: :attr:`is_finished` turns true once that many generations were evaluated.

Variation: with probability ``crossover_prob`` (1.0: every mating crosses) per mating,
``crossover="uniform"`` (the default: each gene from either parent, as Optuna's NSGAIISampler
does) or ``crossover="sbx"`` (simulated binary crossover, distribution index
``crossover_eta``, 15 unless given); then polynomial mutation with probability
``mutation_prob`` per variable (1 / number of variables unless given) and index
``mutation_eta`` (10).  The CMOSB paper's settings are SBX with index 2, crossover
probability 0.9, mutation probability 0.1 and index 20 (the CMOSB workflow passes them).
Crossing every mating (a mating that does not cross hands on a parent changed only by
mutation, close to a repeat) and the wider mutation step (index 10 rather than pymoo's 20)
reached a larger hypervolume within 200 evaluations at 30 variables than crossing with
probability 0.9 and index 20 (``experiments/bench_nsga2_peers.py``, docs/searchers.md).

Genes are real numbers between the parameter's bounds (the logarithm for log-scaled
floats); **integer genes** (``Int`` parameters, on their linear scale, and the index of a
``Categorical``) go through the same operators and are then rounded to the nearest integer
by a repair, pymoo's documented way to keep integer variables integer.  The genome then
holds the exact integer, so pymoo's duplicate elimination sees repeats.  The paper's binary
chromosomes (single-point crossover, bit flips) are not reproduced.

Constraints are told as values ``g <= 0`` (satisfied), handled either as the paper's
penalty (Algorithm 3, lines 8-9: ``f_j += alpha * max(0, g)`` on the objective each
constraint bounds, all objectives when it bounds none) or by pymoo's constraint
domination (feasible first, then by total violation).  A :meth:`discard`-ed member (an
evaluation that failed) enters survival with every objective at ``FAILED_VALUE`` (and,
under constraint domination, every constraint too), so it ranks last.

Members are named ``(generation, slot)``: the generation that proposed them (0 for the
initial population) and their place in it, the order :meth:`ask` hands them out.
:meth:`population_history` lists, after every completed generation, the members that
survived into the population (the parents of the next generation), so the hypervolume of
the current population can be followed generation by generation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2 as PymooNSGA2
from pymoo.core.evaluator import Evaluator
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.core.termination import NoTermination
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.crossover.ux import UniformCrossover
from pymoo.operators.mutation.pm import PM
from pymoo.problems.static import StaticProblem

from raytune_fed._checks import check_choice, check_float, check_int, check_share
from raytune_fed.algorithms.base import Config, SearchCore
from raytune_fed.errors import ConfigError
from raytune_fed.random import Seed
from raytune_fed.space import Categorical, Float, Int, SearchSpace

FAILED_VALUE = 1e12
CONSTRAINT_HANDLING = ("domination", "penalty")
CROSSOVERS = ("uniform", "sbx")
SBX_ETA = 15.0  # pymoo's default distribution index of SBX
CROSSOVER_PROB = 1.0  # every mating crosses (pymoo and Optuna: 0.9)
MUTATION_ETA = 10.0  # polynomial mutation's index (pymoo: 20)
_UNTOLD, _FAILED = -1, -2  # what a generation member's observation index holds before / instead of a tell


class _Genome:
    """Parameters <-> real genes (log for log floats, integers for Int and Categorical)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        lo, hi, integer = [], [], []
        for p in space.params:
            if isinstance(p, Float):
                lo.append(math.log(p.low) if p.log else p.low)
                hi.append(math.log(p.high) if p.log else p.high)
                integer.append(False)
            elif isinstance(p, Int):
                lo.append(p.low)
                hi.append(p.high)
                integer.append(True)
            else:
                lo.append(0)
                hi.append(len(p.choices) - 1)
                integer.append(True)
        self.lower, self.upper = np.array(lo, dtype=float), np.array(hi, dtype=float)
        self.integer = np.array(integer, dtype=bool)

    def repair(self, X: np.ndarray) -> np.ndarray:
        X = np.clip(np.asarray(X, dtype=float), self.lower, self.upper)
        X[:, self.integer] = np.rint(X[:, self.integer])
        return X

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p, v in zip(self.space.params, self.repair(np.atleast_2d(x))[0]):
            if isinstance(p, Float):
                out[p.name] = float(min(max(math.exp(v) if p.log else v, p.low), p.high))
            elif isinstance(p, Int):
                out[p.name] = int(v)
            else:
                out[p.name] = p.choices[int(v)]
        return out

    def encode(self, config: Mapping[str, Any]) -> np.ndarray:
        self.space.validate(config)
        x = []
        for p in self.space.params:
            v = config[p.name]
            if isinstance(p, Categorical):
                x.append(float(list(p.choices).index(v)))
            elif isinstance(p, Float) and p.log:
                x.append(math.log(float(v)))
            else:
                x.append(float(v))
        return np.array(x)


class _IntegerRepair(Repair):
    def __init__(self, genome: _Genome) -> None:
        super().__init__()
        self.genome = genome

    def _do(self, problem: Any, X: np.ndarray, **kwargs: Any) -> np.ndarray:
        return self.genome.repair(X)


def _floats(values: Any) -> list:
    return [[float(v) for v in row] for row in np.atleast_2d(np.asarray(values, dtype=float))]


def _array(rows: Any, width: int) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in rows], dtype=float).reshape(-1, width)


def _members(pop: Population) -> list[list[int]]:
    """The ``[generation, slot]`` of every individual of ``pop``."""
    return [[int(g), int(i)] for g, i in np.asarray(pop.get("member"), dtype=int).reshape(-1, 2)]


def _optional(values: Any, kind: type) -> list:
    """Survival's rank or crowding per parent; None where survival set none (infeasible parents)."""
    return [None if v is None else kind(v) for v in values]


def _optional_array(values: Any, kind: type, n: int) -> np.ndarray:
    values = [None if v is None else kind(v) for v in values]
    if len(values) != n:
        raise ConfigError(f"malformed NSGA2 state: {len(values)} ranks or crowding values for {n} parents")
    return np.array(values, dtype=object if None in values else kind)


class NSGA2(SearchCore):
    """Ask/tell NSGA-II over ``space`` with ``n_objectives`` minimised objectives.

    Parameters
    ----------
    space, n_objectives, seed, n_constraints, points_to_evaluate : as :class:`SearchCore`
        (``points_to_evaluate`` join the initial population).
    population_size : parents per generation and offspring per generation (>= 2).
    n_generations : generations to evaluate before :attr:`is_finished` (None: no end).
    constraint_handling : ``"domination"`` (pymoo) or ``"penalty"`` (the paper's, ``alpha``).
    penalty : ``alpha`` of the penalty (the paper's 20).
    constrained_objectives : for the penalty, the objective index each constraint bounds
        (None: all objectives); default all None.
    crossover : ``"uniform"`` or ``"sbx"``; crossover_prob : per mating (1.0).
    crossover_eta : SBX's distribution index (only with ``crossover="sbx"``; None: 15).
    mutation_prob : polynomial mutation's probability per variable (None: 1 / variables).
    mutation_eta : its distribution index (10).
    """

    def __init__(self, space: SearchSpace, n_objectives: int, *, seed: Seed, population_size: int = 20,
                 n_generations: int | None = None, n_constraints: int = 0, constraint_handling: str = "domination",
                 penalty: float = 20.0, constrained_objectives: Sequence[int | None] | None = None,
                 crossover: str = "uniform", crossover_prob: float = CROSSOVER_PROB,
                 crossover_eta: float | None = None, mutation_prob: float | None = None,
                 mutation_eta: float = MUTATION_ETA, points_to_evaluate: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(space, seed=seed, n_objectives=n_objectives, n_constraints=n_constraints)
        self.population_size = check_int("population_size", population_size, 2)
        self.n_generations = None if n_generations is None else check_int("n_generations", n_generations, 1)
        if constraint_handling not in CONSTRAINT_HANDLING:
            raise ConfigError(f"constraint_handling must be one of {list(CONSTRAINT_HANDLING)}, "
                              f"got {constraint_handling!r}")
        self.constraint_handling = constraint_handling
        self.penalty = check_float("penalty", penalty, 0.0)
        targets = [None] * self.n_constraints if constrained_objectives is None else list(constrained_objectives)
        if len(targets) != self.n_constraints or any(
                t is not None and (isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.n_objectives)
                for t in targets):
            raise ConfigError(f"constrained_objectives must give one objective index in [0, {self.n_objectives}) "
                              f"or None per constraint ({self.n_constraints}), got {constrained_objectives!r}")
        self.constrained_objectives = targets
        self.crossover = check_choice("crossover", crossover, CROSSOVERS)
        self.crossover_prob = check_share("crossover_prob", crossover_prob, 0.0, 1.0, low_open=False)
        if crossover_eta is not None and crossover != "sbx":
            raise ConfigError(f"crossover_eta applies to crossover='sbx' only, got crossover_eta={crossover_eta!r} "
                              f"with crossover={crossover!r}")
        self.crossover_eta = None if crossover_eta is None else check_float("crossover_eta", crossover_eta, 0.0)
        self.mutation_prob = None if mutation_prob is None \
            else check_share("mutation_prob", mutation_prob, 0.0, 1.0, low_open=False)
        self.mutation_eta = check_float("mutation_eta", mutation_eta, 0.0)
        if isinstance(points_to_evaluate, Mapping) or not isinstance(points_to_evaluate, Sequence):
            raise ConfigError(f"points_to_evaluate must be a list of configurations, got {points_to_evaluate!r:.200}")
        self.points_to_evaluate = space.normalize(points_to_evaluate, "a point to evaluate")
        if len(self.points_to_evaluate) > self.population_size:
            raise ConfigError(f"points_to_evaluate has {len(self.points_to_evaluate)} configurations, more than "
                              f"population_size={self.population_size}")
        self._genome = _Genome(space)
        self._algorithm = self._build()
        self._generation = 0                                   # generations whose members were all told
        self._gen_X = np.empty((0, space.dim))                 # genes of the open generation's members
        self._asked = np.zeros(0, dtype=bool)                  # handed out by ask
        self._obs = np.zeros(0, dtype=int)                     # observation index, _UNTOLD or _FAILED
        self._members: list[Config] = []                       # the members as configurations
        self._history: list[list[list[int]]] = []              # survivors [generation, slot] after each generation

    # ------------------------------------------------------------------ pymoo
    @property
    def _pymoo_constraints(self) -> int:
        return self.n_constraints if self.constraint_handling == "domination" else 0

    def _build(self) -> PymooNSGA2:
        g = self._genome
        problem = Problem(n_var=self.space.dim, n_obj=self.n_objectives, n_ieq_constr=self._pymoo_constraints,
                          xl=g.lower, xu=g.upper)
        crossover = UniformCrossover(prob=self.crossover_prob) if self.crossover == "uniform" \
            else SBX(prob=self.crossover_prob, eta=SBX_ETA if self.crossover_eta is None else self.crossover_eta)
        mutation_prob = 1.0 / self.space.dim if self.mutation_prob is None else self.mutation_prob
        algorithm = PymooNSGA2(pop_size=self.population_size, crossover=crossover,
                               mutation=PM(prob=1.0, prob_var=mutation_prob, eta=self.mutation_eta),
                               repair=_IntegerRepair(g), eliminate_duplicates=True)
        algorithm.setup(problem, termination=NoTermination(), seed=0)
        algorithm.random_state = self._rng  # the base's stream: saved and restored with the core
        return algorithm

    def _initial_population(self) -> np.ndarray:
        """``points_to_evaluate`` then uniform draws (integers uniform over their values)."""
        g = self._genome
        n = self.population_size - len(self.points_to_evaluate)
        low = np.where(g.integer, g.lower - 0.5, g.lower)
        high = np.where(g.integer, g.upper + 0.5, g.upper)
        drawn = low + self._rng.random((n, self.space.dim)) * (high - low)
        forced = [g.encode(c) for c in self.points_to_evaluate]
        return g.repair(np.vstack(forced + [drawn]) if forced else drawn)

    def _open_generation(self) -> None:
        if not self._algorithm.is_initialized:
            self._algorithm.initialization.sampling = self._initial_population()
        pop = self._algorithm.ask()
        X = np.asarray(pop.get("X"), dtype=float) if pop is not None else np.empty((0, self.space.dim))
        self._set_generation(X, np.zeros(len(X), dtype=bool), np.full(len(X), _UNTOLD))

    def _set_generation(self, X: np.ndarray, asked: np.ndarray, obs: np.ndarray) -> None:
        self._gen_X, self._asked, self._obs = X, asked, obs
        self._members = self.space.normalize([self._genome.decode(x) for x in X]) if len(X) else []
        if self._generation == 0:  # the points to evaluate exactly as given, not through log/exp
            for i, point in enumerate(self.points_to_evaluate[:len(X)]):
                if np.allclose(X[i], self._genome.encode(point), rtol=1e-12, atol=1e-12):
                    self._members[i] = dict(point)

    def survival_objectives(self, Y: np.ndarray, G: np.ndarray) -> np.ndarray:
        """The objectives survival ranks for observations ``Y`` with constraint values ``G``: under the penalty,
        ``alpha * max(0, g)`` added to the objective each constraint bounds (every objective when it bounds
        none); under constraint domination ``Y`` itself (pymoo reads ``G`` apart)."""
        F = np.array(Y, dtype=float, copy=True)
        if self.constraint_handling == "penalty":
            G = np.asarray(G, dtype=float).reshape(len(F), self.n_constraints)
            for j, target in enumerate(self.constrained_objectives):
                extra = self.penalty * np.maximum(0.0, G[:, j])
                if target is None:
                    F += extra[:, None]
                else:
                    F[:, target] += extra
        return F

    def _close_generation(self) -> None:
        told = self._obs >= 0
        F = np.full((len(self._gen_X), self.n_objectives), FAILED_VALUE)
        G = np.zeros((len(self._gen_X), self.n_constraints))
        F[told], G[told] = self._Y[self._obs[told]], self._G[self._obs[told]]
        F[told] = self.survival_objectives(F[told], G[told])
        pop = Population.new("X", self._gen_X)
        pop.set("member", np.column_stack([np.full(len(self._gen_X), self._generation), np.arange(len(self._gen_X))]))
        values = {"F": F}
        if self._pymoo_constraints:
            G[~told] = FAILED_VALUE
            values["G"] = G
        Evaluator().eval(StaticProblem(self._algorithm.problem, **values), pop)
        self._algorithm.tell(infills=pop)
        self._history.append(_members(self._algorithm.pop))
        self._generation += 1
        self._set_generation(np.empty((0, self.space.dim)), np.zeros(0, dtype=bool), np.zeros(0, dtype=int))

    # ------------------------------------------------------------------ the protocol
    @property
    def generation(self) -> int:
        """Number of completed generations (the initial population is generation 1)."""
        return self._generation

    @property
    def is_finished(self) -> bool:
        """True once ``n_generations`` generations were evaluated."""
        return self.n_generations is not None and self._generation >= self.n_generations

    def population(self) -> list[Config]:
        """The current parents (after the last completed generation)."""
        pop = self._algorithm.pop
        return [] if pop is None or not self._generation else [self._genome.decode(x) for x in pop.get("X")]

    def population_history(self) -> list[list[tuple[int, int]]]:
        """After each completed generation, the ``(generation, slot)`` of every member of the population."""
        return [[(g, i) for g, i in survivors] for survivors in self._history]

    def _propose(self, n: int, pending: list[Config]) -> list[Config]:
        # pending is not needed: the open generation's members are all distinct and known here
        if len(self._gen_X) == 0:
            self._open_generation()
        free = np.flatnonzero(~self._asked)[:n]
        self._asked[free] = True
        return [dict(self._members[i]) for i in free]

    def _on_tell(self, configs: list[Config], Y: np.ndarray, G: np.ndarray) -> None:
        if not configs:
            return
        try:
            slots = self._slots(configs)
        except ConfigError:  # take the just-stored observations back: the core stays as it was
            n = len(configs)
            del self._configs[-n:]
            self._Y, self._G = self._Y[:-n], self._G[:-n]
            raise
        self._obs[slots] = np.arange(self.n_told - len(configs), self.n_told)
        self._close_if_complete()

    def discard(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Members that will never be told: they enter survival as failures (ranked last)."""
        if isinstance(configs, Mapping) or not isinstance(configs, Sequence):
            raise ConfigError(f"configs must be a list of configurations, got {configs!r:.200}")
        configs = self.space.normalize(configs, "a discarded configuration")
        if configs:
            self._obs[self._slots(configs)] = _FAILED
            self._close_if_complete()

    def _slots(self, configs: list[Config]) -> list[int]:
        """The open generation's asked, untold member of each configuration (each at most once)."""
        taken: list[int] = []
        for config in configs:
            slot = next((i for i, m in enumerate(self._members)
                         if self._asked[i] and self._obs[i] == _UNTOLD and i not in taken and m == config), None)
            if slot is None:
                raise ConfigError(f"configuration {config!r} is not an asked, untold member of generation "
                                  f"{self._generation + 1}")
            taken.append(slot)
        return taken

    def _close_if_complete(self) -> None:
        if len(self._obs) and (self._obs != _UNTOLD).all():
            self._close_generation()

    # ------------------------------------------------------------------ state
    def _settings(self) -> dict[str, Any]:
        return {**super()._settings(), "population_size": self.population_size,
                "n_generations": self.n_generations, "constraint_handling": self.constraint_handling,
                "penalty": self.penalty, "constrained_objectives": list(self.constrained_objectives),
                "crossover": self.crossover, "crossover_prob": self.crossover_prob,
                "crossover_eta": self.crossover_eta,
                "mutation_prob": self.mutation_prob, "mutation_eta": self.mutation_eta,
                "points_to_evaluate": [dict(c) for c in self.points_to_evaluate]}

    def _core_state(self) -> dict[str, Any]:
        """The open generation and pymoo's parents (with their survival rank and crowding)."""
        alg = self._algorithm
        state: dict[str, Any] = {
            "generation": self._generation, "population_history": [list(map(list, h)) for h in self._history],
            "open": {"X": _floats(self._gen_X) if len(self._gen_X) else [], "asked": self._asked.tolist(),
                     "observation": self._obs.tolist()},
            "parents": None}
        if self._generation:
            pop = alg.pop
            state["parents"] = {"X": _floats(pop.get("X")), "F": _floats(pop.get("F")),
                                "G": _floats(pop.get("G")) if self._pymoo_constraints else [],
                                "member": _members(pop), "rank": _optional(pop.get("rank"), int),
                                "crowding": _optional(pop.get("crowding"), float)}
        return state

    def _set_core_state(self, state: Any) -> None:
        generation = check_int("generation", state["generation"], 0)
        opened = state["open"]
        X = _array(opened["X"], self.space.dim)
        asked = np.array(opened["asked"], dtype=bool).reshape(-1)
        obs = np.array(opened["observation"], dtype=int).reshape(-1)
        if not (len(asked) == len(obs) == len(X)) or ((obs < _FAILED) | (obs >= self.n_told)).any() \
                or (asked < (obs != _UNTOLD)).any():
            raise ConfigError("malformed NSGA2 state: the open generation's genes, asked flags and observations "
                              "do not fit together")
        history = [[[check_int("member generation", g, 0, generation - 1), check_int("member slot", i, 0)]
                    for g, i in survivors] for survivors in state["population_history"]]
        if len(history) != generation:
            raise ConfigError(f"malformed NSGA2 state: {len(history)} populations recorded for {generation} "
                              "completed generations")
        algorithm = self._build()
        parents = state["parents"]
        if (parents is None) != (generation == 0):
            raise ConfigError(f"malformed NSGA2 state: generation {generation} with parents={parents is not None}")
        if parents is not None:
            P = _array(parents["X"], self.space.dim)
            pop = Population.new("X", P)
            values = {"F": _array(parents["F"], self.n_objectives)}
            if self._pymoo_constraints:
                values["G"] = _array(parents["G"], self.n_constraints)
            Evaluator().eval(StaticProblem(algorithm.problem, **values), pop)
            member = np.array(parents["member"], dtype=int).reshape(-1, 2)
            if len(member) != len(P) or member.tolist() != history[-1]:
                raise ConfigError("malformed NSGA2 state: the parents are not the last recorded population")
            pop.set("member", member)
            pop.set("rank", _optional_array(parents["rank"], int, len(P)),
                    "crowding", _optional_array(parents["crowding"], float, len(P)))
            algorithm.pop, algorithm.is_initialized, algorithm.n_iter = pop, True, generation + 1
            algorithm._set_optimum()
        self._algorithm, self._generation, self._history = algorithm, generation, history
        self._set_generation(X, asked, obs)
