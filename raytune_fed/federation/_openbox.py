"""The analyst's own site: full access, local training and cross-validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raytune_fed.federation._data import site_data
from raytune_fed.metrics.scorers import misclassification


class OpenBox:
    """The openbox site: trains and cross-validates on its in-bag rows only.

    The out-bag rows are held back for the post-hoc evaluation of the selected models
    (RFMS eq. 1); the analyst never tunes on them.  Cross-validation keeps one
    :class:`~raytune_fed.models.CVPlan` per ``(n_folds, seed)``, so the folds and each
    fold's preprocessing are computed once, not once per evaluated configuration (the
    errors are the same as without it).
    """

    role = "openbox"

    def __init__(self, X: Any, y: Any, *, name: str = "openbox", inbag_fraction: float = 0.8,
                 seed: Any = 0) -> None:
        from raytune_fed.simulation import inbag_outbag

        X, y = site_data(name, X, y)
        self.name = name
        inbag, outbag = inbag_outbag(y, inbag_fraction=inbag_fraction, seed=seed)
        self._X_in, self._y_in = X[inbag], y[inbag]
        self._X_out, self._y_out = X[outbag], y[outbag]
        self._plans: dict[tuple[int, int], Any] = {}

    @property
    def n_inbag(self) -> int:
        return int(len(self._y_in))

    @property
    def n_features(self) -> int:
        return int(self._X_in.shape[1])

    def cv_error(self, learner: Any, config: Mapping[str, Any], *, n_folds: int = 10, seed: int = 0) -> float:
        """``n_folds``-fold CV misclassification of ``learner`` at ``config`` on the in-bag rows."""
        from raytune_fed.models import CVPlan, cross_validated_error

        plan = self._plans.get((n_folds, seed))
        if plan is None:
            plan = self._plans[n_folds, seed] = CVPlan(self._X_in, self._y_in, n_folds=n_folds, seed=seed)
        return float(cross_validated_error(learner, config, self._X_in, self._y_in, n_folds=n_folds, seed=seed,
                                           cache=plan))

    def fit(self, learner: Any, config: Mapping[str, Any], *, seed: int = 0) -> Any:
        """The model ``learner`` at ``config`` fitted on all in-bag rows."""
        return learner.build(config, seed=seed).fit(self._X_in, self._y_in)

    def inbag_error(self, model: Any) -> float:
        """Resubstitution error on the in-bag rows the model was fitted on (Thresholdout's train value)."""
        return misclassification(self._y_in, model.predict(self._X_in))

    def outbag_error(self, model: Any) -> float:
        """Error on the held-back out-bag rows (post-hoc evaluation only)."""
        return misclassification(self._y_out, model.predict(self._X_out))
