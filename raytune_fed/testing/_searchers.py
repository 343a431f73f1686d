"""The contract every Tune searcher built on :class:`~raytune_fed.search.CoreSearcher` passes.

A :class:`SearcherCase` says how to build a searcher (space, metric and mode already set)
from a seed and how a trial scores a Tune configuration.  The checks drive it through the
Searcher API directly (``suggest`` / ``on_trial_complete``, no Tuner and no Ray session);
a real ``Tuner.fit`` belongs in an integration test with the shared Ray session.
``make`` and ``evaluate`` must be module-level functions (the other-process check imports
them).  Ray is imported only when a check runs.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.testing._util import ContractError, expect, expect_config_error, reference, run_elsewhere


@dataclass(frozen=True)
class SearcherCase:
    """A Tune searcher under test.

    name : shown in test ids.
    make : ``seed -> searcher`` with its space, metric and mode given (module-level function).
    evaluate : ``Tune config -> result dict`` with every metric (module-level function).
    n_trials : trials the checks run; enough to leave the initial design.
    """

    name: str
    make: Callable[[int], Any]
    evaluate: Callable[[dict], dict]
    n_trials: int = 8

    def __post_init__(self) -> None:
        reference(self.make)
        reference(self.evaluate)

    def __str__(self) -> str:
        return self.name


def run_trials(case: SearcherCase, searcher: Any, n: int, start: int = 0) -> list[dict]:
    """Suggest and complete ``n`` trials one at a time; returns the suggestions."""
    out = []
    for t in range(start, start + n):
        config = searcher.suggest(f"trial_{t}")
        expect(isinstance(config, dict), f"{case}: suggest returned {config!r} with no trial in flight")
        out.append(config)
        searcher.on_trial_complete(f"trial_{t}", case.evaluate(config))
    return out


def suggestions(case: SearcherCase, seed: int) -> list[dict]:
    """The suggestions of a fresh searcher over ``n_trials`` trials (what reproducibility compares)."""
    return run_trials(case, case.make(seed), case.n_trials)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# ------------------------------------------------------------------------ the checks

def check_lifecycle(case: SearcherCase) -> None:
    """Trials in, observations out: every completed trial becomes one minimised row of the core."""
    searcher = case.make(0)
    configs = run_trials(case, searcher, case.n_trials)
    core = searcher.core
    expect(core.n_told == case.n_trials, f"{case}: the core holds {core.n_told} of {case.n_trials} trials")
    objectives = searcher.objectives
    expected = [[o.to_minimised(case.evaluate(c)[o.name]) for o in objectives] for c in configs]
    expect(np.allclose(core.values, expected), f"{case}: told rows are not the results' minimised metrics")
    expect(len({json.dumps(c, sort_keys=True, default=str) for c in configs}) == len(configs),
           f"{case}: the searcher suggested a configuration twice")


def check_concurrency(case: SearcherCase) -> None:
    """With ``max_concurrent=2`` a third suggestion waits; live trials are pending, not repeated."""
    searcher = case.make(1)
    run_trials(case, searcher, case.n_trials)
    expect(searcher.set_max_concurrency(2) is True, f"{case}: set_max_concurrency must return True")
    a, b = searcher.suggest("live_a"), searcher.suggest("live_b")
    expect(isinstance(a, dict) and isinstance(b, dict) and a != b, f"{case}: two concurrent suggestions {a}, {b}")
    expect(searcher.suggest("live_c") is None, f"{case}: a third suggestion beyond max_concurrent=2")
    searcher.on_trial_complete("live_a", case.evaluate(a))
    c = searcher.suggest("live_c")
    expect(isinstance(c, dict) and c != b, f"{case}: after a slot freed up the searcher suggested {c!r}")
    expect(searcher.core.n_told == case.n_trials + 1, f"{case}: completing a live trial did not tell the core")


def check_drops_failed_trials(case: SearcherCase) -> None:
    """Errored trials and results without a finite value for a metric are dropped with a WARNING."""
    searcher = case.make(2)
    run_trials(case, searcher, 2)
    records = _Records()
    log = logging.getLogger("raytune_fed.search")
    log.addHandler(records)
    try:
        name = searcher.objectives[0].name
        broken = [("e1", lambda full: None, True), ("e2", lambda full: {"other": 1.0}, False),
                  ("e3", lambda full: {**full, name: math.nan}, False),
                  ("e4", lambda full: {**full, name: "text"}, False)]
        for tid, result, error in broken:
            config = searcher.suggest(tid)
            searcher.on_trial_complete(tid, result(case.evaluate(config)), error=error)
    finally:
        log.removeHandler(records)
    expect(searcher.core.n_told == 2, f"{case}: a failed trial reached the core (n_told={searcher.core.n_told})")
    expect(len(records.messages) == 4, f"{case}: expected one WARNING per dropped trial, got {records.messages}")


def check_same_seed_same_suggestions(case: SearcherCase) -> None:
    """The same seed gives the same suggestions; another seed other ones."""
    a = suggestions(case, 7)
    expect(a == suggestions(case, 7), f"{case}: two searchers with seed 7 suggested differently")
    expect(a != suggestions(case, 8), f"{case}: seeds 7 and 8 gave the very same suggestions")


_OTHER_PROCESS = """
import json, sys
from raytune_fed.testing._searchers import SearcherCase, suggestions
from raytune_fed.testing._util import resolve
p = json.loads(sys.argv[1])
case = SearcherCase(p["name"], resolve(p["make"]), resolve(p["evaluate"]), p["n_trials"])
print(json.dumps(suggestions(case, p["seed"])))
"""


def check_reproducible_in_other_process(case: SearcherCase) -> None:
    """A fresh interpreter with the same seed suggests exactly the same configurations."""
    payload = {"name": case.name, "make": reference(case.make), "evaluate": reference(case.evaluate),
               "n_trials": case.n_trials, "seed": 11}
    here = json.loads(json.dumps(suggestions(case, 11)))
    expect(run_elsewhere(_OTHER_PROCESS, payload) == here, f"{case}: another process suggested differently")


check_reproducible_in_other_process.starts_process = True  # type: ignore[attr-defined]


def check_checkpoint_round_trip(case: SearcherCase) -> None:
    """``save`` writes JSON; a searcher restored from it continues exactly like the original."""
    original = case.make(3)
    run_trials(case, original, case.n_trials // 2)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "searcher-state.json")
        original.save(path)
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
        expect(isinstance(saved, dict), f"{case}: the checkpoint is not a JSON object")
        restored = case.make(99)
        restored.restore(path)
    n = case.n_trials - case.n_trials // 2
    a = run_trials(case, original, n, start=100)
    b = run_trials(case, restored, n, start=100)
    expect(a == b, f"{case}: the restored searcher suggested {b} instead of {a}")
    expect(np.array_equal(original.core.values, restored.core.values), f"{case}: observations differ after restore")


def check_bad_input(case: SearcherCase) -> None:
    """Broken checkpoints, wrong values and bad concurrency raise one-line ConfigErrors."""
    searcher = case.make(4)
    run_trials(case, searcher, 2)
    config = searcher.suggest("probe")
    searcher.on_trial_complete("probe", case.evaluate(config))
    objectives = searcher.objectives
    k = len(objectives)
    good = [case.evaluate(config)[o.name] for o in objectives]
    n_told = searcher.core.n_told
    with tempfile.TemporaryDirectory() as tmp:
        garbage, foreign = os.path.join(tmp, "garbage.json"), os.path.join(tmp, "foreign.json")
        with open(garbage, "wb") as fh:
            fh.write(b"\x80\x04not json")
        with open(foreign, "w", encoding="utf-8") as fh:
            json.dump({"format": "something else", "kind": "Other"}, fh)
        table = [
            ("a checkpoint that is not JSON", lambda: searcher.restore(garbage), r"is not a JSON searcher checkpoint"),
            ("a foreign checkpoint", lambda: searcher.restore(foreign), r"not a .* checkpoint \(kind='Other'\)"),
            ("a missing checkpoint", lambda: searcher.restore(os.path.join(tmp, "nope.json")),
             r"cannot read searcher checkpoint"),
            ("max_concurrent=0", lambda: searcher.set_max_concurrency(0), r"max_concurrent must be an integer >= 1"),
            ("too many values", lambda: searcher.add_evaluated_point(config, good + [1.0]),
             rf"expected {k} values for metrics"),
            ("a non-finite value", lambda: searcher.add_evaluated_point(config, [math.nan] * k if k > 1 else math.nan),
             r"needs a finite number, got nan"),
            ("an unknown parameter", lambda: searcher.add_evaluated_point({**config, "zz_unknown": 1}, good),
             r"unknown parameters \['zz_unknown'\]"),
            ("another metric from the Tuner", lambda: searcher.set_search_properties("zz_metric", None, {}),
             r"the Tuner passed 'zz_metric'"),
        ]
        for what, call, pattern in table:
            expect_config_error(f"{case}: {what}", call, pattern)
    expect(searcher.core.n_told == n_told, f"{case}: rejected input changed the core")


SEARCHER_CHECKS = (check_lifecycle, check_concurrency, check_drops_failed_trials, check_same_seed_same_suggestions,
                   check_reproducible_in_other_process, check_checkpoint_round_trip, check_bad_input)

__all__ = ["SEARCHER_CHECKS", "ContractError", "SearcherCase", "run_trials", "suggestions"]
