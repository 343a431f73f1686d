"""The PU grid (dataset x c x method x replication) on the shared grid engine.

A cell is one method (an ODE variant: evaluator, schedule, control variate; or a
baseline) on one PU split.  Its random stream is ``derive(seed, dataset, "c=<c>", rep)``
(:meth:`~raytune_fed.grid.Cell.seed` over the cell's coordinates, which leave the method
out), so every method of a replication sees the same split and the same prior estimate;
the in-process benchmark (``experiments/bench_pu.py``) derives the same streams.  One cell
is one Ray task holding one CPU; the split is rebuilt from the registry in the task (a
few milliseconds), so nothing large is shipped.  Storing, resuming, retrying and progress
are the grid engine's; results are written only when every cell is done (until then the
grid keeps ``results.partial.parquet`` of the cells stored so far).

Everything is checked before Ray starts: names, c, budgets, and for every dataset and c
the split itself (a class, a labelled positive to train on and one to validate with)
and ODE's first round (one row per configuration under the sample budget).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd

from raytune_fed._checks import MAX_SEED, check_float, check_int, check_share, check_unique
from raytune_fed._limits import check_bounded
from raytune_fed.algorithms.schedules import check_schedule, n_rounds, rung_table
from raytune_fed.errors import ConfigError
from raytune_fed.grid import Cell, CellResult, Progress, RayExecutor, check_grid_size, plan_cells, run_cells
from raytune_fed.metrics.pu import EVALUATORS
from raytune_fed.store import ResultStore, write_atomic
from raytune_fed.workflows._results import PartialResults, remove_partial
from raytune_fed.workflows.pu._methods import PRIOR_SOURCES, check_methods, run_method
from raytune_fed.workflows.pu._ode import (
    CV_MAX_NORMALISER_SE,
    CV_MIN_ROWS,
    CV_READINGS,
    ODE_MIN_ROWS,
    RUNG_SAMPLINGS,
    ODESettings,
    configuration_set,
    search_budget,
)

TIMING_COLUMNS = ("seconds",)
NO_MODEL_METHODS = ("ode", "wsvm")  # methods whose row may name no model (test AUC NaN beside the reason)
_COST = {"nnpu": 20.0, "wsvm": 6.0, "upu": 4.0, "supervised": 3.0, "ode": 1.0}  # relative, from bench_pu timings


@dataclass(frozen=True)
class PUGridSettings:
    """What a PU grid runs: datasets x c x methods (ODE variants) x replications."""

    datasets: tuple[str, ...] = ("twonorm",)
    cs: tuple[float, ...] = (0.01,)
    methods: tuple[str, ...] = ("ode", "upu", "nnpu", "wsvm", "supervised")
    evaluators: tuple[str, ...] = ("ipm",)
    schedules: tuple[str, ...] = ("selfpaced",)
    control_variates: tuple[bool, ...] = (True,)
    cv_reading: str = "normalised"        # how the control variate reads section 3.5 (CV_READINGS)
    budget_samples: int | None = None
    budget_factor: float = 1.0            # B = budget_factor x N when budget_samples is None
    rung_sampling: str = "balanced"
    budget_seconds: float | None = None
    asynchronous: bool = False
    n_reps: int = 10
    seed: int = 0
    supervised_trials: int = 30
    baseline_configs: int | None = None   # thin the uPU/nnPU baselines' grids (reduced runs only)
    target: str | None = None             # target column of a CSV/Parquet dataset
    prior: str = "tice"                   # "true": the split's true prior (an oracle, for diagnosis)
    positive: str | None = None           # the positive class of a multi-class dataset (one against the rest)

    def __post_init__(self) -> None:
        check_unique("datasets", self.datasets)
        if not self.cs:
            raise ConfigError("no label frequency c given")
        for c in self.cs:
            check_share("c", c, 0.0, 1.0, low_open=True)
        check_unique("c", self.cs)
        check_methods(self.methods)
        if self.prior not in PRIOR_SOURCES:
            raise ConfigError(f"unknown prior source {self.prior!r}; known: {list(PRIOR_SOURCES)}")
        for e in check_unique("evaluators", self.evaluators):
            if e not in EVALUATORS:
                raise ConfigError(f"unknown evaluator {e!r}; known evaluators: {list(EVALUATORS)}")
        for s in check_unique("schedules", self.schedules):
            check_schedule(s)
        if not self.control_variates or not all(isinstance(v, bool) for v in self.control_variates):
            raise ConfigError(f"control_variates must be a non-empty tuple of booleans, got {self.control_variates!r}")
        check_unique("control_variates", self.control_variates)
        if self.budget_samples is not None:
            check_int("budget_samples", self.budget_samples, 1)
        if check_float("budget_factor", self.budget_factor, 0.0) == 0.0:
            raise ConfigError(f"budget_factor must be > 0, got {self.budget_factor!r}")
        if self.cv_reading not in CV_READINGS:
            raise ConfigError(f"unknown control-variate reading {self.cv_reading!r}; known: {list(CV_READINGS)}")
        if self.rung_sampling not in RUNG_SAMPLINGS:
            raise ConfigError(f"unknown rung sampling {self.rung_sampling!r}; known: {list(RUNG_SAMPLINGS)}")
        if self.budget_seconds is not None and check_float("budget_seconds", self.budget_seconds, 0.0) == 0.0:
            raise ConfigError(f"budget_seconds must be > 0 (or None for no time budget), got {self.budget_seconds!r}")
        check_int("n_reps", self.n_reps, 1)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_bounded("supervised_trials", self.supervised_trials, 1, "optuna")
        if self.baseline_configs is not None:
            thinned = [m for m in ("upu", "nnpu") if m in self.methods]
            if not thinned:
                raise ConfigError(f"baseline_configs thins the upu and nnpu baselines, and this grid runs neither "
                                  f"(methods {list(self.methods)}), got {self.baseline_configs!r}")
            sizes = {m: len(configuration_set([m])) for m in thinned}
            top = max(sizes.values())
            try:
                check_int("baseline_configs", self.baseline_configs, 1, top)
            except ConfigError as exc:
                raise ConfigError(f"{exc}: the grid of {max(sizes, key=lambda m: sizes[m])} has {top} configurations, "
                                  f"so more cannot be kept") from None


@dataclass(frozen=True)
class PUCell(Cell):
    """One method (or ODE variant) on one split; ``evaluator``/``schedule``/``control_variate`` are ODE's."""

    dataset: str
    c: float
    rep: int
    method: str
    evaluator: str | None
    schedule: str | None
    control_variate: bool | None
    settings: PUGridSettings = field(repr=False)

    def config(self) -> dict[str, Any]:
        """The cell's coordinates and only the settings its method uses (so grids that differ elsewhere
        share this cell's stored result)."""
        s = self.settings
        own: dict[str, Any] = {}
        if self.method == "ode":
            own = {"evaluator": self.evaluator, "schedule": self.schedule, "control_variate": self.control_variate,
                   "budget_samples": s.budget_samples, "budget_seconds": s.budget_seconds,
                   "asynchronous": s.asynchronous, "rung_sampling": s.rung_sampling, "budget_factor": s.budget_factor,
                   "cv_min_rows": CV_MIN_ROWS, "cv_max_normaliser_se": CV_MAX_NORMALISER_SE,
                   "cv_reading": s.cv_reading}
        elif self.method in ("upu", "nnpu"):
            own = {"baseline_configs": s.baseline_configs}
        elif self.method == "supervised":
            own = {"supervised_trials": s.supervised_trials}
        if self.method in ("ode", "upu", "nnpu") and s.prior != "tice":
            own["prior"] = s.prior
        chosen = {"positive": s.positive} if s.positive is not None else {}  # keys of earlier runs unchanged
        return {"workflow": "pu", "dataset": self.dataset, "target": s.target, **chosen, "c": self.c,
                "rep": self.rep, "seed": s.seed, "method": self.method, **own}

    @property
    def coordinates(self) -> tuple[int | str, ...]:
        return (self.dataset, f"c={self.c}", self.rep)

    @property
    def root_seed(self) -> int:
        return self.settings.seed

    @property
    def variant(self) -> str:
        """``ode-ipm-selfpaced`` (``-nocv`` without the control variate), or the baseline's name."""
        if self.method != "ode":
            return self.method
        return f"ode-{self.evaluator}-{self.schedule}" + ("" if self.control_variate else "-nocv")

    @property
    def label(self) -> str:
        return f"{self.dataset} c={self.c} rep={self.rep} {self.variant}"

    @property
    def cost(self) -> float:
        return _COST[self.method]

    def check_rows(self, rows) -> str | None:
        """One row with this cell's coordinates, a test AUC in [0, 1] (NaN beside the reason for an ODE search that
        selected nothing) and finite counts and priors."""
        from raytune_fed.grid._rowchecks import identity_problem, number_problem

        if len(rows) != 1:
            return f"it holds {len(rows)} rows where a PU cell gives one"
        row = rows[0]
        checks = [identity_problem(row, {"dataset": self.dataset, "c": self.c, "rep": self.rep, "method": self.method,
                                         "variant": self.variant, "evaluator": self.evaluator,
                                         "schedule": self.schedule, "control_variate": self.control_variate}),
                  _test_auc_problem(row, self.method),
                  number_problem("true_prior", row.get("true_prior"), 0.0, 1.0),
                  number_problem("prior", row.get("prior"), 0.0, 1.0, optional=True)]
        checks += [number_problem(name, row.get(name), 0, float("inf"), integer=True)
                   for name in ("rows_used", "n_train", "n_labelled")]
        return next((problem for problem in checks if problem), None)


