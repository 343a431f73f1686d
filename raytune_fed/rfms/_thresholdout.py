"""Thresholdout as RFMS uses it (appendix A.4, after Dwork et al. and Gossmann et al.).

The train value is the model's error on the openbox in-bag rows it was fitted on, the
holdout value the size-weighted curator in-bag error.  Per answer draw
``eta ~ N(0, (4 sigma)^2)``; if ``|holdout - train| > T + gamma + eta`` answer
``holdout + xi`` with ``xi ~ N(0, sigma^2)`` and spend one unit of budget, otherwise answer
the train value.  ``gamma`` stays at its initial value (0 in the paper), as the authors
chose.  Budget use is counted; beyond the paper, an optional ``budget`` is enforced: once
spent, only train values are answered, so the holdout stops leaking.
"""

from __future__ import annotations

import numpy as np

from raytune_fed.errors import ConfigError


class Thresholdout:
    def __init__(self, *, threshold: float = 0.02, sigma: float = 0.03, gamma: float = 0.0,
                 budget: int | None = None, seed: int | np.random.SeedSequence | None = None) -> None:
        if not threshold >= 0:
            raise ConfigError(f"Thresholdout threshold must be >= 0, got {threshold!r}")
        if not sigma >= 0:
            raise ConfigError(f"Thresholdout sigma must be >= 0, got {sigma!r}")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
            raise ConfigError(f"Thresholdout budget must be an int >= 0 or None, got {budget!r}")
        self.threshold, self.sigma, self.gamma, self.budget = threshold, sigma, gamma, budget
        self._rng = np.random.default_rng(seed)
        self.budget_used = 0
        self.n_withheld = 0

    def answer(self, train: float, holdout: float) -> float:
        eta = self._rng.normal(0.0, 4.0 * self.sigma)
        xi = self._rng.normal(0.0, self.sigma)
        if abs(holdout - train) > self.threshold + self.gamma + eta:
            if self.budget is not None and self.budget_used >= self.budget:
                self.n_withheld += 1
                return float(train)
            self.budget_used += 1
            return float(holdout + xi)
        return float(train)
