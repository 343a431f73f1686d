"""Legacy (before restricted sites): roles that admit pickled pipelines; used by the RFMS grid until it moves.

Restricted roles a data site can play for one experiment: curator and lockbox.

Both hold their rows privately and answer only through records (``_records``):

* a **curator** answers one kind of query — the loss of a fitted model of an allowed
  learner type on its in-bag rows, as one float — keeps a ledger of every query and may
  enforce a query budget; once, at the end, it scores the final models on its out-bag
  rows, after which it takes no more queries;
* a **lockbox** answers exactly once, for the final models, on all its rows.

Whether a submitted object counts as "a fitted model of an allowed type" is decided by an
admission function (by default :func:`raytune_fed.models.check_allowed_model`).
"""

from __future__ import annotations

import hashlib
import pickle
import time
from typing import Any, Callable, Sequence

import numpy as np

from raytune_fed.metrics.scorers import misclassification
from raytune_fed.errors import BudgetExhaustedError, ConfigError, QueryRefusedError, SealedError
from raytune_fed.federation._data import site_data as _check_xy
from raytune_fed.federation._records import (
    MAX_MODELS_PER_FINAL, FinalLosses, Ledger, LedgerEntry, Loss, SiteStatus, check_outgoing)

Admit = Callable[..., None]


def _default_admit(model: Any, *, n_features: int) -> None:
    from raytune_fed.models import check_allowed_model

    check_allowed_model(model, n_features=n_features)


def fingerprint(model: Any) -> str:
    """A short content hash of a model (what the ledger records instead of the model)."""
    return hashlib.sha256(pickle.dumps(model, protocol=5)).hexdigest()[:16]


class _Role:
    role = "role"

    def __init__(self, name: str, n_features: int, admit: Admit | None) -> None:
        self.name = name
        self._n_features = n_features
        self._admit = admit or _default_admit
        self._ledger: list[LedgerEntry] = []
        self._sealed = False

    def _loss(self, model: Any, X: np.ndarray, y: np.ndarray) -> float:
        self._admit(model, n_features=self._n_features)
        try:
            pred = model.predict(X)
        except Exception as exc:  # a model that cannot predict here is refused, not a crash
            raise QueryRefusedError(f"site {self.name!r}: the submitted model failed to predict: {exc}") from exc
        return misclassification(y, np.asarray(pred))

    def _final(self, models: Sequence[Any], X: np.ndarray, y: np.ndarray) -> FinalLosses:
        if self._sealed:
            raise SealedError(f"{self.role} {self.name!r} has already given its final evaluation; it answers once")
        if isinstance(models, (str, bytes)) or not isinstance(models, Sequence) \
                or not 1 <= len(models) <= MAX_MODELS_PER_FINAL:
            raise QueryRefusedError(
                f"{self.role} {self.name!r}: final evaluation takes a list of 1..{MAX_MODELS_PER_FINAL} fitted models,"
                f" got {type(models).__name__}")
        values = tuple(self._loss(m, X, y) for m in models)  # admission of every model before sealing
        self._sealed = True
        now = time.time()
        self._ledger.extend(LedgerEntry(now, fingerprint(m), "final", v) for m, v in zip(models, values))
        return check_outgoing(FinalLosses(values, int(len(y))))

    def ledger(self) -> Ledger:
        return check_outgoing(Ledger(tuple(self._ledger)))


class Curator(_Role):
    """A site that answers "how good is this model on your in-bag data" and nothing else."""

    role = "curator"

    def __init__(self, X: Any, y: Any, *, name: str = "curator", inbag_fraction: float = 0.8, seed: Any = 0,
                 budget: int | None = None, admit: Admit | None = None) -> None:
        from raytune_fed.simulation import inbag_outbag

        X, y = _check_xy(name, X, y)
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ConfigError(f"curator {name!r}: budget must be a positive int or None, got {budget!r}")
        super().__init__(name, X.shape[1], admit)
        inbag, outbag = inbag_outbag(y, inbag_fraction=inbag_fraction, seed=seed)
        self._X_in, self._y_in = X[inbag], y[inbag]
        self._X_out, self._y_out = X[outbag], y[outbag]
        self._budget = budget
        self._n_queries = 0

    def query(self, model: Any) -> Loss:
        """Misclassification of ``model`` on the in-bag rows (one float), logged in the ledger."""
        start = time.perf_counter()
        if self._sealed:
            raise SealedError(f"curator {self.name!r}: selection is closed (final evaluation given); no more queries")
        if self._budget is not None and self._n_queries >= self._budget:
            raise BudgetExhaustedError(f"curator {self.name!r}: query budget of {self._budget} is spent")
        value = self._loss(model, self._X_in, self._y_in)
        self._n_queries += 1
        self._ledger.append(LedgerEntry(time.time(), fingerprint(model), "query", value))
        return check_outgoing(Loss(value, int(len(self._y_in)), time.perf_counter() - start))

    def final_evaluation(self, models: Sequence[Any]) -> FinalLosses:
        """Once: the losses of the final models on the out-bag rows; closes the selection."""
        return self._final(models, self._X_out, self._y_out)

    def status(self) -> SiteStatus:
        left = None if self._budget is None else self._budget - self._n_queries
        return check_outgoing(SiteStatus(self.name, self.role, "", int(len(self._y_in)), self._n_queries,
                                         2 ** 31 - 1 if left is None else left, self._sealed))


class Lockbox(_Role):
    """A site that is touched once, for the final models, on all its rows."""

    role = "lockbox"

    def __init__(self, X: Any, y: Any, *, name: str = "lockbox", admit: Admit | None = None) -> None:
        X, y = _check_xy(name, X, y)
        super().__init__(name, X.shape[1], admit)
        self._X, self._y = X, y

    def final_evaluation(self, models: Sequence[Any]) -> FinalLosses:
        """Once: the losses of the final models on every lockbox row."""
        return self._final(models, self._X, self._y)

    def status(self) -> SiteStatus:
        return check_outgoing(SiteStatus(self.name, self.role, "", int(len(self._y)), 0, 0, self._sealed))
