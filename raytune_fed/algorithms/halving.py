"""ODE's halving search (Algorithm 1) as an ask/tell core over a finite configuration set.

:class:`SuccessiveHalving` runs the rounds of a :class:`~raytune_fed.algorithms.schedules.RungTable`:
every configuration of round ``t`` is trained on ``r_t`` rows and evaluated, the best
``n_kept`` go on to round ``t + 1``.  It knows nothing about PU learning: the caller trains,
evaluates (IPM_PU or AUC_PU, with or without the control variate) and tells the
*minimised* value (``-R``).  No Ray here; :class:`raytune_fed.schedulers.PUHalvingScheduler`
drives the same core from Ray Tune.

Protocol.  ``ask(n)`` returns up to ``n`` jobs, each a configuration dict with three added
keys: ``config_id`` (its position in ``configs``), ``rung`` and ``n_rows`` (rows to train
on).  ``tell(jobs, Y, seconds=None)`` takes those dicts back with ``Y`` of shape ``(n, 1)``
(or ``(n,)``) and, for the time budget, the training seconds of each job.  ``+inf`` marks
a failed evaluation (it ranks last); NaN and ``-inf`` are refused.  ``ask`` returns ``[]``
when nothing can start now (synchronous mode waits for the rung) or the search is over
(:attr:`is_finished`).  ``pending`` is accepted for the shared protocol and ignored: the
core tracks the jobs it issued.

Modes.  Synchronous (default): no job of round ``t + 1`` is issued before every job of
round ``t`` is told and ranked.  Asynchronous (ASHA-like): a configuration is promoted as
soon as it ranks within the kept share ``n_kept / n_configs`` of the configurations told
so far in its round, while the next round has free slots; once a round is complete its
best fill the remaining slots.  Both modes train exactly the rung table's jobs, so the
rows used are the same and never exceed the budget; the search ends when every job is
told.  As in ASHA, a configuration that reports late cannot enter a round whose slots
are already taken.

Ranking.  Lower told value first; ties are broken by a random order of the
configurations drawn once from ``seed`` (so a grid's order does not decide ties).

Time budget.  ``budget_seconds`` caps the training seconds told (eq. 15 sums the training
time of every configuration in every round).  Once it is reached no job is issued; the
answer is the best configuration of the highest round with a told result.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from raytune_fed._checks import check_float
from raytune_fed.algorithms.schedules import DEFAULT_ETA0, DEFAULT_MU, RungTable, rung_table
from raytune_fed.errors import ConfigError
from raytune_fed.random import as_generator

RESERVED_KEYS = ("config_id", "rung", "n_rows")
STATE_VERSION = 1


class SuccessiveHalving:
    """Synchronous or asynchronous successive halving under a sample (and time) budget.

    Parameters
    ----------
    configs : the configuration set Omega (dicts; at least 2; no key named as
        :data:`RESERVED_KEYS`).
    n_rows : training rows available (``r_t`` is capped there).
    seed : root seed (ties only).
    budget_samples : the sample budget ``B``; default ``n_rows``.
    budget_seconds : optional budget on the training seconds told (``> 0``).
    schedule, eta0, mu : see :mod:`raytune_fed.algorithms.schedules`.
    min_rows : least rows a configuration may get in the first round.
    asynchronous : ASHA-like promotions instead of synchronous rounds.
    """

    def __init__(self, configs: Sequence[Mapping[str, Any]], *, n_rows: int, seed: Any,
                 budget_samples: int | None = None, budget_seconds: float | None = None,
                 schedule: str = "selfpaced", eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU,
                 min_rows: int = 1, asynchronous: bool = False) -> None:
        self._configs = [dict(c) for c in configs]
        clash = sorted({k for c in self._configs for k in c} & set(RESERVED_KEYS))
        if clash:
            raise ConfigError(f"configurations may not use the reserved keys {clash} (the core adds them to jobs)")
        self.table: RungTable = rung_table(len(self._configs), n_rows=n_rows, budget_samples=budget_samples,
                                           schedule=schedule, eta0=eta0, mu=mu, min_rows=min_rows)
        if budget_seconds is not None and check_float("budget_seconds", budget_seconds, 0.0) == 0.0:
            raise ConfigError(f"budget_seconds must be > 0 (or None for no time budget), got {budget_seconds!r}")
        if not isinstance(asynchronous, bool):
            raise ConfigError(f"asynchronous must be True or False, got {asynchronous!r}")
        self.settings = {"n_rows": n_rows, "budget_samples": self.table.budget_samples,
                         "budget_seconds": None if budget_seconds is None else float(budget_seconds),
                         "schedule": schedule, "eta0": float(eta0), "mu": float(mu), "min_rows": min_rows,
                         "asynchronous": asynchronous}
        k = len(self._configs)
        self._tie = [int(v) for v in np.argsort(as_generator(seed).permutation(k))]   # rank of each config
        n_rungs = len(self.table.rungs)
        self._values: list[dict[int, float]] = [{} for _ in range(n_rungs)]
        self._issued: list[list[int]] = [[] for _ in range(n_rungs)]
        self._members: list[list[int]] = [list(range(k))] + [[] for _ in range(n_rungs - 1)]
        self._seconds = 0.0
        self._out_of_time = False

    # ------------------------------------------------------------------ protocol
    def ask(self, n: int = 1, pending: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Up to ``n`` jobs that may start now (see the module docstring)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"n must be an integer >= 1, got {n!r}")
        jobs: list[dict[str, Any]] = []
        while len(jobs) < n and not self.is_finished:
            job = self._next_job()
            if job is None:
                break
            i, t = job
            self._issued[t].append(i)
            jobs.append({**self._configs[i], "config_id": i, "rung": t, "n_rows": self.table.rungs[t].n_rows})
        return jobs

    def tell(self, configs: Sequence[Mapping[str, Any]], Y: Any, seconds: Sequence[float] | None = None) -> None:
        """Record minimised values ``Y`` (shape ``(n, 1)`` or ``(n,)``) of issued jobs."""
        configs = list(configs)
        values = np.asarray(Y, dtype=float)
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.shape != (len(configs),):
            raise ConfigError(f"Y must have shape ({len(configs)}, 1) for {len(configs)} jobs, got {np.shape(Y)}")
        if np.isnan(values).any() or np.isneginf(values).any():
            raise ConfigError(f"values must be finite or +inf (a failed evaluation), got {values.tolist()}")
        spent = [0.0] * len(configs) if seconds is None else [check_float("seconds", s, 0.0) for s in seconds]
        if len(spent) != len(configs):
            raise ConfigError(f"seconds needs one entry per job ({len(configs)}), got {len(spent)}")
        keys = [self._job_key(c) for c in configs]
        if len(set(keys)) != len(keys):
            raise ConfigError(f"the same job is told twice in one call: {keys}")
        for (i, t), v, s in zip(keys, values, spent):
            self._values[t][i] = float(v)
            self._seconds += s
        limit = self.settings["budget_seconds"]
        if limit is not None and self._seconds >= limit:
            self._out_of_time = True
        if not self.settings["asynchronous"]:
            self._advance_sync()

    # ------------------------------------------------------------------ answers
    @property
    def is_finished(self) -> bool:
        """True once every job of every round is told, or the time budget is spent."""
        return self._out_of_time or all(len(v) == r.n_configs for v, r in zip(self._values, self.table.rungs))

    def best(self) -> tuple[dict[str, Any], float]:
        """The selected configuration and its value: the best of the highest round with results."""
        i, value = self.best_id()
        return dict(self._configs[i]), value

    def best_id(self) -> tuple[int, float]:
        """``(config_id, value)`` of :meth:`best`."""
        for t in range(len(self.table.rungs) - 1, -1, -1):
            if self._values[t]:
                i = self._ranked(t)[0]
                return i, self._values[t][i]
        raise ConfigError("no results told yet, so there is no best configuration")

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

    def pending(self) -> list[dict[str, Any]]:
        """Jobs issued by :meth:`ask` and not told yet, as ``ask`` returned them."""
        return [{**self._configs[i], "config_id": i, "rung": t, "n_rows": self.table.rungs[t].n_rows}
                for t in range(len(self.table.rungs)) for i in self._issued[t] if i not in self._values[t]]

    @property
    def rows_used(self) -> int:
        """Rows of every job issued so far (``<= budget_samples``)."""
        return sum(len(self._issued[t]) * r.n_rows for t, r in enumerate(self.table.rungs))

    @property
    def seconds_used(self) -> float:
        return self._seconds

    def results(self) -> list[tuple[int, int, int, float]]:
        """``(config_id, rung, n_rows, value)`` of every told job, rung by rung."""
        return [(i, t, self.table.rungs[t].n_rows, v) for t in range(len(self.table.rungs))
                for i, v in self._values[t].items()]

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-safe state (failed values are stored as ``None``)."""
        return {"version": STATE_VERSION, "kind": "SuccessiveHalving", "settings": dict(self.settings),
                "configs": [dict(c) for c in self._configs], "tie": list(self._tie),
                "values": [[[i, None if math.isinf(v) else v] for i, v in rung.items()] for rung in self._values],
                "issued": [list(r) for r in self._issued], "members": [list(r) for r in self._members],
                "seconds": self._seconds, "out_of_time": self._out_of_time}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`get_state`'s output into a core built with the same settings."""
        try:
            if state["version"] != STATE_VERSION or state["kind"] != "SuccessiveHalving":
                raise ConfigError(f"cannot restore state version {state['version']!r} of {state['kind']!r}; "
                                  f"this is SuccessiveHalving version {STATE_VERSION}")
            if dict(state["settings"]) != self.settings or [dict(c) for c in state["configs"]] != self._configs:
                raise ConfigError(f"state settings {state['settings']!r} or configurations differ from this core's "
                                  f"{self.settings!r}")
            n_rungs = len(self.table.rungs)
            values = [{int(i): math.inf if v is None else float(v) for i, v in rung} for rung in state["values"]]
            issued = [[int(i) for i in r] for r in state["issued"]]
            members = [[int(i) for i in r] for r in state["members"]]
            if not len(values) == len(issued) == len(members) == n_rungs or len(state["tie"]) != len(self._configs):
                raise ConfigError(f"state has the wrong number of rungs or configurations for this core: {state!r:.200}")
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"malformed SuccessiveHalving state ({exc!r})") from None
        self._tie = [int(v) for v in state["tie"]]
        self._values, self._issued, self._members = values, issued, members
        self._seconds, self._out_of_time = float(state["seconds"]), bool(state["out_of_time"])

    # ------------------------------------------------------------------ internals
    def _job_key(self, job: Mapping[str, Any]) -> tuple[int, int]:
        try:
            i, t = int(job["config_id"]), int(job["rung"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"a told job needs the config_id and rung that ask() gave it, got {dict(job)!r:.200}") \
                from None
        if not 0 <= t < len(self.table.rungs) or i not in self._issued[t]:
            raise ConfigError(f"job (config_id={i}, rung={t}) was never issued by ask()")
        if i in self._values[t]:
            raise ConfigError(f"job (config_id={i}, rung={t}) was already told")
        return i, t

    def _ranked(self, t: int) -> list[int]:
        return sorted(self._values[t], key=lambda i: (self._values[t][i], self._tie[i]))

    def _advance_sync(self) -> None:
        for t in range(len(self.table.rungs) - 1):
            rung = self.table.rungs[t]
            if len(self._values[t]) == rung.n_configs and not self._members[t + 1]:
                self._members[t + 1] = self._ranked(t)[:rung.n_kept]

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
