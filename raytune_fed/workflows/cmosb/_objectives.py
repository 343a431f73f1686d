"""The three CMOSB objectives of one hyperparameter configuration (Algorithm 4 / SBO).

``x = (n_f, n_l, d, r, theta_p, eta)`` -> utility loss (1 - AUC binary, 1 - accuracy
multi-class, on the test third), training cost eps_c (eq. 5: operation counts times
calibrated seconds per operation) and privacy leakage eps_p (the instance clustering
attack on the passive party's view, max over federated rounds).  All three are minimised.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from raytune_fed.attacks import N_SAMPLE, privacy_leakage
from raytune_fed.metrics import auc, misclassification
from raytune_fed.models.secureboost import SecureBoostClassifier
from raytune_fed.random import Seed, derive, seed_int
from raytune_fed.space import Float, Int, SearchSpace
from raytune_fed.workflows.cmosb._tasks import VerticalTask

OBJECTIVES = ("utility_loss", "training_cost", "privacy_leakage")
PARAMETERS = ("n_federated_trees", "n_local_trees", "max_depth", "subsample", "purity_threshold", "learning_rate")


def search_space(binary: bool) -> SearchSpace:
    """Table III's ranges (n_l from 0, so no local tree is possible; theta_p in [0.7, 1] for binary tasks)."""
    return SearchSpace((
        Int("n_federated_trees", 1, 16), Int("n_local_trees", 0, 16), Int("max_depth", 1, 8),
        Float("subsample", 0.1, 1.0), Float("purity_threshold", 0.7 if binary else 0.1, 1.0),
        Float("learning_rate", 0.01, 0.3)))


@dataclass(frozen=True)
class Evaluation:
    """Objectives plus what was measured on the way (operation counts, seconds)."""

    utility_loss: float
    training_cost: float
    privacy_leakage: float
    encryptions: int
    decryptions: int
    additions: int
    products: int
    fit_seconds: float
    attack_seconds: float

    def objectives(self) -> tuple[float, float, float]:
        return self.utility_loss, self.training_cost, self.privacy_leakage

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(task: VerticalTask, config: Mapping[str, Any], *, he: str = "plain", op_times: Any = None,
             seed: Seed = 0, n_sample: int = N_SAMPLE, known_per_cluster: int = 1) -> Evaluation:
    """Train SecureBoost with ``config`` on ``task`` (parties in-process) and measure the objectives."""
    params = {k: config[k] for k in PARAMETERS}
    model = SecureBoostClassifier(**params, passive_features=list(task.passive_features), he=he,
                                  op_times=op_times, random_state=seed_int(derive(seed, "model")))
    train, test = task.train_rows, task.test_rows
    model.fit(task.X[train], task.y[train])
    proba = model.predict_proba(task.X[test])
    y_test = task.y[test]
    if task.binary:
        utility = 1.0 - auc(y_test == model.classes_[1], proba[:, 1], positive=True)
    else:
        utility = misclassification(y_test, model.classes_[np.argmax(proba, axis=1)])
    start = time.perf_counter()
    leakage = max(privacy_leakage(v, task.y[train], n_outputs=model.n_outputs_, n_sample=n_sample,
                                  known_per_cluster=known_per_cluster, seed=derive(seed, "attack")).value
                  for v in model.passive_views_)
    counts = model.op_counts_
    return Evaluation(float(utility), float(model.training_cost_), float(leakage), counts["encryptions"],
                      counts["decryptions"], counts["additions"], counts["products"], float(model.fit_seconds_),
                      time.perf_counter() - start)