def _test_auc_problem(row: dict, method: str) -> str | None:
    """A test AUC in [0, 1]; or, for an ODE search that selected nothing or a WSVM that could not fit, NaN beside
    its reason."""
    from raytune_fed.grid._rowchecks import number_problem

    reason, value = row.get("no_selection"), row.get("test_auc")
    if reason is None:
        return number_problem("test_auc", value, 0.0, 1.0)
    if method in NO_MODEL_METHODS and isinstance(reason, str) and reason and isinstance(value, float) \
            and math.isnan(value):
        return None
    return (f"its no_selection is {reason!r} with test_auc {value!r}: only an ODE search that selected nothing or a "
            f"WSVM that could not fit has one, with test_auc NaN and the reason as text")


def build_grid(settings: PUGridSettings) -> list[PUCell]:
    """Every dataset x c x replication x method, ODE expanded over evaluators x schedules x control variates."""
    variants: list[tuple[str, str | None, str | None, bool | None]] = []
    for method in settings.methods:
        if method == "ode":
            variants += [("ode", e, s, v) for e, s, v in product(settings.evaluators, settings.schedules,
                                                                 settings.control_variates)]
        else:
            variants.append((method, None, None, None))
    check_grid_size(len(settings.datasets) * len(settings.cs) * settings.n_reps * len(variants),
                    f"{len(settings.datasets)} datasets x {len(settings.cs)} c x {settings.n_reps} replications x "
                    f"{len(variants)} methods")
    return [PUCell(d, c, rep, *v, settings=settings) for d in settings.datasets for c in settings.cs
            for rep in range(settings.n_reps) for v in variants]


