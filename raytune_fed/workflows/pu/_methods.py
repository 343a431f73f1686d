"""The compared methods of the ODE paper (section 5.1), each run on one PU split.

* ``ode`` - :func:`~raytune_fed.workflows.pu._ode.run_ode` over the uPU grid (Table 3).
* ``upu`` / ``nnpu`` - the paper's baselines: their whole Table-3 grid trained on all
  training rows, the configuration with the lowest uPU / nnPU risk (zero-one loss) on the
  validation split selected.
* ``wsvm`` - Elkan & Noto's weighted RBF SVM, default ``C = 1``, ``gamma = "scale"`` (the
  paper names no WSVM hyperparameters).
* ``supervised`` - LightGBM on ``s`` tuned by TPE on the validation split.

Methods that need the class prior (``ode`` to train uPU, ``upu``, ``nnpu``) estimate it
once per split with TIcE on the training rows; its time counts towards the method's
seconds.  ``prior="true"`` gives them the split's true prior instead (an oracle, for
diagnosing how much of a result is the estimate's).  Every method reports the test AUC of its final model;
an ODE search that names no configuration (every fit failed) and a WSVM that cannot fit (its estimate of
``c`` leaves no negative to train on) report NaN and the reason (``no_selection``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError, NoModelError, NoSelectionError
from raytune_fed.metrics import auc, nnpu_risk, upu_risk
from raytune_fed.models.pu import WSVM, SupervisedPU, TIcE
from raytune_fed.random import derive, seed_int
from raytune_fed.simulation import PUSplit
from raytune_fed.workflows.pu._ode import ODESettings, build_model, configuration_set, run_ode

METHOD_NAMES = ("ode", "upu", "nnpu", "wsvm", "supervised")
PRIOR_SOURCES = ("tice", "true")


@dataclass
class MethodResult:
    """One method on one split: its test AUC, what it chose and what it cost."""

    method: str
    test_auc: float
    config: dict[str, Any]
    rows_used: int
    seconds: float
    prior: float | None
    no_selection: str | None = None     # why the method named no model (test_auc is then NaN)


def check_methods(names: Sequence[str]) -> tuple[str, ...]:
    names = tuple(names)
    if not names:
        raise ConfigError(f"no methods given; known methods: {list(METHOD_NAMES)}")
    for n in names:
        if n not in METHOD_NAMES:
            raise ConfigError(f"unknown method {n!r}; known methods: {list(METHOD_NAMES)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"methods must be distinct, got {list(names)}")
    return names


def estimate_prior(split: PUSplit, seed: Any) -> float:
    """TIcE's estimate of pi, the share of positives among the unlabelled training rows."""
    return TIcE(random_state=seed_int(derive(seed, "prior"))).fit(split.X_train, split.s_train).unlabelled_prior_


def thin(configs: list[dict[str, Any]], max_configs: int | None) -> list[dict[str, Any]]:
    """``max_configs`` configurations evenly spaced over ``configs`` (all of them when None)."""
    if max_configs is None:
        return configs
    if isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 1:
        raise ConfigError(f"max_configs must be an integer >= 1 or None, got {max_configs!r}")
    if max_configs >= len(configs):
        return configs
    return [configs[i] for i in np.unique(np.linspace(0, len(configs) - 1, max_configs).round().astype(int))]


def _risk_selection(split: PUSplit, learner: str, prior: float, seed: Any,
                    max_configs: int | None) -> tuple[dict[str, Any], float, int]:
    risk = upu_risk if learner == "upu" else nnpu_risk
    best, best_risk, best_model = None, np.inf, None
    model_seed = seed_int(derive(seed, learner, "models"))
    configs = thin(configuration_set([learner]), max_configs)
    for config in configs:
        model = build_model(config, prior=prior, seed=model_seed).fit(split.X_train, split.s_train)
        value = risk(split.s_val, model.decision_function(split.X_val), prior)
        if value < best_risk:
            best, best_risk, best_model = config, value, model
    if best is None or best_model is None:
        raise NoSelectionError(f"{learner}: no configuration of {len(configs)} had a finite validation risk")
    return best, auc(split.y_test, best_model.decision_function(split.X_test)), split.n_train * len(configs)


def run_method(name: str, split: PUSplit, *, seed: Any, ode: ODESettings | None = None,
               supervised_trials: int = 30, max_configs: int | None = None, prior: str = "tice") -> MethodResult:
    """Run method ``name`` on ``split``; ``ode`` configures the ``ode`` method.

    ``max_configs`` thins the ``upu`` / ``nnpu`` baselines' grid to that many evenly spaced
    configurations (reduced runs only; the paper's baselines use the whole grid).
    """
    check_methods([name])
    start = time.perf_counter()
    if name == "wsvm":
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), WSVM(random_state=seed_int(derive(seed, "wsvm"))))
        try:
            model.fit(split.X_train, split.s_train)
        except NoModelError as exc:         # no negative left to train on: no model, no test AUC
            return MethodResult(name, float("nan"), {}, 0, time.perf_counter() - start, None, no_selection=str(exc))
        return MethodResult(name, auc(split.y_test, model.decision_function(split.X_test)), {}, split.n_train,
                            time.perf_counter() - start, None)
    if name == "supervised":
        model = SupervisedPU(n_trials=supervised_trials, random_state=seed_int(derive(seed, "supervised")))
        model.fit(split.X_train, split.s_train, split.X_val, split.s_val)
        return MethodResult(name, auc(split.y_test, model.decision_function(split.X_test)), model.best_params_,
                            split.n_train * supervised_trials, time.perf_counter() - start, None)
    if prior not in PRIOR_SOURCES:
        raise ConfigError(f"unknown prior source {prior!r}; known: {list(PRIOR_SOURCES)}")
    class_prior = estimate_prior(split, seed) if prior == "tice" else float(split.unlabelled_prior())
    if name == "ode":
        try:
            result = run_ode(split, ode or ODESettings(), prior=class_prior, seed=seed)
        except NoSelectionError as exc:     # e.g. every rung too small to fit on: no model, no test AUC
            return MethodResult(name, float("nan"), {}, 0, time.perf_counter() - start, class_prior,
                                no_selection=str(exc))
        return MethodResult(name, result.test_auc, result.config, result.rows_used + result.rows_final,
                            time.perf_counter() - start, class_prior)
    config, test_auc, rows = _risk_selection(split, name, class_prior, seed, max_configs)
    return MethodResult(name, test_auc, config, rows, time.perf_counter() - start, class_prior)
