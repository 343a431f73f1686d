"""The "supervised" baseline: LightGBM treating unlabelled rows as negatives, tuned by TPE.

The paper tuned LightGBM with hyperopt's TPE; this uses Optuna's TPE sampler (the same
algorithm family, already a dependency).  Each of ``n_trials`` configurations is trained
on ``(X, s)`` and scored by the binary log-loss of ``s`` on the validation rows (the PU
validation split when ``fit`` gets ``X_val, s_val``, otherwise a stratified
``validation_fraction`` of the rows).  hyperopt-sklearn's default criterion is accuracy;
log-loss is used because with few labelled rows accuracy is flat (predicting "unlabelled"
everywhere is nearly always best) and gives TPE nothing to follow.  The best
configuration is refitted on the training rows.  ``lightgbm`` and ``optuna`` are imported
inside ``fit``.

Space (log scale where marked): ``num_leaves`` 4-64 (log), ``learning_rate`` 0.01-0.3
(log), ``n_estimators`` 50-400, ``min_child_samples`` 2-50, ``subsample`` 0.5-1,
``colsample_bytree`` 0.5-1, ``reg_lambda`` 1e-3-10 (log).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import validate_data

from raytune_fed._checks import check_int
from raytune_fed.errors import ConfigError
from raytune_fed.metrics.scorers import log_loss
from raytune_fed.models.pu._base import PUClassifier, check_pu_labels


def _suggest(trial: Any) -> dict[str, Any]:
    return {
        "num_leaves": trial.suggest_int("num_leaves", 4, 64, log=True),
        "learning_rate": trial.suggest_float("learning_rate", 0.01, 0.3, log=True),
        "n_estimators": trial.suggest_int("n_estimators", 50, 400),
        "min_child_samples": trial.suggest_int("min_child_samples", 2, 50),
        "subsample": trial.suggest_float("subsample", 0.5, 1.0),
        "colsample_bytree": trial.suggest_float("colsample_bytree", 0.5, 1.0),
        "reg_lambda": trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
    }


class SupervisedPU(PUClassifier):
    """LightGBM on ``s`` (unlabelled = negative), tuned by Optuna's TPE on validation log-loss.

    Learned: ``model_`` (the refitted ``LGBMClassifier``), ``best_params_``, ``best_loss_``.
    """

    def __init__(self, n_trials: int = 30, validation_fraction: float = 0.25, random_state: int = 0) -> None:
        self.n_trials = n_trials
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def _model(self, params: dict[str, Any]) -> Any:
        from lightgbm import LGBMClassifier

        return LGBMClassifier(**params, subsample_freq=1, n_jobs=1, verbose=-1, random_state=self.random_state)

    def fit(self, X: Any, s: Any, X_val: Any = None, s_val: Any = None) -> SupervisedPU:
        import optuna

        check_int("n_trials", self.n_trials, 1)
        X, s = self._validate_fit(X, s)
        if (X_val is None) != (s_val is None):
            raise ConfigError("give both X_val and s_val, or neither")
        if X_val is None:
            X, s, X_val, s_val = self._carve(X, s)
        else:
            X_val = validate_data(self, X_val, dtype=np.float64, reset=False)
            s_val = check_pu_labels(s_val)
        if X_val.shape[0] != s_val.shape[0]:
            raise ConfigError(f"X_val has {X_val.shape[0]} rows but s_val {s_val.shape[0]}")

        def objective(trial: Any) -> float:
            model = self._model(_suggest(trial)).fit(X, s)
            return log_loss(s_val, model.predict_proba(X_val)[:, 1])

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(direction="minimize",
                                    sampler=optuna.samplers.TPESampler(seed=int(self.random_state)))
        study.optimize(objective, n_trials=int(self.n_trials))
        self.best_params_ = dict(study.best_params)
        self.best_loss_ = float(study.best_value)
        self.model_ = self._model(self.best_params_).fit(X, s)
        return self

    def _carve(self, X: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, ...]:
        frac = self.validation_fraction
        if isinstance(frac, bool) or not isinstance(frac, (int, float, np.number)) or not 0.0 < frac < 1.0:
            raise ConfigError(f"validation_fraction must be in (0, 1), got {frac!r}")
        rng = np.random.default_rng(self.random_state)
        val = []
        for value in (0, 1):
            rows = rng.permutation(np.flatnonzero(s == value))
            if rows.size < 2:
                raise ConfigError(f"SupervisedPU needs >= 2 rows with s={value} to carve a validation part, "
                                  f"got {rows.size}")
            val.append(rows[:min(max(1, int(round(frac * rows.size))), rows.size - 1)])
        mask = np.zeros(s.size, dtype=bool)
        mask[np.concatenate(val)] = True
        return X[~mask], s[~mask], X[mask], s[mask]

    def decision_function(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self.model_.predict(X, raw_score=True)

    def predict_proba(self, X: Any) -> np.ndarray:
        X = self._validate_predict(X)
        return self.model_.predict_proba(X)