def cell_split(cell: PUCell) -> Any:
    """The cell's PU split (rebuilt from the dataset registry; the same for every method of a replication)."""
    from raytune_fed.data import load_dataset
    from raytune_fed.simulation import pu_dataset, pu_split

    data = pu_dataset(load_dataset(cell.dataset, target=cell.settings.target), cell.settings.positive)
    return pu_split(data.X, data.y, c=cell.c, seed=cell.seed(), name=cell.dataset)


def ode_settings(cell: PUCell) -> ODESettings:
    """The ODE settings of a cell (its own evaluator, schedule and control variate; the grid's budgets)."""
    s = cell.settings
    return ODESettings(evaluator=cell.evaluator or "ipm", schedule=cell.schedule or "selfpaced",
                       control_variate=True if cell.control_variate is None else cell.control_variate,
                       cv_reading=s.cv_reading, budget_samples=s.budget_samples, budget_factor=s.budget_factor,
                       rung_sampling=s.rung_sampling,
                       budget_seconds=s.budget_seconds, asynchronous=s.asynchronous)


def run_cell(cell: PUCell) -> CellResult:
    """Run one cell: its method on its split; one row (test AUC, choice, rows, prior) and its seconds.

    An ODE search in which every fit failed selects nothing, and a WSVM whose estimate of ``c`` leaves no
    negative cannot fit: its row has test AUC NaN and the
    reason in ``no_selection`` (a result of the method on that split, the same on every run),
    which the tables count apart.  Any other exception fails the cell (the grid engine keeps it
    in ``failures/`` and writes no results until it is resolved)."""
    split = cell_split(cell)
    s = cell.settings
    ode = ode_settings(cell)
    started = time.perf_counter()
    result = run_method(cell.method, split, seed=cell.seed(), ode=ode, supervised_trials=s.supervised_trials,
                        max_configs=s.baseline_configs, prior=s.prior)
    seconds = time.perf_counter() - started
    row = {"dataset": cell.dataset, "c": cell.c, "rep": cell.rep, "method": cell.method, "variant": cell.variant,
           "evaluator": cell.evaluator, "schedule": cell.schedule, "control_variate": cell.control_variate,
           "test_auc": float(result.test_auc), "config": json.dumps(result.config, sort_keys=True, default=str),
           "rows_used": int(result.rows_used), "prior": result.prior, "true_prior": float(split.unlabelled_prior()),
           "n_train": split.n_train, "n_labelled": int(split.s_train.sum()), "no_selection": result.no_selection}
    return CellResult([row], [{"seconds": seconds}])


