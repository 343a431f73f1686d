"""ODE's halving search (Algorithm 1) as an ask/tell core over a finite configuration set.

:class:`SuccessiveHalving` is a :class:`~raytune_fed.algorithms.base.SearchCore` that runs
the rounds of a :class:`~raytune_fed.algorithms.schedules.RungTable`: every configuration
of round ``t`` is trained on ``r_t`` rows and evaluated, the best ``n_kept`` go on to round
``t + 1``.  It knows nothing about PU learning: the caller trains, evaluates (IPM_PU or
AUC_PU, with or without the control variate) and tells the *minimised* value (``-R``).
No Ray here; :class:`raytune_fed.schedulers.PUHalvingScheduler` drives the same core from
Ray Tune.

The shared protocol, for a finite set.  The space is one
:class:`~raytune_fed.space.Categorical` per key of the configurations, its choices the
values the set takes (so every configuration needs the same keys).  A proposal is a *job*:
a configuration with the three :attr:`~SuccessiveHalving.job_keys` ``config_id`` (its
position in ``configs``), ``rung`` and ``n_rows`` (rows to train on).  ``tell(jobs, Y,
seconds=None)`` takes jobs back with their minimised finite values and, for the time
budget, the training seconds of each; a job that failed (or will never report) is
``discard``-ed and ranks last.  ``ask`` returns ``[]`` when nothing can start now
(synchronous mode waits for the rung) or the search is over (:attr:`is_finished`);
``pending`` is checked and otherwise ignored, the core tracks the jobs it issued.
``best()`` is the told job the search selects (below), not the lowest value told: a value
at a lower rung was measured on fewer rows.

Modes.  Synchronous (default): no job of round ``t + 1`` is issued before every job of
round ``t`` is told (or discarded) and ranked.  Asynchronous (ASHA-like): a configuration
is promoted as soon as it ranks within the kept share ``n_kept / n_configs`` of the
configurations told so far in its round, while the next round has free slots; once a
round is complete its best fill the remaining slots.  Both modes train exactly the rung
table's jobs, so the rows used are the same and never exceed the budget; the search ends
when every job is told.  As in ASHA, a configuration that reports late cannot enter a
round whose slots are already taken.

Order and ties.  The seed draws one random order of the configurations: round 0 is issued
in that order and equal values rank by it (so a grid's order neither decides ties nor,
in the asynchronous mode, which configurations report first).

Time budget.  ``budget_seconds`` caps the training seconds told (eq. 15 sums the training
time of every configuration in every round).  Once it is reached no job is issued; the
answer is the best configuration of the highest round with a told result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypedDict

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.algorithms.base import Config, SearchCore
from raytune_fed.algorithms.schedules import DEFAULT_ETA0, DEFAULT_MU, RungTable, rung_table
from raytune_fed.errors import ConfigError, NoSelectionError
from raytune_fed.random import Seed
from raytune_fed.space import Categorical, SearchSpace

SIGNIFICANT_DIGITS = 6  # values ranked at this precision (see comparable)

RESERVED_KEYS = ("config_id", "rung", "n_rows")


class HalvingSettings(TypedDict):
    """The arguments a :class:`SuccessiveHalving` was built with (``settings``)."""

    n_rows: int
    budget_samples: int
    budget_seconds: float | None
    schedule: str
    eta0: float
    mu: float
    min_rows: int
    asynchronous: bool


def finite_space(configs: Sequence[Mapping[str, Any]]) -> SearchSpace:
    """One categorical per key, its choices the distinct values of ``configs`` in order of appearance."""
    if isinstance(configs, Mapping) or not isinstance(configs, Sequence) or \
            not all(isinstance(c, Mapping) for c in configs):
        raise ConfigError(f"configs must be a list of configuration dicts, got {configs!r:.200}")
    clash = sorted({k for c in configs for k in c} & set(RESERVED_KEYS))
    if clash:
        raise ConfigError(f"configurations may not use the reserved keys {clash} (the core adds them to jobs)")
    keys = list(configs[0]) if configs else []
    odd = next((dict(c) for c in configs if set(c) != set(keys)), None)
    if odd is not None:
        raise ConfigError(f"every configuration needs the same keys: {keys} but also {sorted(odd)} in {odd!r:.200} "
                          "(give absent parameters a placeholder value such as None)")
    if not keys:
        raise ConfigError("configurations need at least one key (e.g. {'trial': i})")
    params = []
    for key in keys:
        choices: list[Any] = []
        for c in configs:
            v = c[key]
            if not any(type(x) is type(v) and x == v for x in choices):
                choices.append(v)
        params.append(Categorical(key, tuple(choices)))
    return SearchSpace(tuple(params))


class SuccessiveHalving(SearchCore):
    """Synchronous or asynchronous successive halving under a sample (and time) budget.

    Parameters
    ----------
    configs : the configuration set Omega (dicts with the same keys; at least 2; no key
        named as :data:`RESERVED_KEYS`).
    n_rows : training rows available (``r_t`` is capped there).
    seed : root seed (the round-0 order and ties).
    budget_samples : the sample budget ``B``; default ``n_rows``.
    budget_seconds : optional budget on the training seconds told (``> 0``).
    schedule, eta0, mu : see :mod:`raytune_fed.algorithms.schedules`.
    min_rows : least rows a configuration may get in the first round.
    asynchronous : ASHA-like promotions instead of synchronous rounds.
    """

    objectives_range: ClassVar[tuple[int, int | None]] = (1, 1)
    job_keys: ClassVar[tuple[str, ...]] = RESERVED_KEYS

    def __init__(self, configs: Sequence[Mapping[str, Any]], *, n_rows: int, seed: Seed,
                 budget_samples: int | None = None, budget_seconds: float | None = None,
                 schedule: str = "selfpaced", eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU,
                 min_rows: int = 1, asynchronous: bool = False) -> None:
        if isinstance(configs, Sequence) and not isinstance(configs, Mapping):
            check_int("n_configs", len(configs), 2)
        space = finite_space(configs)
        self.table: RungTable = rung_table(len(configs), n_rows=n_rows, budget_samples=budget_samples,
                                           schedule=schedule, eta0=eta0, mu=mu, min_rows=min_rows)
        if budget_seconds is not None and check_float("budget_seconds", budget_seconds, 0.0) == 0.0:
            raise ConfigError(f"budget_seconds must be > 0 (or None for no time budget), got {budget_seconds!r}")
        if not isinstance(asynchronous, bool):
            raise ConfigError(f"asynchronous must be True or False, got {asynchronous!r}")
        super().__init__(space, seed=seed)
        self._set = space.normalize(configs, "a configuration of the set")
        self.settings: HalvingSettings = {
            "n_rows": n_rows, "budget_samples": self.table.budget_samples,
            "budget_seconds": None if budget_seconds is None else float(budget_seconds),
            "schedule": schedule, "eta0": float(eta0), "mu": float(mu), "min_rows": min_rows,
            "asynchronous": asynchronous}
        k, n_rungs = len(self._set), len(self.table.rungs)
        order = [int(i) for i in self._rng.permutation(k)]
        self._tie = _ranks(order)
        self._values: list[dict[int, float]] = [{} for _ in range(n_rungs)]
        self._issued: list[list[int]] = [[] for _ in range(n_rungs)]
        self._members: list[list[int]] = [order] + [[] for _ in range(n_rungs - 1)]
        self._failed: list[tuple[int, int]] = []
        self._seconds = 0.0
        self._out_of_time = False
        self._telling: list[float] = []

    # ------------------------------------------------------------------ protocol
    def tell(self, configs: Sequence[Mapping[str, Any]], Y: Any, *, constraints: Any = None,
             seconds: Sequence[float] | None = None) -> None:
        """Record minimised finite values ``Y`` (shape ``(n, 1)`` or ``(n,)``) of issued jobs."""
        n = len(configs) if isinstance(configs, Sequence) and not isinstance(configs, Mapping) else 0
        spent = [0.0] * n if seconds is None else [check_float("seconds", s, 0.0) for s in seconds]
        if len(spent) != n:
            raise ConfigError(f"seconds needs one entry per job ({n}), got {len(spent)}")
        self._telling = spent
        try:
            super().tell(configs, Y, constraints=constraints)
        finally:
            self._telling = []

    def discard(self, configs: Sequence[Mapping[str, Any]]) -> None:
        """Issued jobs that failed or will never report: they rank last in their rung."""
        keys = self._job_keys(self.normalize(configs, "a discarded job"))
        for i, t in keys:
            self._values[t][i] = math.inf
            self._failed.append((i, t))
        self._after_results()

    @property
    def is_finished(self) -> bool:
        """True once every job of every round is told, or the time budget is spent."""
        return self._out_of_time or all(len(v) == r.n_configs for v, r in zip(self._values, self.table.rungs))

    # ------------------------------------------------------------------ answers
    def best(self) -> tuple[Config, float]:
        """The selected job and its value: the best of the highest round with results."""
        i, value = self.best_id()
        t = max(t for t in range(len(self.table.rungs)) if i in self._values[t])
        return self._job(i, t), value

    def best_id(self) -> tuple[int, float]:
        """``(config_id, value)`` of :meth:`best`: the best of the highest round with a job that
        did not fail.  Raises :class:`~raytune_fed.errors.NoSelectionError` (a :class:`ConfigError`)
        when nothing was told or every job failed."""
        for t in range(len(self.table.rungs) - 1, -1, -1):
            if self._values[t]:
                i = self._ranked(t)[0]
                if math.isfinite(self._values[t][i]):
                    return i, self._values[t][i]
        if self._failed:
            raise NoSelectionError(f"every job failed ({len(self._failed)} discarded), "
                                   f"so there is no best configuration")
        raise NoSelectionError("no results told yet, so there is no best configuration")

    def configuration(self, config_id: int) -> Config:
        """Configuration ``config_id`` of the set, without job keys."""
        return dict(self._set[check_int("config_id", config_id, 0, len(self._set) - 1)])

    def has_future(self, config_id: int) -> bool:
        """Whether configuration ``config_id`` is running or may still get a job."""
        if self.is_finished:
            return False
        rungs = [t for t in range(len(self.table.rungs)) if config_id in self._values[t]]
        running = any(config_id in self._issued[t] and config_id not in self._values[t]
                      for t in range(len(self.table.rungs)))
        if running or not rungs:
            return True
        t = rungs[-1]
        if t == len(self.table.rungs) - 1:
            return False
        complete = len(self._values[t]) == self.table.rungs[t].n_configs
        if config_id in self._members[t + 1]:
            return True
        if not self.settings["asynchronous"]:
            return not complete
        if len(self._members[t + 1]) >= self.table.rungs[t + 1].n_configs:
            return False
        return not complete or config_id in self._ranked(t)[:self.table.rungs[t].n_kept]

    def pending(self) -> list[Config]:
        """Jobs issued by :meth:`ask` and neither told nor discarded, as ``ask`` returned them."""
        return [self._job(i, t) for t in range(len(self.table.rungs)) for i in self._issued[t]
                if i not in self._values[t]]

    @property
    def rows_used(self) -> int:
        """Rows of every job issued so far (``<= budget_samples``)."""
        return sum(len(self._issued[t]) * r.n_rows for t, r in enumerate(self.table.rungs))

    @property
    def seconds_used(self) -> float:
        return self._seconds

    def results(self) -> list[tuple[int, int, int, float]]:
        """``(config_id, rung, n_rows, value)`` of every told (``+inf``: discarded) job, rung by rung."""
        return [(i, t, self.table.rungs[t].n_rows, v) for t in range(len(self.table.rungs))
                for i, v in self._values[t].items()]

    # ------------------------------------------------------------------ SearchCore hooks
    def _propose(self, n: int, pending: list[Config]) -> list[Config]:
        jobs: list[Config] = []
        while len(jobs) < n and not self.is_finished:
            job = self._next_job()
            if job is None:
                break
            i, t = job
            self._issued[t].append(i)
            jobs.append(self._job(i, t))
        return jobs

    def _check_tell(self, configs: list[Config], Y: np.ndarray, G: np.ndarray) -> None:
        self._job_keys(configs)

    def _on_tell(self, configs: list[Config], Y: np.ndarray, G: np.ndarray) -> None:
        for job, y, s in zip(configs, Y[:, 0], self._telling or [0.0] * len(configs)):
            self._values[job["rung"]][job["config_id"]] = float(y)
            self._seconds += s
        self._after_results()

    def _settings(self) -> dict[str, Any]:
        return {**self.settings, "configs": [dict(c) for c in self._set]}

    def _core_state(self) -> dict[str, Any]:
        """Rung members and issued jobs, discarded jobs, seconds; told values are the base's rows."""
        return {"members": [list(r) for r in self._members], "issued": [list(r) for r in self._issued],
                "failed": [list(f) for f in self._failed], "seconds": self._seconds,
                "out_of_time": self._out_of_time}

    def _set_core_state(self, state: Any) -> None:
        n_rungs, k = len(self.table.rungs), len(self._set)
        members = [[int(i) for i in r] for r in state["members"]]
        issued = [[int(i) for i in r] for r in state["issued"]]
        failed = [(int(i), int(t)) for i, t in state["failed"]]
        seconds, out_of_time = float(state["seconds"]), bool(state["out_of_time"])
        if len(members) != n_rungs or len(issued) != n_rungs or sorted(members[0]) != list(range(k)):
            raise ConfigError(f"malformed SuccessiveHalving state: {len(members)} rungs of members for a table of "
                              f"{n_rungs} rungs over {k} configurations")
        values: list[dict[int, float]] = [{} for _ in range(n_rungs)]
        for job, y in zip(self._configs, self._Y[:, 0]):
            i, t = int(job["config_id"]), int(job["rung"])
            if not (0 <= t < n_rungs and i in issued[t]):
                raise ConfigError(f"malformed SuccessiveHalving state: told job (config_id={i}, rung={t}) was "
                                  "never issued")
            values[t][i] = float(y)
        for i, t in failed:
            if not (0 <= t < n_rungs and i in issued[t]) or i in values[t]:
                raise ConfigError(f"malformed SuccessiveHalving state: discarded job (config_id={i}, rung={t})")
            values[t][i] = math.inf
        self._tie = _ranks(members[0])
        self._members, self._issued, self._failed, self._values = members, issued, failed, values
        self._seconds, self._out_of_time = seconds, out_of_time

    # ------------------------------------------------------------------ internals
    def _job(self, i: int, t: int) -> Config:
        return {**self._set[i], "config_id": i, "rung": t, "n_rows": self.table.rungs[t].n_rows}

    def _job_keys(self, jobs: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
        keys = []
        for job in jobs:
            try:
                i, t, rows = int(job["config_id"]), int(job["rung"]), int(job["n_rows"])
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"a told job needs the config_id, rung and n_rows that ask() gave it, got "
                                  f"{dict(job)!r:.200}") from None
            if not 0 <= t < len(self.table.rungs) or i not in self._issued[t]:
                raise ConfigError(f"job (config_id={i}, rung={t}) was never issued by ask()")
            if i in self._values[t]:
                raise ConfigError(f"job (config_id={i}, rung={t}) was already told")
            plain = {k: v for k, v in job.items() if k not in RESERVED_KEYS}
            if rows != self.table.rungs[t].n_rows or plain != self._set[i]:
                raise ConfigError(f"job (config_id={i}, rung={t}) is not the one ask() issued: {dict(job)!r:.200}")
            keys.append((i, t))
        if len(set(keys)) != len(keys):
            raise ConfigError(f"the same job is told twice in one call: {keys}")
        return keys

    def _after_results(self) -> None:
        limit = self.settings["budget_seconds"]
        if limit is not None and self._seconds >= limit:
            self._out_of_time = True
        if not self.settings["asynchronous"]:
            for t in range(len(self.table.rungs) - 1):
                rung = self.table.rungs[t]
                if len(self._values[t]) == rung.n_configs and not self._members[t + 1]:
                    self._members[t + 1] = self._ranked(t)[:rung.n_kept]

    def _ranked(self, t: int) -> list[int]:
        return sorted(self._values[t], key=lambda i: (comparable(self._values[t][i]), self._tie[i]))

    def _next_job(self) -> tuple[int, int] | None:
        if self.settings["asynchronous"]:
            for t in range(len(self.table.rungs) - 2, -1, -1):
                promoted = self._promotable(t)
                if promoted is not None:
                    self._members[t + 1].append(promoted)
                    return promoted, t + 1
        for t in range(len(self.table.rungs) - 1, -1, -1):
            waiting = [i for i in self._members[t] if i not in self._issued[t]]
            if waiting:
                return waiting[0], t
        return None

    def _promotable(self, t: int) -> int | None:
        rung, nxt = self.table.rungs[t], self.table.rungs[t + 1]
        if len(self._members[t + 1]) >= nxt.n_configs:
            return None
        told = len(self._values[t])
        share = rung.n_kept if told == rung.n_configs else (told * rung.n_kept) // rung.n_configs
        return next((i for i in self._ranked(t)[:share] if i not in self._members[t + 1]), None)


def comparable(value: float) -> float:
    """``value`` at :data:`SIGNIFICANT_DIGITS` significant digits: what the ranking compares.

    Two configurations whose models barely differ on a rung's few rows (ridge penalties
    1e-4 and 1e-3 on 8 labelled rows) score alike to 10 or 11 digits, and the digits after
    that come from rounding in BLAS: the same cell ranked them one way under OpenBLAS's
    SkylakeX kernel and the other way under its Haswell kernel, and selected another
    configuration.  Values equal at this precision are ties, which the seeded tie order
    breaks; a difference in the sixth digit is far below any evaluator's standard error.
    """
    if not math.isfinite(value) or value == 0.0:
        return value
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def _ranks(order: Sequence[int]) -> list[int]:
    """Position of each configuration in ``order`` (its tie-break rank)."""
    ranks = [0] * len(order)
    for position, i in enumerate(order):
        ranks[i] = position
    return ranks
