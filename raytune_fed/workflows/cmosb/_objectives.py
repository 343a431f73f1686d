"""The three CMOSB objectives of one hyperparameter configuration (Algorithm 4 / SBO).

``x = (n_f, n_l, d, r, theta_p, eta)`` -> utility loss (1 - AUC binary, 1 - accuracy
multi-class, on the test third), training cost eps_c (eq. 5: operation counts times
calibrated seconds per operation) and privacy leakage eps_p (the instance clustering
attack on the passive party's view, max over federated rounds).  All three are minimised.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from raytune_fed.attacks import N_SAMPLE
from raytune_fed.crypto import calibrate
from raytune_fed.models.secureboost import check_op_times
from raytune_fed.random import Seed
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
    """Train SecureBoost with ``config`` on ``task`` and measure the objectives, without Ray.

    The parties are objects in this process, set up as the CMOSB workflow's party actors
    (:func:`~raytune_fed.workflows.cmosb._trial.local_parties`), and the training and attack
    are a workflow trial's (:func:`~raytune_fed.workflows.cmosb._trial.run_trial`): a
    configuration gives the same objectives and operation counts here as in a
    ``run_cmosb`` run with the same ``seed`` (the passive party bins all its rows, the
    active party its training rows).  ``op_times`` None calibrates on this machine.
    """
    from raytune_fed.workflows.cmosb._trial import local_parties, run_trial

    times = check_op_times(op_times) or calibrate()
    parties = local_parties(task, he=he, op_times=times.as_dict(), seed=seed, n_sample=n_sample,
                            known_per_cluster=known_per_cluster)
    m = run_trial(dict(config), parties, f"evaluate-{uuid.uuid4().hex[:8]}")
    return Evaluation(float(m["utility_loss"]), float(m["training_cost"]), float(m["privacy_leakage"]),
                      m["encryptions"], m["decryptions"], m["additions"], m["products"], float(m["fit_seconds"]),
                      float(m["attack_seconds"]))
