"""The :class:`Learner` type: a named search space, how a configuration becomes a pipeline, and
the record a fitted model travels as.

The registries (:mod:`raytune_fed.models._registry` for the RFMS learners,
:mod:`raytune_fed.models.pu._learners` for the PU learners) hold instances of it; this module
knows no learner by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.feature_selection import VarianceThreshold
from sklearn.pipeline import Pipeline

from raytune_fed.errors import ConfigError
from raytune_fed.models._records import ModelRecord, RecordCodec
from raytune_fed.space import SearchSpace

StepMaker = Callable[[Mapping[str, Any], "int | None"], list]


@dataclass(frozen=True)
class Learner:
    """A named learner: its search space, how a configuration becomes a pipeline, and
    what the rest of the package derives from it.

    ``record`` declares how a fitted model of this learner crosses a site boundary: the
    names, dtypes and shapes of its arrays, their size caps, the analyst-side encoder and
    the site's own predictor (:mod:`raytune_fed.models._records`); a learner without one
    can be tuned locally but never sent to a site.  ``relative_cost`` orders a grid's
    cells longest first; ``warm_up`` (optional) pays one-off per-process costs such as numba compilation
    before a grid's timings start.  ``task`` is ``"pn"`` for learners fitted on class
    labels (the RFMS learners, in :data:`~raytune_fed.models.LEARNERS`) and ``"pu"`` for learners fitted on
    positive/unlabelled indicators (``raytune_fed.models.pu.PU_LEARNERS``).
    """

    name: str
    space: SearchSpace
    make_steps: StepMaker = field(repr=False, compare=False)
    relative_cost: float = 1.0
    warm_up: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    task: str = "pn"
    record: RecordCodec | None = field(default=None, repr=False, compare=False)

    def encode(self, config: Mapping[str, Any], pipeline: Any) -> ModelRecord:
        """The :class:`ModelRecord` of ``pipeline`` fitted at ``config`` (what a site accepts; analyst side)."""
        self.space.validate(config)
        if self.record is None:
            raise ConfigError(f"learner {self.name!r} declares no model record, so its models cannot be sent to a "
                              f"site")
        config = {p: (int(config[p]) if isinstance(config[p], (int, np.integer)) else float(config[p]))
                  for p in self.space.names}
        return ModelRecord(self.name, config, self.record.encode(pipeline, config))

    def build(self, config: Mapping[str, Any], *, seed: int | None = None) -> Pipeline:
        """An unfitted pipeline for ``config`` (checked against :attr:`space`).

        ``seed`` sets the random state of randomised learners (the forest); the SVM and
        the elastic net are deterministic and ignore it.
        """
        self.space.validate(config)
        unknown = sorted(set(config) - set(self.space.names))
        if unknown:
            raise ConfigError(f"learner {self.name!r} has no parameters {unknown}; "
                              f"its parameters are {self.space.names}")
        return Pipeline([("drop_constant", VarianceThreshold(0.0)), *self.make_steps(config, seed)])