def check_inputs(settings: PUGridSettings) -> None:
    """Build every dataset x c split once and ODE's rung tables: bad input fails here, before Ray."""
    from raytune_fed.data import load_dataset
    from raytune_fed.simulation import pu_dataset

    n_configs = len(configuration_set(ODESettings().learners))
    for name in settings.datasets:
        data = load_dataset(name, target=settings.target)
        if data.n_classes < 2:
            raise ConfigError(f"dataset {name!r} has a single class; PU learning needs positives and negatives")
        pu_dataset(data, settings.positive)
        for c in settings.cs:
            split = cell_split(PUCell(name, c, 0, "ode", None, None, None, settings=settings))
            if "ode" not in settings.methods:
                continue
            budget = search_budget(split, ODESettings(budget_samples=settings.budget_samples,
                                                      budget_factor=settings.budget_factor))
            most = n_rounds(n_configs) * n_configs * split.n_train  # every configuration on every row, every round
            if budget > most:
                what = "budget_samples" if settings.budget_samples is not None else \
                    f"budget_factor x N ({settings.budget_factor:g} x {split.n_pu:,})"
                raise ConfigError(f"{what} must be at most {most:,} for dataset {name!r}, c={c}, got "
                                  f"{budget:,}: with it every one of the {n_configs} configurations already trains "
                                  f"on all {split.n_train} rows in each of the {n_rounds(n_configs)} rounds")
            for schedule in settings.schedules:
                try:
                    rung_table(n_configs, n_rows=split.n_train, budget_samples=budget, schedule=schedule,
                               min_rows=ODE_MIN_ROWS)
                except ConfigError as exc:
                    raise ConfigError(f"dataset {name!r}, c={c}: ODE over {n_configs} configurations: {exc}") from None


def run_grid(settings: PUGridSettings, *, out: str | Path, address: str | None = None, num_cpus: int | None = None,
             progress: Progress | None = None, recompute_damaged: bool = False, placement_timeout: float = 600.0,
             max_retries: int = 2, executor: Any = None) -> pd.DataFrame:
    """Run (or resume) a PU grid; writes ``results.parquet`` and ``summary.json`` under ``out``.

    While it runs, and when it stops incomplete, ``out/results.partial.parquet`` holds the rows
    of the cells stored so far (see :mod:`raytune_fed.workflows._results`); it is removed once
    ``results.parquet`` is written.

    ``executor`` defaults to :class:`~raytune_fed.grid.RayExecutor` on the session
    :func:`raytune_fed.runtime.connect` gives (started only when a cell is missing).
    """
    from raytune_fed.grid import check_retry_options
    from raytune_fed.runtime import check_address, check_num_cpus, connect
    from raytune_fed.workflows.pu._summary import summarize

    check_address(address)
    check_num_cpus(num_cpus)
    check_retry_options(max_retries, placement_timeout)
    executor = executor or RayExecutor(max_retries=max_retries, placement_timeout=placement_timeout)
    cells = build_grid(settings)
    check_inputs(settings)
    store = ResultStore(out)
    if isinstance(executor, RayExecutor) and plan_cells(cells, store, recompute_damaged=recompute_damaged).todo:
        connect(address, num_cpus)
    result = run_cells(cells, run_cell, store, executor, recompute_damaged=recompute_damaged, progress=progress,
                       name="pu", on_partial=PartialResults(out))
    frame = result.frame()
    out = Path(out)
    write_atomic(out / "results.parquet", lambda p: frame.to_parquet(p, index=False))
    summary = summarize(frame)
    summary = {"settings": asdict(settings), **summary, "timings": {"grid_seconds": result.seconds,
                                                                     **summary["timings"]}}
    write_atomic(out / "summary.json", lambda p: Path(p).write_text(json.dumps(summary, indent=2, default=str)))
    remove_partial(out)  # results.parquet is complete: the partial file has done its work
    return frame
