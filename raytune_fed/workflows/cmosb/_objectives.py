"""The three CMOSB objectives of one hyperparameter configuration (Algorithm 4 / SBO), its six
parameters and their search space (Table III).

``x = (n_f, n_l, d, r, theta_p, eta)`` -> utility loss (1 - AUC binary, 1 - accuracy
multi-class, on the test third), training cost eps_c (eq. 5: operation counts times
calibrated seconds per operation) and privacy leakage eps_p (the instance clustering
attack on the passive party's view, max over federated rounds).  All three are minimised.
A trial measures them (:mod:`raytune_fed.workflows.cmosb._trial`, which also holds
:func:`~raytune_fed.workflows.cmosb.evaluate`, the in-process measurement) as an :class:`Evaluation`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from raytune_fed.space import Float, Int, SearchSpace

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
