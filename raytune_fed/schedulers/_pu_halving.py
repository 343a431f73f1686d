"""``PUHalvingScheduler``: ODE's halving search (Algorithm 1) as a Ray Tune trial scheduler.

A thin adapter over :class:`~raytune_fed.algorithms.halving.SuccessiveHalving`: Tune's
trials are the configurations (configuration ``i`` is the ``i``-th trial added), the core
says which trial may train which rung, and every report is told to the core.

Contract with the trainable.  Train on ``scheduler.rung_rows[t]`` rows at rung ``t``
(``t = 0, 1, ...``), report the metric and the rows trained on (``resource_attr``,
default ``"n_rows"``) once per rung, with a checkpoint from which the trainable resumes at
the next rung (a paused trial restarts from it).  A report with fewer rows than the rung's
is an intermediate one (``CONTINUE``); more rows than the rung allows is an error.

Decisions.  After a rung report the trial continues if the core gives it the next rung
now, pauses if it may still get one (synchronous mode: its rung is not complete yet;
asynchronous mode: it may still rank within the kept share), and stops otherwise.  Paused
trials that can no longer be promoted are stopped; paused trials that are promoted are
started by :meth:`choose_trial_to_run`.  In synchronous mode no trial trains rung ``t + 1``
before every trial of rung ``t`` has reported and been ranked.  A trial that errors or
ends before reporting its rung counts as failed (it ranks last).

Budgets.  The core issues exactly the rung table's jobs, and every job's rows count as
consumed when the job is issued, so an uninterrupted run consumes at most ``budget_samples``
rows.  ``budget_seconds`` caps the sum of ``result[time_attr]`` (default
``time_this_iter_s``: the training time of each report); once spent, every trial is stopped
and :attr:`best_trial_id` is the best trial of the highest rung reached.

Restore.  :meth:`get_state` / :meth:`set_state` are explicit and versioned (JSON-safe).
Tune saves a scheduler's state with an experiment only through callbacks, so pass
:meth:`state_callback` in ``RunConfig(callbacks=[...])``; ``Tuner.restore`` then brings the
scheduler back with the trials.  Without it, a restored trial that has reported before is
unknown to the fresh scheduler, which raises :class:`~raytune_fed.errors.ConfigError` naming
the fix (Tune logs it as "Failed to restore the run state" and the run stops with it).
Tune (2.60) requeues every unfinished trial as ``PENDING`` on restore and starts pending
trials without asking the scheduler, so :meth:`on_trial_add` sets each restored unfinished
trial ``PAUSED``: it waits, like any paused trial, until :meth:`choose_trial_to_run` grants
it a rung.  The callback also tells the scheduler when a trial starts, so it knows which
jobs had begun before the interruption: training such a job again consumes its rows a
second time, and it is granted only if the rows consumed so far, the rows it needs and the
rows every other planned job needs fit in ``budget_samples``; otherwise it ranks last in
its rung.  So rows consumed (every fit started, before and after a restore) never exceed
the budget.  A trial that resumes from a checkpoint older than its last report trains that
rung again; the replayed report is not told twice and its rows count as consumed.
Concurrency.  Do not set ``max_concurrent_trials`` below ``n_configs``: a synchronous rung
needs every trial to exist, and Tune counts paused trials against that limit, so it would
stop creating the trials the rung waits for.  Resources (CPUs per trial) bound how many
train at once.  Pending trials are Tune's to start; :meth:`choose_trial_to_run` starts only
the paused trials it promoted.  Use ``reuse_actors=True``; even so each pause and resume costs
far more than a cheap fit (``docs/pu.md``, "The Tune path's cost").
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ray.tune import Callback
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from raytune_fed._checks import check_int
from raytune_fed.algorithms.halving import SuccessiveHalving
from raytune_fed.algorithms.schedules import DEFAULT_ETA0, DEFAULT_MU, RungTable
from raytune_fed.errors import ConfigError
from raytune_fed.types import Objective, check_direction

if TYPE_CHECKING:
    from ray.tune.execution.tune_controller import TuneController

logger = logging.getLogger(__name__)
STATE_VERSION = 3  # 2: no record of started jobs; 1: the halving core's own state format


class PUHalvingScheduler(TrialScheduler):
    """Synchronous (or ASHA-like asynchronous) halving over ``n_configs`` trials under a row budget.

    Parameters
    ----------
    n_configs : number of trials (configurations) the experiment creates (``K``).
    n_rows : training rows available (``r_t`` is capped there; default budget).
    seed : root seed (ties between equal metrics).
    metric, mode : the reported metric and ``"min"``/``"max"`` (or from ``TuneConfig``).
    resource_attr : name of the reported rows-trained-on value.
    budget_samples, budget_seconds, schedule, eta0, mu, min_rows, asynchronous :
        as for :class:`~raytune_fed.algorithms.halving.SuccessiveHalving`.
    time_attr : result key summed against ``budget_seconds``.
    """

    def __init__(self, *, n_configs: int, n_rows: int, seed: Any, metric: str | None = None,
                 mode: str | None = None, resource_attr: str = "n_rows", budget_samples: int | None = None,
                 budget_seconds: float | None = None, time_attr: str = "time_this_iter_s",
                 schedule: str = "selfpaced", eta0: float = DEFAULT_ETA0, mu: float = DEFAULT_MU,
                 min_rows: int = 1, asynchronous: bool = False) -> None:
        super().__init__()
        k = check_int("n_configs", n_configs, 2)
        if mode is not None:
            check_direction(mode)
        for name, value in (("resource_attr", resource_attr), ("time_attr", time_attr)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
        self._core = SuccessiveHalving([{"trial": i} for i in range(k)], n_rows=n_rows, seed=seed,
                                       budget_samples=budget_samples, budget_seconds=budget_seconds,
                                       schedule=schedule, eta0=eta0, mu=mu, min_rows=min_rows,
                                       asynchronous=asynchronous)
        self._metric, self._mode = metric, mode
        self._resource_attr, self._time_attr = resource_attr, time_attr
        self._trial_ids: list[str] = []
        self._started: set[tuple[int, int]] = set()    # (config_id, rung) of jobs a trial began to train
        self._restarts: set[tuple[int, int]] = set()   # started jobs granted a second start, not yet begun
        self._extra_rows = 0                           # rows of second starts and replayed rungs

    # ------------------------------------------------------------------ public answers
    @property
    def rung_rows(self) -> list[int]:
        """Rows to train on at each rung; hand these to the trainable."""
        return [r.n_rows for r in self._core.table.rungs]

    @property
    def table(self) -> RungTable:
        """The rung table (rounds, configurations per round, rows per configuration)."""
        return self._core.table

    @property
    def rows_used(self) -> int:
        """Rows of every rung job issued so far (never above ``budget_samples``)."""
        return self._core.rows_used

    @property
    def rows_consumed(self) -> int:
        """Rows of every job issued plus every job (or reported rung) trained again after a restore.

        An upper bound on the rows of every fit started; never above ``budget_samples``
        except for rungs replayed from a checkpoint older than the trial's last report.
        """
        return self._core.rows_used + self._extra_rows

    @property
    def is_finished(self) -> bool:
        """True once every rung is complete or the time budget is spent."""
        return self._core.is_finished

    @property
    def seconds_used(self) -> float:
        """Sum of ``result[time_attr]`` over the reports told to the core."""
        return self._core.seconds_used

    @property
    def best_config_id(self) -> int:
        """Index (in trial-add order) of the selected configuration."""
        return self._core.best_id()[0]

    @property
    def best_trial_id(self) -> str:
        """Trial id of the selected configuration."""
        return self._trial_ids[self.best_config_id]

    def results(self) -> list[tuple[int, int, int, float]]:
        """``(config_id, rung, n_rows, minimised value)`` of every report told to the core."""
        return self._core.results()

    # ------------------------------------------------------------------ Tune hooks
    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if (self._metric and metric) or (self._mode and mode):
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = check_direction(mode)
        return True

    def on_trial_add(self, tune_controller: TuneController, trial: Trial) -> None:
        if self._metric is None or self._mode is None:
            raise ConfigError(f"PUHalvingScheduler needs metric and mode (here or in TuneConfig), got "
                              f"metric={self._metric!r}, mode={self._mode!r}")
        if trial.trial_id in self._trial_ids:        # a trial coming back after Tuner.restore
            if trial.status in (Trial.TERMINATED, Trial.ERROR):
                self._fail_open_job(tune_controller, trial, stop_others=False)
            elif trial.status == Trial.PENDING:
                trial.set_status(Trial.PAUSED)        # Tune would start it unasked; it waits for a grant
            return
        if trial.last_result and self._resource_attr in trial.last_result:
            raise ConfigError(f"trial {trial.trial_id} has reported before but the scheduler does not know it: "
                              "to restore an experiment, pass scheduler.state_callback() in "
                              "RunConfig(callbacks=[...])")
        if len(self._trial_ids) >= self._core.table.n_configs:
            raise ConfigError(f"PUHalvingScheduler was built for n_configs={self._core.table.n_configs} trials; "
                              f"trial {trial.trial_id} is one more (set num_samples / the grid to match)")
        self._trial_ids.append(trial.trial_id)

    def choose_trial_to_run(self, tune_controller: TuneController) -> Trial | None:
        jobs = {job["config_id"]: job for job in self._pull()}
        for trial in tune_controller.get_trials():
            # PENDING trials are Tune's to start (each has its actor requested already); handing one
            # back here would move a cached actor onto it and cancel that request, so trials would
            # run one at a time on one actor while the requested ones start and are killed.
            if trial.status != Trial.PAUSED or trial.trial_id not in self._trial_ids:
                continue
            job = jobs.get(self._index(trial))
            if job is None:
                continue
            key = (job["config_id"], job["rung"])
            if key in self._started and key not in self._restarts:
                if self._committed_rows() + job["n_rows"] > self._core.table.budget_samples:
                    logger.warning("trial %s began rung %d before the restore; training it again would exceed "
                                   "budget_samples=%d, so it ranks last", trial.trial_id, job["rung"],
                                   self._core.table.budget_samples)
                    self._core.discard([job])
                    return self.choose_trial_to_run(tune_controller)
                self._restarts.add(key)
            return trial
        self._stop_hopeless(tune_controller, exclude=None)
        return None

    def on_trial_start(self, trial: Trial) -> None:
        """A trial began training (called by :meth:`state_callback`): its open job's rows are consumed."""
        if trial.trial_id not in self._trial_ids:
            return
        job = self._job(self._index(trial))
        if job is None:
            return
        key = (job["config_id"], job["rung"])
        if key in self._started:
            self._extra_rows += job["n_rows"]
            self._restarts.discard(key)
        self._started.add(key)

    def on_trial_result(self, tune_controller: TuneController, trial: Trial, result: dict) -> str:
        i = self._index(trial)
        rows = result.get(self._resource_attr)
        if rows is None or self._metric not in result:
            raise ConfigError(f"trial {trial.trial_id} reported {sorted(result)[:12]}; PUHalvingScheduler needs "
                              f"{self._metric!r} and the rows trained on as {self._resource_attr!r}")
        job = self._job(i)
        if job is not None and rows == job["n_rows"]:
            value = _number(result[self._metric])
            if math.isfinite(value):
                value = self._objective().to_minimised(value)
                self._core.tell([job], [[value]], seconds=[float(result.get(self._time_attr, 0.0))])
            else:
                logger.warning("trial %s reported %s=%r at rung %d; it ranks last", trial.trial_id, self._metric,
                               result[self._metric], job["rung"])
                self._core.discard([job])
            return self._decide(tune_controller, trial)
        if job is not None and rows < job["n_rows"]:
            return TrialScheduler.CONTINUE           # an intermediate report, or a rung replayed after a restore
        told = {n for cid, _, n, _ in self._core.results() if cid == i}
        if job is None and rows in told:
            self._extra_rows += int(rows)                 # a reported rung replayed after a restore: not told again
            return self._decide(tune_controller, trial)
        allowed = job["n_rows"] if job is not None else "no further rows"
        raise ConfigError(f"trial {trial.trial_id} reported {rows} rows; the scheduler allows it {allowed} now "
                          f"(rung rows {self.rung_rows}): train on scheduler.rung_rows[rung] rows, rung by rung")

    def on_trial_complete(self, tune_controller: TuneController, trial: Trial, result: dict) -> None:
        self._fail_open_job(tune_controller, trial)

    def on_trial_error(self, tune_controller: TuneController, trial: Trial) -> None:
        self._fail_open_job(tune_controller, trial)

    def on_trial_remove(self, tune_controller: TuneController, trial: Trial) -> None:
        self._fail_open_job(tune_controller, trial)

    def debug_string(self) -> str:
        table = self._core.table
        mode = "asynchronous" if self._core.settings["asynchronous"] else "synchronous"
        told = [sum(1 for _, t, _, _ in self._core.results() if t == r.index) for r in table.rungs]
        rungs = ", ".join(f"rung {r.index}: {n}/{r.n_configs} x {r.n_rows} rows" for r, n in zip(table.rungs, told))
        return (f"PUHalvingScheduler ({mode}, {table.schedule}): {rungs}; rows {self._core.rows_used}/"
                f"{table.budget_samples}")

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Explicit, versioned, JSON-safe state: settings, trial ids in add order, the core's state."""
        return {"version": STATE_VERSION, "kind": "PUHalvingScheduler", "metric": self._metric, "mode": self._mode,
                "resource_attr": self._resource_attr, "time_attr": self._time_attr,
                "trial_ids": list(self._trial_ids), "started": sorted([i, t] for i, t in self._started),
                "restarts": sorted([i, t] for i, t in self._restarts), "extra_rows": self._extra_rows,
                "core": self._core.get_state()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        try:
            if state["version"] != STATE_VERSION or state["kind"] != "PUHalvingScheduler":
                raise ConfigError(f"cannot restore state version {state['version']!r} of {state['kind']!r}; this is "
                                  f"PUHalvingScheduler version {STATE_VERSION}")
            mine = (self._resource_attr, self._time_attr)
            if (state["resource_attr"], state["time_attr"]) != mine:
                raise ConfigError(f"state was saved with resource/time attributes "
                                  f"{(state['resource_attr'], state['time_attr'])}, this scheduler uses {mine}")
            self._core.set_state(state["core"])
            self._trial_ids = [str(t) for t in state["trial_ids"]]
            self._started = {(int(i), int(t)) for i, t in state["started"]}
            self._restarts = set()          # a grant made before the restore is not a start: it is asked again
            self._extra_rows = int(state["extra_rows"])
            self._metric, self._mode = state["metric"], state["mode"]
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"malformed PUHalvingScheduler state ({exc!r})") from None

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w", encoding="utf-8") as handle:
            json.dump(self.get_state(), handle)

    def restore(self, checkpoint_path: str) -> None:
        if not os.path.isfile(checkpoint_path):
            raise ConfigError(f"no scheduler state at {checkpoint_path!r}")
        with open(checkpoint_path, encoding="utf-8") as handle:
            self.set_state(json.load(handle))

    def state_callback(self) -> PUHalvingStateCallback:
        """A Tune callback that saves and restores this scheduler with the experiment."""
        return PUHalvingStateCallback(self)

    # ------------------------------------------------------------------ internals
    def _index(self, trial: Trial) -> int:
        try:
            return self._trial_ids.index(trial.trial_id)
        except ValueError:
            raise ConfigError(f"trial {trial.trial_id} was never added to PUHalvingScheduler") from None

    def _committed_rows(self) -> int:
        """Rows the plan needs (every job of the rung table) plus rows started again and granted to start again."""
        open_jobs = {(j["config_id"], j["rung"]) for j in self._core.pending()}
        restarts = sum(self._core.table.rungs[t].n_rows for i, t in self._restarts if (i, t) in open_jobs)
        return self._core.table.total_rows + self._extra_rows + restarts

    def _pull(self) -> list[dict[str, Any]]:
        self._core.ask(self._core.table.n_configs)
        return self._core.pending()

    def _objective(self) -> Objective:
        if self._metric is None or self._mode is None:
            raise ConfigError(f"PUHalvingScheduler needs metric and mode (here or in TuneConfig), got "
                              f"metric={self._metric!r}, mode={self._mode!r}")
        return Objective(self._metric, check_direction(self._mode))

    def _job(self, i: int) -> dict[str, Any] | None:
        return next((job for job in self._core.pending() if job["config_id"] == i), None)

    def _decide(self, tune_controller: TuneController, trial: Trial) -> str:
        i = self._index(trial)
        ready = {job["config_id"] for job in self._pull()}
        self._stop_hopeless(tune_controller, exclude=trial.trial_id)
        if i in ready:
            job = self._job(i)
            if job is None:
                raise RuntimeError(f"configuration {i} is ready but the halving core has no job for it")
            self._started.add((job["config_id"], job["rung"]))   # it trains its next rung right away
            return TrialScheduler.CONTINUE
        return TrialScheduler.PAUSE if self._core.has_future(i) else TrialScheduler.STOP

    def _stop_hopeless(self, tune_controller: TuneController, exclude: str | None) -> None:
        for other in tune_controller.get_trials():
            if other.trial_id == exclude or other.trial_id not in self._trial_ids:
                continue
            waiting = other.status in (Trial.PAUSED, Trial.PENDING) or other.is_saving
            if waiting and not self._core.has_future(self._trial_ids.index(other.trial_id)):
                tune_controller.stop_trial(other)

    def _fail_open_job(self, tune_controller: TuneController, trial: Trial, stop_others: bool = True) -> None:
        if trial.trial_id not in self._trial_ids:
            return
        job = self._job(self._index(trial))
        if job is not None and not self._core.is_finished:
            logger.warning("trial %s ended without reporting rung %d; it ranks last", trial.trial_id, job["rung"])
            self._core.discard([job])
            self._pull()
            if stop_others:
                self._stop_hopeless(tune_controller, exclude=trial.trial_id)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class PUHalvingStateCallback(Callback):
    """Saves a :class:`PUHalvingScheduler`'s state with Tune's experiment state and restores it."""

    def __init__(self, scheduler: PUHalvingScheduler) -> None:
        self.scheduler = scheduler

    def on_trial_start(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self.scheduler.on_trial_start(trial)

    def get_state(self) -> dict[str, Any]:
        return {"pu_halving_scheduler": self.scheduler.get_state()}

    def set_state(self, state: dict) -> None:
        self.scheduler.set_state(state["pu_halving_scheduler"])
