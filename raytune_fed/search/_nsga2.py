"""NSGA2Search: the Tune searcher around the :class:`~raytune_fed.algorithms.nsga2.NSGA2` core.

Constraints are reported metrics with bounds::

    NSGA2Search(metric=["loss", "cost"], mode=["min", "min"], seed=0,
                constraints={"cost": ("<=", 5.0), "accuracy": (">=", 0.8)})

Each becomes a value ``g <= 0`` for the core (``value - bound`` for ``"<="``, ``bound -
value`` for ``">="``).  Under ``constraint_handling="penalty"`` (the CMOSB paper's, alpha
= ``penalty``) the violation is added to the objective of the same name, or to every
objective when the constrained metric is not one of them; ``"domination"`` uses pymoo's
constraint domination instead.  A trial that reports no finite value for a constraint
metric is dropped like one without its objectives (it enters survival as a failure).

Each answered trial is recorded in :attr:`~CoreSearcher.proposals` with its ``generation``
(0 for the initial population) next to its proposal ``index``; the members of a generation
are proposed in the order of their slots, so a trial's slot is its index minus the first
index of its generation (:meth:`NSGA2Search.members`).  With
``core.population_history()`` (the ``(generation, slot)`` of the population after each
generation) that gives the population after every generation.  Both live in the searcher's
checkpoints, so they survive ``Tuner.restore``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from raytune_fed._checks import check_choice, check_float, check_int, check_share
from raytune_fed.algorithms.nsga2 import CONSTRAINT_HANDLING, CROSSOVER_PROB, CROSSOVERS, MUTATION_ETA, NSGA2
from raytune_fed.errors import ConfigError
from raytune_fed.search._base import CoreSearcher
from raytune_fed.space import SearchSpace

BOUND_OPERATORS = ("<=", ">=")


def _check_constraints(constraints: Mapping[str, Any] | None) -> list[list[Any]]:
    """``{metric: (operator, bound)}`` as a JSON-safe ``[[metric, operator, bound], ...]``."""
    if constraints is None:
        return []
    if not isinstance(constraints, Mapping):
        raise ConfigError(f"constraints must be a dict {{metric: ('<=' or '>=', bound)}}, got {constraints!r:.200}")
    out = []
    for name, rule in constraints.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a constraint's metric must be a non-empty string, got {name!r}")
        if not isinstance(rule, (tuple, list)) or len(rule) != 2:
            raise ConfigError(f"constraint {name!r} must be (operator, bound) like ('<=', 5.0), got {rule!r}")
        op = check_choice(f"constraint {name!r} operator", rule[0], BOUND_OPERATORS)
        bound = rule[1]
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
            raise ConfigError(f"constraint {name!r} bound must be a finite number, got {bound!r}")
        out.append([name, op, float(bound)])
    return out


class NSGA2Search(CoreSearcher):
    """Tune searcher for (constrained) multi-objective NSGA-II (:class:`NSGA2`).

    A generation is proposed at once: with ``max_concurrent_trials >= population_size`` its
    members run as concurrent trials, and the next generation starts once all of them
    finished (``suggest`` returns ``None`` meanwhile).  Give the metrics here
    (``metric=["a", "b"], mode=["min", "max"]``); a single metric may come from ``TuneConfig``.

    Parameters
    ----------
    space, metric, mode, points_to_evaluate, seed : as :class:`CoreSearcher`
        (``points_to_evaluate`` join the initial population).
    population_size : members per generation (the paper: 20).
    n_generations : generations before the searcher reports it is finished (None: until
        Tune's ``num_samples`` runs out).
    constraints : ``{metric: ("<=" | ">=", bound)}`` on reported metrics (see the module doc).
    constraint_handling : ``"domination"`` (pymoo's) or ``"penalty"`` (the paper's).
    penalty : alpha of the penalty (the paper: 20).
    crossover : ``"uniform"`` (default) or ``"sbx"`` (the paper's); crossover_prob : per
        mating (1.0; the paper: 0.9); crossover_eta : SBX's index (``"sbx"`` only; None: 15,
        the paper: 2).
    mutation_prob, mutation_eta : polynomial mutation per variable (None: 1 / variables; the
        paper: 0.1) and its index (10; the paper: 20).
    """

    def __init__(self, space: Mapping[str, Any] | SearchSpace | None = None,
                 metric: str | Sequence[str] | None = None, mode: str | Sequence[str] | None = None,
                 points_to_evaluate: Sequence[Mapping[str, Any]] | None = None, *, seed: int,
                 population_size: int = 20, n_generations: int | None = None,
                 constraints: Mapping[str, tuple[str, float]] | None = None, constraint_handling: str = "domination",
                 penalty: float = 20.0, crossover: str = "uniform", crossover_prob: float = CROSSOVER_PROB,
                 crossover_eta: float | None = None, mutation_prob: float | None = None,
                 mutation_eta: float = MUTATION_ETA) -> None:
        options = {
            "population_size": check_int("population_size", population_size, 2),
            "n_generations": None if n_generations is None else check_int("n_generations", n_generations, 1),
            "constraints": _check_constraints(constraints),
            "constraint_handling": check_choice("constraint_handling", constraint_handling, CONSTRAINT_HANDLING),
            "penalty": check_float("penalty", penalty, 0.0),
            "crossover": check_choice("crossover", crossover, CROSSOVERS),
            "crossover_prob": check_share("crossover_prob", crossover_prob, 0.0, 1.0, low_open=False),
            "crossover_eta": None if crossover_eta is None else check_float("crossover_eta", crossover_eta, 0.0),
            "mutation_prob": None if mutation_prob is None
            else check_share("mutation_prob", mutation_prob, 0.0, 1.0, low_open=False),
            "mutation_eta": check_float("mutation_eta", mutation_eta, 0.0)}
        if crossover_eta is not None and crossover != "sbx":
            raise ConfigError(f"crossover_eta applies to crossover='sbx' only, got crossover_eta={crossover_eta!r} "
                              f"with crossover={crossover!r}")
        super().__init__(space, metric, mode, points_to_evaluate, seed=seed, options=options)

    def _build_core(self, space: SearchSpace, n_objectives: int, points: list[dict[str, Any]],
                    seed: int) -> NSGA2:
        o = self._options
        names = [obj.name for obj in self._known_objectives()]
        targets = [names.index(name) if name in names else None for name, _, _ in o["constraints"]]
        return NSGA2(space, n_objectives, seed=seed, points_to_evaluate=points, population_size=o["population_size"],
                     n_generations=o["n_generations"], n_constraints=len(o["constraints"]),
                     constraint_handling=o["constraint_handling"], penalty=o["penalty"],
                     constrained_objectives=targets, crossover=o["crossover"], crossover_prob=o["crossover_prob"],
                     crossover_eta=o["crossover_eta"], mutation_prob=o["mutation_prob"],
                     mutation_eta=o["mutation_eta"])

    def _proposal_tag(self) -> dict[str, Any]:
        core = self.core
        if not isinstance(core, NSGA2):
            raise RuntimeError(f"NSGA2Search's core is a {type(core).__name__}, not an NSGA2")
        return {"generation": core.generation}  # the open generation (completed ones counted from 0)

    def members(self) -> dict[str, tuple[int, int]]:
        """``(generation, slot)`` of every trial id this searcher answered."""
        first: dict[int, int] = {}
        for p in self._proposals.values():
            first[p["generation"]] = min(first.get(p["generation"], p["index"]), p["index"])
        return {tid: (p["generation"], p["index"] - first[p["generation"]]) for tid, p in self._proposals.items()}

    def _constraint_row(self, result: Mapping[str, Any]) -> list[float]:
        row = []
        for name, op, bound in self._options["constraints"]:
            value = result.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
                raise ConfigError(f"no finite value for constraint metric {name!r} ({value!r})")
            row.append(float(value) - bound if op == "<=" else bound - float(value))
        return row
