"""Experiment specs: frozen, keyed, with derived seeds (a grid is a list of these)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from raytune_fed._checks import check_int, check_share
from raytune_fed.errors import ConfigError
from raytune_fed.store import config_key


@dataclass(frozen=True)
class RFMSSettings:
    """What every experiment of a grid shares."""

    dataset: str
    target: str | None = None
    site_column: str | None = None
    split: str = "natural"
    pca_variance: float = 0.1
    n_init: int = 20
    n_iter: int = 40
    n_folds: int = 10
    inbag_fraction: float = 0.8
    seed: int = 0
    thresholdout_budget: int | None = None
    methods: tuple[str, ...] = ("lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo")

    def __post_init__(self) -> None:
        check_int("n_init", self.n_init, 1)
        check_int("n_iter", self.n_iter, 0)
        check_int("n_folds", self.n_folds, 2)
        if not 0.0 < self.inbag_fraction < 1.0:
            raise ConfigError(f"inbag_fraction must be in (0, 1), got {self.inbag_fraction!r}")
        check_share("pca_variance", self.pca_variance, 0.0, 1.0, low_open=True)


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment unit: a role assignment, a replication and a learner, all methods."""

    settings: RFMSSettings
    openbox: int
    lockbox: int
    curators: tuple[int, ...]
    replication: int
    learner: str
    site_names: tuple[str, ...] = field(default=())

    def config(self) -> dict:
        return {**asdict(self.settings), "openbox": self.openbox, "lockbox": self.lockbox,
                "curators": list(self.curators), "replication": self.replication, "learner": self.learner}

    @property
    def key(self) -> str:
        return config_key(self.config())

    @property
    def session(self) -> str:
        return f"rfms-{self.key}"

    def split_seed(self) -> np.random.SeedSequence:
        """Seeds of the in-bag splits: shared by all learners of the same role assignment and replication."""
        return np.random.SeedSequence([self.settings.seed, 1, self.openbox, self.lockbox, self.replication])

    def search_seed(self) -> np.random.SeedSequence:
        learner_code = sum(ord(ch) * 31 ** i for i, ch in enumerate(self.learner)) % (2 ** 31)
        return np.random.SeedSequence([self.settings.seed, 2, self.openbox, self.lockbox, self.replication,
                                       learner_code])
