"""The contract every ask/tell core passes (:class:`~raytune_fed.algorithms.SearchCore`).

A :class:`CoreCase` says how to build a core from a seed and how to evaluate its
configurations; each ``check_*`` function drives it and raises :class:`ContractError`
naming the broken rule.  ``CORE_CHECKS`` lists them all, for ``pytest.mark.parametrize``::

    @pytest.mark.parametrize("check", CORE_CHECKS)
    def test_my_core_keeps_the_contract(check):
        check(CoreCase("mine", make_my_core, my_objective))

``make`` and ``evaluate`` (and ``constraints``) must be module-level functions, so that
:func:`check_reproducible_in_other_process` can import them in a fresh interpreter.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.algorithms import SearchCore
from raytune_fed.metrics import pareto_front
from raytune_fed.testing._util import ContractError, expect, expect_config_error, reference, run_elsewhere


@dataclass(frozen=True)
class CoreCase:
    """A core under test.

    Attributes
    ----------
    name : shown in test ids.
    make : ``seed -> SearchCore`` (a fresh core; module-level function).
    evaluate : ``config -> objective row`` (minimised; module-level function).
    constraints : ``config -> constraint row`` for cores built with ``n_constraints > 0``.
    n_rounds : ask/tell rounds the checks drive; enough to leave the initial design.
    batch : size of the batched rounds (every other round asks a batch).
    exact_batch : ``ask(n)`` returns exactly ``n`` configurations (False: at most ``n``).
    avoids_pending : proposals differ from the pending configurations and from each other.
    best_is_lowest : ``best()`` is the lowest feasible told value.  False for a core whose
        answer is chosen otherwise (successive halving picks from its last rung, where
        values were measured on more rows); ``best()`` must then still be a told
        configuration with its told value.
    """

    name: str
    make: Callable[[Any], SearchCore]
    evaluate: Callable[[dict], Sequence[float]]
    constraints: Callable[[dict], Sequence[float]] | None = None
    n_rounds: int = 6
    batch: int = 2
    exact_batch: bool = True
    avoids_pending: bool = True
    best_is_lowest: bool = True

    def __post_init__(self) -> None:
        for fn in (self.make, self.evaluate) + ((self.constraints,) if self.constraints else ()):
            reference(fn)

    def __str__(self) -> str:
        return self.name


def _tell(case: CoreCase, core: SearchCore, configs: list[dict]) -> None:
    Y = [list(case.evaluate(c)) for c in configs]
    G = None if case.constraints is None else [list(case.constraints(c)) for c in configs]
    core.tell(configs, Y, constraints=G)


def _round(case: CoreCase, core: SearchCore, i: int) -> list[dict]:
    n = case.batch if i % 2 else 1
    configs = core.ask(n)
    expect(len(configs) == n if case.exact_batch else len(configs) <= n,
           f"{case}: ask({n}) returned {len(configs)} configurations")
    if configs:
        _tell(case, core, configs)
    return configs


def trajectory(case: CoreCase, seed: Any, n_rounds: int | None = None) -> list[list[dict]]:
    """The configurations of each round of a fresh core (what reproducibility compares)."""
    core = case.make(seed)
    return [_round(case, core, i) for i in range(case.n_rounds if n_rounds is None else n_rounds)]


# ------------------------------------------------------------------------ the checks

def check_lifecycle(case: CoreCase) -> None:
    """ask -> tell -> ask works through the design and the model phase; results add up."""
    core = case.make(0)
    told: list[dict] = []
    for i in range(case.n_rounds):
        configs = _round(case, core, i)
        for c in configs:
            expect(core.normalize([c])[0] == c, f"{case}: proposal {c!r} is not a plain valid configuration")
            json.dumps(c)
        told += configs
        expect(core.n_told == len(told), f"{case}: n_told is {core.n_told} after telling {len(told)}")
    expect(core.configs == told, f"{case}: configs differ from what was told")
    k = core.n_objectives
    Y = np.array([case.evaluate(c) for c in told], dtype=float).reshape(len(told), k)
    expect(core.values.shape == (len(told), k) and np.allclose(core.values, Y),
           f"{case}: values {core.values.shape} differ from the told rows {Y.shape}")
    feasible = core.feasible
    if k == 1 and feasible.any() and case.best_is_lowest:
        config, value = core.best()
        expect(value == Y[feasible, 0].min() and list(case.evaluate(config))[0] == value,
               f"{case}: best() gave {value}, the smallest feasible told value is {Y[feasible, 0].min()}")
    elif k == 1 and feasible.any():
        config, value = core.best()
        expect(config in told and list(case.evaluate(config))[0] == value,
               f"{case}: best() gave {config!r} with {value}, not a told configuration with its told value")
    front = core.pareto_front()
    expect(np.array_equal(front, pareto_front(Y[feasible]) if feasible.any() else front),
           f"{case}: pareto_front() differs from raytune_fed.metrics.pareto_front of the feasible rows")
    configs = core.pareto_configs()
    expect(len(configs) == len(front) and all(np.allclose(case.evaluate(c), row) for c, row in zip(configs, front)),
           f"{case}: pareto_configs() do not match pareto_front() row by row")


def check_batches_and_pending(case: CoreCase) -> None:
    """A batch and proposals with ``pending`` keep clear of the configurations still out."""
    core = case.make(1)
    n_told = sum(len(_round(case, core, i)) for i in range(case.n_rounds))
    batch = core.ask(3)
    expect(len(batch) == 3 if case.exact_batch else len(batch) <= 3, f"{case}: ask(3) returned {len(batch)}")
    more = core.ask(1, pending=batch)
    if case.avoids_pending:
        keys = [json.dumps(c, sort_keys=True) for c in batch + more]
        expect(len(set(keys)) == len(keys), f"{case}: a batch or a proposal repeats a pending configuration: {keys}")
    expect(core.n_told == n_told, f"{case}: asking changed the number of observations")


def check_same_seed_same_proposals(case: CoreCase) -> None:
    """The same seed and tells give the same proposals; another seed gives other ones."""
    a, b = trajectory(case, 7), trajectory(case, 7)
    expect(a == b, f"{case}: two cores with seed 7 proposed differently")
    expect(trajectory(case, 8) != a, f"{case}: seeds 7 and 8 gave the very same proposals")


_OTHER_PROCESS = """
import json, sys
from raytune_fed.testing._cores import CoreCase, trajectory
from raytune_fed.testing._util import resolve
p = json.loads(sys.argv[1])
fns = {k: resolve(v) if v else None for k, v in p["functions"].items()}
case = CoreCase(p["name"], fns["make"], fns["evaluate"], fns["constraints"], **p["settings"])
print(json.dumps(trajectory(case, p["seed"])))
"""


def check_reproducible_in_other_process(case: CoreCase) -> None:
    """A fresh interpreter with the same seed proposes exactly the same configurations."""
    payload = {"name": case.name, "seed": 11,
               "functions": {"make": reference(case.make), "evaluate": reference(case.evaluate),
                             "constraints": reference(case.constraints) if case.constraints else None},
               "settings": {k: getattr(case, k) for k in ("n_rounds", "batch", "exact_batch", "avoids_pending",
                                                          "best_is_lowest")}}
    here = json.loads(json.dumps(trajectory(case, 11)))
    expect(run_elsewhere(_OTHER_PROCESS, payload) == here, f"{case}: another process proposed differently")


check_reproducible_in_other_process.starts_process = True  # type: ignore[attr-defined]


def check_state_round_trip(case: CoreCase) -> None:
    """``get_state`` survives JSON; a core restored from it continues exactly like the original."""
    for stop in (1, case.n_rounds):  # in the initial design and in the model phase
        original = case.make(3)
        for i in range(stop):
            _round(case, original, i)
        state = json.loads(json.dumps(original.get_state()))
        restored = case.make(99)
        restored.set_state(state)
        expect(json.loads(json.dumps(restored.get_state())) == state, f"{case}: get_state after set_state differs")
        pending = original.configs[-1:]
        for i in range(stop, stop + 3):
            n = case.batch if i % 2 else 1
            a, b = original.ask(n, pending=pending), restored.ask(n, pending=pending)
            expect(a == b, f"{case}: after set_state at round {stop} the core proposed {b} instead of {a}")
            if a:
                _tell(case, original, a)
                _tell(case, restored, b)
        expect(np.array_equal(original.values, restored.values), f"{case}: values differ after continuing")


def check_bad_input(case: CoreCase) -> None:
    """Wrong shapes, non-finite values, unknown keys, ``n < 1`` and malformed states raise one-line ConfigErrors."""
    core = case.make(5)
    for i in range(2):
        _round(case, core, i)
    c = core.configs[0]
    k = core.n_objectives
    row = list(case.evaluate(c))
    G = None if case.constraints is None else [list(case.constraints(c))]
    good = json.loads(json.dumps(core.get_state()))

    def tell(configs, Y, constraints=G):
        return lambda: core.tell(configs, Y, constraints=constraints)

    def with_state(**changes):
        state = copy.deepcopy(good)
        state.update(changes)
        return lambda: core.set_state(state)

    name = core.space.names[0]
    table = [
        ("ask(0)", lambda: core.ask(0), r"n must be an integer >= 1, got 0"),
        ("ask(1.5)", lambda: core.ask(1.5),  # type: ignore[arg-type]  # a float on purpose: the check under test
         r"n must be an integer >= 1, got 1.5"),
        ("unknown pending key", lambda: core.ask(1, pending=[{**c, "zz_unknown": 1}]),
         r"unknown parameters \['zz_unknown'\]"),
        ("Y with an extra column", tell([c], [row + [0.0]]),
         rf"Y must have shape \(1, {k}\).*got shape \(1, {k + 1}\)"),
        ("Y with fewer rows", tell([c, c], [row]), rf"Y must have shape \(2, {k}\)"),
        ("non-finite Y", tell([c], [[float("nan")] * k]), r"Y must be finite"),
        ("infinite Y", tell([c], [[float("inf")] * k]), r"Y must be finite"),
        ("text in Y", tell([c], [["a"] * k]), r"Y must be numbers"),
        ("unknown config key", tell([{**c, "zz_unknown": 1}], [row]), r"unknown parameters \['zz_unknown'\]"),
        ("missing config key", tell([{n: v for n, v in c.items() if n != name}], [row]),
         rf"missing parameter {name!r}"),
        ("a config, not a list", tell(c, [row]), r"configs must be a list of configurations"),
        ("state {}", lambda: core.set_state({}), rf"not a {type(core).__name__} state"),
        ("state of version 0", with_state(version=0), r"unsupported .* state version 0"),
        ("state with a broken rng", with_state(rng={"bit_generator": "MT19937"}), r"malformed"),
        ("state with values of another length", with_state(values=good["values"][:-1]), r"malformed"),
        ("state with other settings", with_state(settings={**good["settings"], "zz_setting": 1}),
         r"other settings: zz_setting=1"),
        ("state for another space", with_state(space={"params": [{"type": "Float", "name": "zz", "low": 0.0,
                                                                  "high": 1.0, "log": False}]}),
         r"saved for parameters \['zz'\]"),
    ]
    if G is None:
        table.append(("constraints for a core without", tell([c], [row], [[0.0]]), r"n_constraints=0"))
    else:
        table.append(("missing constraints", tell([c], [row], None), r"needs constraints"))
    for what, call, pattern in table:
        expect_config_error(f"{case}: {what}", call, pattern)
        expect(json.loads(json.dumps(core.get_state())) == good, f"{case}: a rejected {what} changed the core")


CORE_CHECKS = (check_lifecycle, check_batches_and_pending, check_same_seed_same_proposals,
               check_reproducible_in_other_process, check_state_round_trip, check_bad_input)

__all__ = ["CORE_CHECKS", "ContractError", "CoreCase", "trajectory"]
