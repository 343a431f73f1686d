"""Thresholdout as RFMS uses it (appendix A.4, after Dwork et al. and Gossmann et al.).

The train value is the model's error on the openbox in-bag rows it was fitted on, the
holdout value the size-weighted curator in-bag error.  Per answer draw
``eta ~ N(0, (4 sigma)^2)``; if ``|holdout - train| > T + gamma + eta`` answer
``holdout + xi`` with ``xi ~ N(0, sigma^2)`` and spend one unit of budget, otherwise answer
the train value.  ``gamma`` stays at its initial value (0 in the paper), as the authors
chose.  Budget use is counted; beyond the paper, an optional ``budget`` is enforced: once
spent, only train values are answered, so the holdout stops leaking.

The noise comes from ``seed`` (required: an int, SeedSequence or Generator; never OS
entropy), or, per answer, from the generator passed as ``rng``.  A restricted site runs
this mechanism itself and passes each query's own stream (derived from its seed and what
is asked, so answers do not depend on the order queries arrive in); it replays its
ledger's queries through :meth:`answer` after a restart, which brings back the budget use.
"""

from __future__ import annotations

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.errors import ConfigError
from raytune_fed.random import Seed, as_generator

MAX_BUDGET = 2 ** 63 - 1
"""The largest budget: a site's policy and ledger keep it as a 64-bit integer (TOML's), and no grid
asks that many queries, so a larger one would never bind (leave the budget out for none)."""


class Thresholdout:
    def __init__(self, *, threshold: float = 0.02, sigma: float = 0.03, gamma: float = 0.0,
                 budget: int | None = None, seed: Seed | None = None) -> None:
        check_float("Thresholdout threshold", threshold, 0.0)
        check_float("Thresholdout sigma", sigma, 0.0)
        check_float("Thresholdout gamma", gamma, 0.0)
        if budget is not None:
            check_int("Thresholdout budget", budget, 0, MAX_BUDGET)
        if seed is None:
            raise ConfigError("Thresholdout needs a seed (an int, SeedSequence or Generator); "
                              "None would draw from OS entropy")
        self.threshold, self.sigma, self.gamma, self.budget = threshold, sigma, gamma, budget
        self._rng = as_generator(seed, "Thresholdout seed")
        self.budget_used = 0
        self.n_withheld = 0

    def answer(self, train: float, holdout: float, *, rng: np.random.Generator | None = None) -> float:
        """The answer for a model with ``train`` and ``holdout`` values; noise from ``rng`` if given."""
        rng = self._rng if rng is None else rng
        eta = rng.normal(0.0, 4.0 * self.sigma)
        xi = rng.normal(0.0, self.sigma)
        if abs(holdout - train) > self.threshold + self.gamma + eta:
            if self.budget is not None and self.budget_used >= self.budget:
                self.n_withheld += 1
                return float(train)
            self.budget_used += 1
            return float(holdout + xi)
        return float(train)
