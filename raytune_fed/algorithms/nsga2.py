"""NSGA-II as an ask/tell core around pymoo's ``NSGA2`` (no Ray).

A whole generation is proposed at once: :meth:`NSGA2.ask` hands out the members of the
current generation (the initial random population, then ``population_size`` offspring);
once every member is told, pymoo's survival (non-dominated sorting and crowding) picks
the next parents and the next ask draws offspring.  All objectives are minimised.

Variation (the CMOSB paper's settings): simulated binary crossover with probability 0.9
per mating and distribution index 2, polynomial mutation with probability 0.1 per
variable and index 20.  Genes are real numbers between the parameter's bounds (the
logarithm for log-scaled floats); **integer genes** (``Int`` parameters and the index of a
``Categorical``) go through the same operators and are then rounded to the nearest
integer by a repair, pymoo's documented way to keep integer variables integer.  The
genome then holds the exact integer, so pymoo's duplicate elimination sees repeats.  The
paper's binary chromosomes (single-point crossover, bit flips) are not reproduced.

Constraints are values ``g <= 0`` (a reported metric minus its bound), handled either as
the paper's penalty (Algorithm 3, lines 8-9: ``f_j += alpha * max(0, g)`` on the
objective each constraint bounds, all objectives when it bounds none) or by pymoo's
constraint domination (feasible first, then by total violation).  An evaluation with a
non-finite objective counts as failed: every objective becomes ``FAILED_VALUE`` (and, under
constraint domination, every constraint too).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from pymoo.algorithms.moo.nsga2 import NSGA2 as PymooNSGA2
from pymoo.core.evaluator import Evaluator
from pymoo.core.population import Population
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.core.termination import NoTermination
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.problems.static import StaticProblem

from raytune_fed._checks import check_float, check_int, check_share
from raytune_fed.errors import ConfigError
from raytune_fed.metrics import pareto_mask
from raytune_fed.random import as_generator, generator_from_state, generator_state, seed_int
from raytune_fed.space import Categorical, Float, Int, SearchSpace

STATE_VERSION = 1
FAILED_VALUE = 1e12
CONSTRAINT_HANDLING = ("domination", "penalty")


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
                lo.append(p.low), hi.append(p.high), integer.append(True)
            else:
                lo.append(0), hi.append(len(p.choices) - 1), integer.append(True)
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


def _floats(values: np.ndarray) -> list:
    """JSON-safe nested lists (infinities as strings)."""
    return [[v if math.isfinite(v) else ("inf" if v > 0 else "-inf") for v in map(float, row)]
            for row in np.atleast_2d(values)]


def _array(rows: Sequence[Sequence[Any]], width: int) -> np.ndarray:
    return np.array([[float(v) for v in row] for row in rows], dtype=float).reshape(-1, width)


class NSGA2:
    """Ask/tell NSGA-II over ``space`` with ``n_objectives`` minimised objectives.

    Parameters
    ----------
    population_size : parents per generation and offspring per generation (>= 2).
    n_constraints : number of constraint values told with each evaluation.
    constraint_handling : ``"domination"`` (pymoo) or ``"penalty"`` (the paper's, ``alpha``).
    penalty : ``alpha`` of the penalty (the paper's 20).
    constrained_objectives : for the penalty, the objective index each constraint bounds
        (None: all objectives); default all None.
    crossover_prob, crossover_eta, mutation_prob, mutation_eta : variation settings.
    seed : int seed of every random choice.
    """

    def __init__(self, space: SearchSpace, n_objectives: int, *, population_size: int = 20, n_constraints: int = 0,
                 constraint_handling: str = "domination", penalty: float = 20.0,
                 constrained_objectives: Sequence[int | None] | None = None, crossover_prob: float = 0.9,
                 crossover_eta: float = 2.0, mutation_prob: float = 0.1, mutation_eta: float = 20.0,
                 seed: int = 0) -> None:
        if not isinstance(space, SearchSpace):
            raise ConfigError(f"space must be a SearchSpace, got {type(space).__name__}")
        self.space = space
        self.n_objectives = check_int("n_objectives", n_objectives, 1)
        self.population_size = check_int("population_size", population_size, 2)
        self.n_constraints = check_int("n_constraints", n_constraints, 0)
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
        self.crossover_prob = check_share("crossover_prob", crossover_prob, 0.0, 1.0, low_open=False)
        self.crossover_eta = check_float("crossover_eta", crossover_eta, 0.0)
        self.mutation_prob = check_share("mutation_prob", mutation_prob, 0.0, 1.0, low_open=False)
        self.mutation_eta = check_float("mutation_eta", mutation_eta, 0.0)
        self.seed = check_int("seed", seed, 0)
        self._genome = _Genome(space)
        self._algorithm = self._build(as_generator(self.seed))
        self._generation = 0                      # generations whose offspring were all told
        self._gen_X = np.empty((0, space.dim))    # members of the current generation
        self._gen_F = np.empty((0, self.n_objectives))
        self._gen_G = np.empty((0, self.n_constraints))
        self._told = np.zeros(0, dtype=bool)
        self._asked = np.zeros(0, dtype=bool)
        self._history: list[tuple[dict[str, Any], list[float], list[float]]] = []

    # ------------------------------------------------------------------ pymoo
    @property
    def _pymoo_constraints(self) -> int:
        return self.n_constraints if self.constraint_handling == "domination" else 0

    def _build(self, rng: np.random.Generator) -> PymooNSGA2:
        g = self._genome
        problem = Problem(n_var=self.space.dim, n_obj=self.n_objectives, n_ieq_constr=self._pymoo_constraints,
                          xl=g.lower, xu=g.upper)
        algorithm = PymooNSGA2(pop_size=self.population_size,
                               crossover=SBX(prob=self.crossover_prob, eta=self.crossover_eta),
                               mutation=PM(prob=1.0, prob_var=self.mutation_prob, eta=self.mutation_eta),
                               repair=_IntegerRepair(g), eliminate_duplicates=True)
        algorithm.setup(problem, termination=NoTermination(), seed=seed_int(rng))
        algorithm.random_state = rng
        return algorithm

    def _next_generation(self) -> None:
        pop = self._algorithm.ask()
        X = np.asarray(pop.get("X"), dtype=float) if pop is not None else np.empty((0, self.space.dim))
        self._gen_X = X
        self._gen_F = np.full((len(X), self.n_objectives), np.nan)
        self._gen_G = np.zeros((len(X), self.n_constraints))
        self._told = np.zeros(len(X), dtype=bool)
        self._asked = np.zeros(len(X), dtype=bool)

    def _finish_generation(self) -> None:
        F, G = self._gen_F.copy(), self._gen_G.copy()
        if self.constraint_handling == "penalty":
            for j, target in enumerate(self.constrained_objectives):
                extra = self.penalty * np.maximum(0.0, G[:, j])
                if target is None:
                    F += extra[:, None]
                else:
                    F[:, target] += extra
        pop = Population.new("X", self._gen_X)
        values = {"F": F}
        if self._pymoo_constraints:
            values["G"] = G
        Evaluator().eval(StaticProblem(self._algorithm.problem, **values), pop)
        self._algorithm.tell(infills=pop)
        self._generation += 1
        self._gen_X = np.empty((0, self.space.dim))
        self._told = np.zeros(0, dtype=bool)
        self._asked = np.zeros(0, dtype=bool)

    # ------------------------------------------------------------------ ask / tell
    @property
    def generation(self) -> int:
        """Number of completed generations (the initial population is generation 1)."""
        return self._generation

    def ask(self, n: int = 1, pending: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """Up to ``n`` members of the current generation not handed out yet.

        Returns fewer (possibly none) when the rest of the generation is still being
        evaluated: the next generation needs all of its results.  ``pending`` is accepted
        for the protocol's shape; a generation's members are all proposed already.
        """
        n = check_int("n", n, 1)
        if len(self._gen_X) == 0:
            self._next_generation()
        free = np.flatnonzero(~self._asked)[:n]
        self._asked[free] = True
        return [self._genome.decode(self._gen_X[i]) for i in free]

    def tell(self, configs: Sequence[Mapping[str, Any]], Y: Any, constraints: Any = None) -> None:
        """Objective values ``Y`` ``(n, n_objectives)`` (and ``(n, n_constraints)`` values) of asked configs."""
        configs = list(configs)
        Y = np.atleast_2d(np.asarray(Y, dtype=float)).reshape(len(configs), -1)
        if Y.shape[1] != self.n_objectives:
            raise ConfigError(f"expected {self.n_objectives} objective values per configuration, got {Y.shape[1]}")
        if constraints is None:
            if self.n_constraints:
                raise ConfigError(f"this core has {self.n_constraints} constraints; tell needs their values")
            G = np.zeros((len(configs), 0))
        else:
            G = np.atleast_2d(np.asarray(constraints, dtype=float)).reshape(len(configs), -1)
            if G.shape[1] != self.n_constraints:
                raise ConfigError(f"expected {self.n_constraints} constraint values per configuration, got {G.shape[1]}")
        for config, y, g in zip(configs, Y, G):
            i = self._member(config)
            failed = not np.all(np.isfinite(y)) or not np.all(np.isfinite(g))
            if failed:
                y = np.full(self.n_objectives, FAILED_VALUE)
                g = np.full(self.n_constraints, FAILED_VALUE if self._pymoo_constraints else 0.0)
            self._gen_F[i], self._gen_G[i], self._told[i] = y, g, True
            self._history.append((self._genome.decode(self._gen_X[i]), y.tolist(), g.tolist()))
        if len(self._told) and self._told.all():
            self._finish_generation()

    def _member(self, config: Mapping[str, Any]) -> int:
        x = self._genome.encode(config)
        hits = np.flatnonzero(self._asked & ~self._told & np.all(np.isclose(self._gen_X, x, rtol=1e-12,
                                                                              atol=1e-12), axis=1))
        if hits.size == 0:
            raise ConfigError(f"configuration {dict(config)!r} is not an asked, untold member of generation "
                              f"{self._generation + 1}")
        return int(hits[0])

    # ------------------------------------------------------------------ results
    def history(self) -> list[tuple[dict[str, Any], list[float], list[float]]]:
        """Every told ``(config, objectives, constraints)``, in telling order (failures as FAILED_VALUE)."""
        return [(dict(c), list(y), list(g)) for c, y, g in self._history]

    def population(self) -> list[dict[str, Any]]:
        """The current parents (after the last completed generation)."""
        pop = self._algorithm.pop
        return [] if pop is None or not self._generation else [self._genome.decode(x) for x in pop.get("X")]

    def pareto_front(self) -> tuple[list[dict[str, Any]], np.ndarray]:
        """Non-dominated told configurations among the feasible ones (all, if none is feasible)."""
        if not self._history:
            return [], np.empty((0, self.n_objectives))
        Y = np.array([y for _, y, _ in self._history])
        G = np.array([g for _, _, g in self._history]).reshape(len(Y), -1)
        feasible = np.all(G <= 0.0, axis=1) & np.all(Y < FAILED_VALUE, axis=1)
        keep = np.flatnonzero(feasible) if feasible.any() else np.arange(len(Y))
        mask = pareto_mask(Y[keep])
        return [dict(self._history[i][0]) for i in keep[mask]], Y[keep[mask]]

    # ------------------------------------------------------------------ state
    def _settings(self) -> dict[str, Any]:
        return {"n_objectives": self.n_objectives, "population_size": self.population_size,
                "n_constraints": self.n_constraints, "constraint_handling": self.constraint_handling,
                "penalty": self.penalty, "constrained_objectives": list(self.constrained_objectives),
                "crossover_prob": self.crossover_prob, "crossover_eta": self.crossover_eta,
                "mutation_prob": self.mutation_prob, "mutation_eta": self.mutation_eta, "seed": self.seed,
                "parameters": self.space.names}

    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-safe state: parents, the open generation, history, random stream."""
        alg = self._algorithm
        pop = alg.pop if self._generation else None
        state: dict[str, Any] = {
            "version": STATE_VERSION, "kind": "NSGA2", "settings": self._settings(), "generation": self._generation,
            "rng": generator_state(alg.random_state),
            "open": {"X": _floats(self._gen_X), "F": _floats(self._gen_F), "G": _floats(self._gen_G),
                     "told": self._told.tolist(), "asked": self._asked.tolist()},
            "history": [[c, y, g] for c, y, g in self._history], "parents": None}
        if pop is not None:
            state["parents"] = {"X": _floats(pop.get("X")), "F": _floats(pop.get("F")),
                                "G": _floats(pop.get("G")) if self._pymoo_constraints else [],
                                "rank": [int(r) for r in pop.get("rank")], "crowding": _floats(pop.get("crowding")[None, :])[0]}
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output into a core built with the same settings."""
        try:
            if state["version"] != STATE_VERSION or state["kind"] != "NSGA2":
                raise ConfigError(f"not an NSGA2 state of version {STATE_VERSION}: "
                                  f"{state.get('kind')!r} v{state.get('version')!r}")
            if dict(state["settings"]) != self._settings():
                raise ConfigError(f"state settings {state['settings']!r} differ from this core's {self._settings()!r}")
            rng = generator_from_state(state["rng"])
            algorithm = self._build(np.random.default_rng(0))
            parents = state["parents"]
            if parents is not None:
                X = _array(parents["X"], self.space.dim)
                pop = Population.new("X", X)
                values = {"F": _array(parents["F"], self.n_objectives)}
                if self._pymoo_constraints:
                    values["G"] = _array(parents["G"], self.n_constraints)
                Evaluator().eval(StaticProblem(algorithm.problem, **values), pop)
                pop.set("rank", np.array(parents["rank"], dtype=int),
                        "crowding", _array([parents["crowding"]], len(X))[0])
                algorithm.pop, algorithm.is_initialized, algorithm.n_iter = pop, True, int(state["generation"])
                algorithm._set_optimum()
            algorithm.random_state = rng
            opened = state["open"]
            gen_X = _array(opened["X"], self.space.dim)
            self._gen_F = _array(opened["F"], self.n_objectives) if len(gen_X) else np.empty((0, self.n_objectives))
            self._gen_G = _array(opened["G"], self.n_constraints) if len(gen_X) else np.empty((0, self.n_constraints))
            self._told = np.array(opened["told"], dtype=bool)
            self._asked = np.array(opened["asked"], dtype=bool)
            self._gen_X = gen_X
            self._history = [(dict(c), [float(v) for v in y], [float(v) for v in g]) for c, y, g in state["history"]]
            self._generation = int(state["generation"])
            self._algorithm = algorithm
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed NSGA2 state ({exc!r})") from None
