"""The active party: its feature columns, the labels and - per training - the only secret key.

:meth:`ActiveParty.train` fits a :class:`SecureBoostClassifier` on the party's training
ids with the given passive parties (clients of in-process objects or of actors; the key
pair is made inside this party, so the secret key never leaves it), then scores the model
on its test ids: 1 - AUC for two classes, 1 - accuracy otherwise.  The answer is a
:class:`TrainingReport`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.federation.parties._client import PassiveClient
from raytune_fed.federation.parties._records import OpTally, PartyInfo, TrainingReport, check_party_answer
from raytune_fed.metrics import auc, misclassification
from raytune_fed.models.secureboost import SecureBoostClassifier

_FIXED = ("passive_features",)


def _ids(name: str, rows: Any, n_rows: int) -> np.ndarray:
    r = np.asarray(rows)
    if r.ndim != 1 or r.size == 0 or not np.issubdtype(r.dtype, np.integer) or np.any(np.diff(r) <= 0) \
            or r.min() < 0 or r.max() >= n_rows:
        raise ConfigError(f"{name} must be sorted distinct row ids in [0, {n_rows}), got {r.size} ids")
    return r.astype(np.int64)


class ActiveParty:
    """Active party over ``features`` and ``labels`` (one row per aligned instance id)."""

    def __init__(self, features: Any, labels: Any, *, train_rows: Any, test_rows: Any, name: str = "active") -> None:
        X = np.asarray(features, dtype=np.float64)
        y = np.asarray(labels)
        if X.ndim != 2 or X.shape[1] < 1 or y.shape != (X.shape[0],) or not np.all(np.isfinite(X)):
            raise ConfigError(f"party {name!r}: need finite features (n, d>=1) and n labels, "
                              f"got {X.shape} and {y.shape}")
        self.name, self._X, self._y = name, X, y
        self._train = _ids("train_rows", train_rows, X.shape[0])
        self._test = _ids("test_rows", test_rows, X.shape[0])
        if np.intersect1d(self._train, self._test).size:
            raise ConfigError(f"party {name!r}: train_rows and test_rows overlap")
        self._models: dict[str, SecureBoostClassifier | None] = {}  # None: closed

    def info(self) -> PartyInfo:
        return check_party_answer(PartyInfo(self.name, int(self._X.shape[0]), int(self._X.shape[1])))

    def train(self, session: str, params: Mapping[str, Any], passive: Sequence[PassiveClient]) -> TrainingReport:
        """Train with ``params`` (SecureBoostClassifier parameters) and the passive parties' clients."""
        if session in self._models:
            raise QueryRefusedError(f"party {self.name!r}: session {session!r} was trained before")
        known = set(SecureBoostClassifier().get_params()) - set(_FIXED)
        unknown = sorted(set(params) - known)
        if unknown:
            raise ConfigError(f"unknown SecureBoost parameters {unknown}; known: {sorted(known)}")
        clients = list(passive)
        if not clients:
            raise ConfigError("train needs at least one passive party")
        for c in clients:
            info = c.info()
            if info.n_rows != self._X.shape[0]:
                raise ConfigError(f"parties hold different rows: active {self.name!r} has {self._X.shape[0]}, "
                                  f"passive {info.party!r} has {info.n_rows}")
        model = SecureBoostClassifier(**dict(params))
        model.fit(self._X[self._train], self._y[self._train], passive=clients, rows=self._train)
        self._models[session] = model
        y_test = self._y[self._test]
        proba = model.predict_proba(self._X[self._test], rows=self._test)
        if model.classes_.size == 2:
            loss, metric = 1.0 - auc(y_test == model.classes_[1], proba[:, 1], positive=True), "1-auc"
        else:
            loss, metric = misclassification(y_test, model.classes_[np.argmax(proba, axis=1)]), "1-accuracy"
        return check_party_answer(TrainingReport(
            utility_loss=loss, metric=metric, op_counts=OpTally(**model.op_counts_),
            training_cost=model.training_cost_, fit_seconds=model.fit_seconds_, n_trees=len(model.trees_),
            n_federated_trees=len(model.federated_tree_indices())))

    def close_session(self, session: str) -> PartyInfo:
        """Forget the model of ``session`` (its id stays used)."""
        if self._models.pop(session, None) is None:
            raise QueryRefusedError(f"party {self.name!r}: session {session!r} is not open")
        self._models[session] = None
        return self.info()
