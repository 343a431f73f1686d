"""ODE (Algorithm 1) in one process: the halving core, PU learners on nested row prefixes, PU evaluators.

Every configuration of round ``t`` is trained on the first ``r_t`` rows of one fixed
ordering of the training split (:func:`nested_order`), so the training sets of a
configuration grow by inclusion from round to round (the paper's Remark 1).  The default
ordering alternates labelled and unlabelled rows until the labelled ones run out
(``rung_sampling="balanced"``): at c = 0.01 a rung of a few hundred rows then holds every
labelled row instead of the one or two a prefix stratified by ``s`` holds.  A configuration is
scored on the validation split by IPM_PU (default) or AUC_PU, with the control variate where
the splits hold enough labelled rows for it (:data:`CV_MIN_ROWS`); the core minimises ``-R``.
The selected configuration is then refitted on the whole training split and scored on the
test rows.

Rows: the sample budget ``B`` (default ``N``, the rows of the PU data = training plus
validation rows, the paper's ``D``; ``budget_factor`` gives ``B = k N``) bounds the rows fed
to learners during the search; the final refit is reported separately (``rows_final``).  Each configuration gets at
least ``min_rows = 2`` rows (one labelled, one unlabelled: the least a PU learner can fit).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.algorithms.halving import RESERVED_KEYS, SuccessiveHalving
from raytune_fed.algorithms.schedules import DEFAULT_ETA0, DEFAULT_MU, check_schedule
from raytune_fed.errors import ConfigError
from raytune_fed.metrics import DensityRatio, auc, bounded_scores, pu_score
from raytune_fed.metrics.pu import EVALUATORS
from raytune_fed.models import get_learner
from raytune_fed.models.pu import grid_configs
from raytune_fed.random import as_generator, derive, seed_int
from raytune_fed.simulation import PUSplit

ODE_MIN_ROWS = 2
RUNG_SAMPLINGS = ("proportional", "balanced", "uniform")
CV_READINGS = ("normalised", "odds")
"""How the control variate reads section 3.5: ``normalised`` (shipped) divides the density ratio by its mean over
out-of-fold training positives (eq. 13's mean of 1), shrinks eta and is used only under :data:`CV_MIN_ROWS` and
:data:`CV_MAX_NORMALISER_SE`; ``odds`` is the paper's formula as written, ``w = (1 - g) / g`` (times the class counts
``g`` was fitted on), eta the plain regression estimate, used wherever two labelled validation rows allow it."""
CV_MIN_ROWS = 6
"""Fewest labelled rows the validation split (and the training split, which fits the density ratio) must hold
for the control variate to be used: with fewer it raised the criterion's variance on the paper's datasets
(``docs/pu.md``, ``experiments/bench_pu_criterion.py``)."""
CV_MAX_NORMALISER_SE = 0.1
"""Largest relative standard error of the density ratio's normaliser (its mean over the training positives)
for which the control variate is used: above it eq. 13's mean of 1 is not known well enough, and on the
paper's datasets the variate then raised the criterion's variance by far (a few positives with huge odds)."""
FIT_FAILURES = (ValueError, np.linalg.LinAlgError, FloatingPointError)
"""What a fit on a few rows may raise (e.g. every feature constant): the job is discarded, it ranks last."""


@dataclass(frozen=True)
class ODESettings:
    """How ODE searches: the configuration set, evaluator, schedule, budgets."""

    learners: tuple[str, ...] = ("upu",)
    evaluator: str = "ipm"
    control_variate: bool = True
    cv_reading: str = "normalised"         # see CV_READINGS
    cv_min_rows: int = CV_MIN_ROWS         # the variate is off with fewer labelled validation rows
    cv_max_normaliser_se: float = CV_MAX_NORMALISER_SE   # ... or a less precise normaliser
    cv_shrink: bool = True                 # eta shrunk towards 0 by its standard error
    schedule: str = "selfpaced"
    rung_sampling: str = "balanced"
    budget_samples: int | None = None      # None: budget_factor x N, N = training + validation rows
    budget_factor: float = 1.0
    budget_seconds: float | None = None
    eta0: float = DEFAULT_ETA0
    mu: float = DEFAULT_MU
    asynchronous: bool = False

    def __post_init__(self) -> None:
        if self.evaluator not in EVALUATORS:
            raise ConfigError(f"unknown evaluator {self.evaluator!r}; known evaluators: {list(EVALUATORS)}")
        check_schedule(self.schedule)
        if self.rung_sampling not in RUNG_SAMPLINGS:
            raise ConfigError(f"unknown rung sampling {self.rung_sampling!r}; known: {list(RUNG_SAMPLINGS)}")
        if self.cv_reading not in CV_READINGS:
            raise ConfigError(f"unknown control-variate reading {self.cv_reading!r}; known: {list(CV_READINGS)}")
        check_int("cv_min_rows", self.cv_min_rows, 2)
        check_float("cv_max_normaliser_se", self.cv_max_normaliser_se, 0.0)
        if not isinstance(self.cv_shrink, bool) or not isinstance(self.control_variate, bool):
            raise ConfigError(f"control_variate and cv_shrink must be True or False, got "
                              f"{self.control_variate!r} and {self.cv_shrink!r}")
        if check_float("budget_factor", self.budget_factor, 0.0) == 0.0:
            raise ConfigError(f"budget_factor must be > 0, got {self.budget_factor!r}")
        if not self.learners:
            raise ConfigError("ODE needs at least one PU learner for its configuration set")
        for name in self.learners:
            get_learner(name, task="pu")


@dataclass
class SearchResult:
    """What one ODE search did: the choice, its scores and its costs."""

    config: dict[str, Any]
    value: float
    test_auc: float
    rows_used: int
    rows_fed: int
    rows_final: int
    seconds: float
    n_failed: int
    trace: list[tuple[int, int, int, float]] = field(default_factory=list)


def configuration_set(learners: Sequence[str]) -> list[dict[str, Any]]:
    """Omega: the Table-3 grid of every named PU learner, each config tagged with its learner.

    In a union of grids a parameter of another learner is ``None`` (the halving core's
    configurations share their keys); :func:`build_model` drops those.
    """
    configs = [{"learner": name, **c} for name in learners for c in grid_configs(get_learner(name, task="pu"))]
    keys = list(dict.fromkeys(k for c in configs for k in c))
    return [{k: c.get(k) for k in keys} for c in configs]


def build_model(config: Mapping[str, Any], *, prior: float, seed: int) -> Any:
    """The unfitted pipeline of a tagged configuration, with the class prior set."""
    params = {k: v for k, v in config.items() if k not in ("learner", *RESERVED_KEYS) and v is not None}
    return get_learner(config["learner"], task="pu").build(params, seed=seed).set_params(model__prior=prior)


def nested_order(s: np.ndarray, seed: Any, sampling: str = "balanced") -> np.ndarray:
    """A permutation of the training rows; round ``t`` trains on its first ``r_t`` rows (nested sets).

    ``proportional``: labelled and unlabelled rows are shuffled separately and merged by their
    positions ``j / n_labelled`` and ``(i + 1/2) / n_unlabelled``, so the first row is labelled,
    the second unlabelled, and a prefix of ``r`` rows holds about ``r * n_labelled / n`` labelled
    rows (stratified by ``s``).  ``balanced``: labelled and unlabelled rows alternate until the
    labelled ones run out, so a prefix of ``r`` rows holds ``min(ceil(r / 2), n_labelled)``
    labelled rows.  ``uniform``: one uniformly random order (a prefix may hold no labelled row;
    a learner that cannot fit on it ranks last).
    """
    if sampling not in RUNG_SAMPLINGS:
        raise ConfigError(f"unknown rung sampling {sampling!r}; known: {list(RUNG_SAMPLINGS)}")
    rng = as_generator(seed)
    s = np.asarray(s)
    if sampling == "uniform":
        return rng.permutation(s.size)
    lab, unl = rng.permutation(np.flatnonzero(s == 1)), rng.permutation(np.flatnonzero(s == 0))
    if sampling == "balanced":
        keys = np.concatenate([np.arange(lab.size) * 2.0,
                               np.where(np.arange(unl.size) < lab.size, np.arange(unl.size) * 2.0 + 1.0,
                                        np.arange(unl.size) + lab.size)])
    else:
        keys = np.concatenate([np.arange(lab.size) / lab.size, (np.arange(unl.size) + 0.5) / unl.size])
    return np.concatenate([lab, unl])[np.argsort(keys, kind="stable")]


def search_budget(split: PUSplit, settings: ODESettings) -> int:
    """The sample budget ``B``: ``budget_samples``, else ``floor(budget_factor x N)``."""
    if settings.budget_samples is not None:
        return settings.budget_samples
    return int(np.floor(settings.budget_factor * split.n_pu))


class ValidationCriterion:
    """IPM_PU or AUC_PU of a model on the validation split, with the control variate where it is on.

    Reading ``normalised`` (shipped): the variate is on when ``settings.control_variate``, the
    validation and training splits each hold at least ``settings.cv_min_rows`` labelled rows,
    and the density ratio (fitted on the training split once,
    :class:`~raytune_fed.metrics.DensityRatio`) has a normaliser with a relative standard error
    of at most ``settings.cv_max_normaliser_se``; the ratio is then evaluated at the labelled
    validation rows and ``eta`` shrunk by its standard error (``cv_shrink``).  Reading ``odds``:
    the same classifier's odds without the normaliser, ``eta`` not shrunk, on from two labelled
    rows in each split (the paper's section 3.5 as written).
    """

    def __init__(self, split: PUSplit, settings: ODESettings, *, seed: Any) -> None:
        self.s_val, self.X_val = split.s_val, split.X_val
        self.evaluator = settings.evaluator
        paper = settings.cv_reading == "odds"
        self.shrink = settings.cv_shrink and not paper
        self.min_rows = 2 if paper else settings.cv_min_rows
        self.ratio = None
        if settings.control_variate and min(int(split.s_val.sum()), int(split.s_train.sum())) >= self.min_rows:
            ntc = DensityRatio(seed=seed_int(derive(seed, "ode", "ntc"))).fit(split.X_train, split.s_train)
            labelled = split.X_val[split.s_val == 1]
            if paper:
                self.ratio = ntc.raw_ratio(labelled)
            elif ntc.normaliser_se_ <= settings.cv_max_normaliser_se * ntc.normaliser_:
                self.ratio = ntc.ratio(labelled)

    @property
    def uses_control_variate(self) -> bool:
        return self.ratio is not None

    def __call__(self, model: Any) -> float:
        scores = validation_scores(model, self.X_val)
        return pu_score(self.s_val, scores, evaluator=self.evaluator, ratio=self.ratio, shrink=self.shrink,
                        min_rows=self.min_rows)


def validation_scores(model: Any, X: np.ndarray) -> np.ndarray:
    """What the evaluators score: the standardised sigmoid of the decision function (see
    :func:`raytune_fed.metrics.pu.bounded_scores`; AUC_PU is the same on raw values)."""
    return bounded_scores(model.decision_function(X))


def run_ode(split: PUSplit, settings: ODESettings, *, prior: float, seed: Any,
            configs: Sequence[Mapping[str, Any]] | None = None) -> SearchResult:
    """One ODE search on ``split`` with the class prior ``prior`` used to *train* the learners."""
    start = time.perf_counter()
    configs = configuration_set(settings.learners) if configs is None else [dict(c) for c in configs]
    budget = search_budget(split, settings)
    core = SuccessiveHalving(configs, n_rows=split.n_train, budget_samples=budget,
                             budget_seconds=settings.budget_seconds, schedule=settings.schedule,
                             eta0=settings.eta0, mu=settings.mu, min_rows=ODE_MIN_ROWS,
                             asynchronous=settings.asynchronous, seed=derive(seed, "ode", "ties"))
    order = nested_order(split.s_train, derive(seed, "ode", "order"), settings.rung_sampling)
    criterion = ValidationCriterion(split, settings, seed=seed)
    model_seed = seed_int(derive(seed, "ode", "models"))
    n_failed = rows_fed = 0
    while not core.is_finished:
        jobs = core.ask(len(configs))
        if not jobs:
            raise ConfigError("the halving core issued no job although the search is not finished")
        done, values, seconds, failed = [], [], [], []
        for job in jobs:
            rows = order[:job["n_rows"]]
            rows_fed += rows.size
            t0 = time.perf_counter()
            try:
                model = build_model(job, prior=prior, seed=model_seed).fit(split.X_train[rows], split.s_train[rows])
                values.append(-criterion(model))
                done.append(job)
                seconds.append(time.perf_counter() - t0)
            except FIT_FAILURES:
                failed.append(job)
        if done:
            core.tell(done, np.asarray(values)[:, None], seconds=seconds)
        if failed:
            core.discard(failed)        # a failed fit ranks last in its rung
            n_failed += len(failed)
    best_id, value = core.best_id()
    best = core.configuration(best_id)
    final = build_model(best, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
    test_auc = auc(split.y_test, final.decision_function(split.X_test))
    return SearchResult(config=best, value=-value, test_auc=test_auc, rows_used=core.rows_used,
                        rows_fed=rows_fed, rows_final=split.n_train, seconds=time.perf_counter() - start,
                        n_failed=n_failed,
                        trace=core.results())
