"""The PU learners of the ODE paper's Table 3 as registry entries, and their grids.

Table 3 gives finite grids, so every parameter is a :class:`~raytune_fed.space.Categorical`
over the exact values searched:

* ``upu``: ``lambda = 10^t`` for 50 values of ``t`` evenly spaced on [-5, 5]; ``basis`` in
  {``"lm"``, ``"gauss"``} - 100 configurations;
* ``nnpu``: ``gamma`` 50 values evenly spaced on [0, 1]; ``beta`` 10 values evenly spaced
  on [0, 1] - 500 configurations.

Each builds ``drop constant features -> standardise -> model`` with the prior left at its
default: set it with ``pipeline.set_params(model__prior=pi)`` (the prior is an estimate
made once per training split, not a hyperparameter).  :func:`grid_configs` enumerates a
learner's grid in a fixed order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.preprocessing import StandardScaler

from raytune_fed.errors import ConfigError
from raytune_fed.models._learner import Learner
from raytune_fed.models.pu._nnpu import NNPU
from raytune_fed.models.pu._upu import UPU
from raytune_fed.space import Categorical, SearchSpace

UPU_LAMBDAS = tuple(float(10.0 ** t) for t in np.linspace(-5.0, 5.0, 50))
NNPU_GAMMAS = tuple(float(g) for g in np.linspace(0.0, 1.0, 50))
NNPU_BETAS = tuple(float(b) for b in np.linspace(0.0, 1.0, 10))


def _upu_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("standardize", StandardScaler()),
            ("model", UPU(lam=float(config["lambda"]), basis=str(config["basis"]),
                          random_state=0 if seed is None else seed))]


def _nnpu_steps(config: Mapping[str, Any], seed: int | None) -> list:
    return [("standardize", StandardScaler()),
            ("model", NNPU(gamma=float(config["gamma"]), beta=float(config["beta"]),
                           random_state=0 if seed is None else seed))]


PU_LEARNERS: Mapping[str, Learner] = {
    learner.name: learner for learner in (
        Learner("upu", SearchSpace((Categorical("lambda", UPU_LAMBDAS), Categorical("basis", ("lm", "gauss")))),
                _upu_steps, relative_cost=1.0, task="pu"),
        Learner("nnpu", SearchSpace((Categorical("gamma", NNPU_GAMMAS), Categorical("beta", NNPU_BETAS))),
                _nnpu_steps, relative_cost=20.0, task="pu"),
    )
}


def grid_configs(learner: Learner) -> list[dict[str, Any]]:
    """Every configuration of a learner whose parameters are all categorical, in a fixed order."""
    categoricals = [p for p in learner.space.params if isinstance(p, Categorical)]
    if len(categoricals) != len(learner.space.params):
        raise ConfigError(f"learner {learner.name!r} has non-categorical parameters; it has no finite grid")
    names = learner.space.names
    return [dict(zip(names, values)) for values in itertools.product(*(p.choices for p in categoricals))]
