"""RFMS settings and cells: frozen, keyed, with derived seeds (a grid is a list of these), and
what a cell's stored rows must satisfy (:func:`rows_problem`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from raytune_fed._checks import MAX_SEED, check_choice, check_int, check_share
from raytune_fed._limits import check_bounded, limits
from raytune_fed.algorithms.thresholdout import MAX_BUDGET
from raytune_fed.errors import ConfigError
from raytune_fed.grid import Cell, Demand
from raytune_fed.grid._rowchecks import identity_problem, number_problem, one_row_each
from raytune_fed.metrics import hypervolume
from raytune_fed.models import get_learner
from raytune_fed.random import derive
from raytune_fed.simulation import SPLIT_METHODS
from raytune_fed.workflows.rfms._methods import get_methods

REFERENCE_POINT = (1.0, 1.0, 1.0)
"""The hypervolume reference point of an experiment's (openbox, curator, lockbox) losses."""


@dataclass(frozen=True)
class RFMSSettings:
    """What every experiment of a grid shares (checked when built, before anything runs).

    ``thresholdout_budget`` and ``guard_k`` (the differencing guard's k, 0 = off) go into
    the policies of the sites the grid simulates; sites reached by URL keep their owners'.
    The guard is off by default for simulated sites: it remembers answers across cells, so
    with cells in parallel its refusals depend on timing (see the README), and on data whose
    models do not transfer between sites it refuses nearly every remote query.
    """

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
    guard_k: int = 0
    methods: tuple[str, ...] = ("lso", "fso2", "fso5", "fso8", "fso_th", "fmo", "rand_mo")

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ConfigError(f"dataset must be a non-empty name or path, got {self.dataset!r}")
        check_choice("split", self.split, SPLIT_METHODS)
        check_bounded("n_init", self.n_init, 1, "points")
        check_bounded("n_iter", self.n_iter, 0, "points")
        if self.n_init + self.n_iter > limits().max_points:
            raise ConfigError(f"n_init + n_iter must be at most {limits().max_points}, got {self.n_init} + "
                              f"{self.n_iter}: {limits().why('points')}")
        check_int("n_folds", self.n_folds, 2)  # and at most what every site's rows allow (plan_sites)
        check_int("seed", self.seed, 0, MAX_SEED)
        check_int("guard_k", self.guard_k, 0)
        if self.thresholdout_budget is not None:
            check_int("thresholdout_budget", self.thresholdout_budget, 0, MAX_BUDGET)
        check_share("inbag_fraction", self.inbag_fraction, 0.0, 1.0, low_open=True)
        if self.inbag_fraction >= 1.0:
            raise ConfigError(f"inbag_fraction must be in (0, 1), got {self.inbag_fraction!r}")
        check_share("pca_variance", self.pca_variance, 0.0, 1.0, low_open=True)
        get_methods(self.methods)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RFMSSettings:
        """Settings back from their stored form (``asdict``, lists for tuples)."""
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}
        return cls(**fields)


@dataclass(frozen=True)
class ExperimentSpec(Cell):
    """One RFMS cell: a role assignment, a replication and a learner, every method."""

    settings: RFMSSettings
    openbox: int
    lockbox: int
    curators: tuple[int, ...]
    replication: int
    learner: str
    site_names: tuple[str, ...] = field(default=())
    site_actors: bool = field(default=True, compare=False)  # the sites are Ray actors (not services)

    def config(self) -> dict:
        return {**asdict(self.settings), "openbox": self.openbox, "lockbox": self.lockbox,
                "curators": list(self.curators), "replication": self.replication, "learner": self.learner}

    @property
    def coordinates(self) -> tuple[int | str, ...]:
        return (self.openbox, self.lockbox, self.replication, self.learner)

    @property
    def root_seed(self) -> int:
        return self.settings.seed

    @property
    def cost(self) -> float:
        return get_learner(self.learner).relative_cost

    @property
    def label(self) -> str:
        return (f"{self.learner} openbox={self.site_name(self.openbox)} lockbox={self.site_name(self.lockbox)} "
                f"rep={self.replication}")

    @property
    def demand(self) -> Demand:
        """One CPU, on the openbox site's node when the cluster has one (its data stays there); it queries
        the lockbox and the curators, whose actors need their nodes."""
        return Demand(site=self.site_name(self.openbox),
                      needs=tuple(self.site_name(i) for i in (self.lockbox, *self.curators)) if self.site_actors
                      else ())

    @property
    def max_parallelism(self) -> int:
        """The folds of a cross-validation can run in parallel: up to ``n_folds`` cores in the grid's tail."""
        return self.settings.n_folds

    def check_rows(self, rows) -> str | None:
        """One row per method with this cell's coordinates and consistent, finite values (see
        :func:`rows_problem`); the ``settings`` column is this grid's."""
        problem = rows_problem(self, rows)
        if problem is None:
            settings = json.dumps(asdict(self.settings), sort_keys=True)
            if any(row.get("settings", settings) != settings for row in rows):
                return "its settings column is not this grid's settings"
        return problem

    def site_name(self, i: int) -> str:
        return self.site_names[i] if self.site_names else f"site{i}"

    def split_seed(self) -> np.random.SeedSequence:
        """Seeds of the in-bag splits: shared by all learners of the same role assignment and replication."""
        return derive(self.settings.seed, "split", self.openbox, self.lockbox, self.replication)

    def search_seed(self) -> np.random.SeedSequence:
        """The stream of the experiment's design, cross-validation folds, fits and methods."""
        return self.seed("search")


def rows_problem(spec: ExperimentSpec, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``rows`` (as stored) cannot be what :func:`~raytune_fed.workflows.rfms.run_experiment` gave for
    ``spec`` (None: they can).

    One row per method of the settings, in order; every row carries the cell's own
    coordinates; losses are None (withheld) or finite in [0, 1], one per selected model;
    the hypervolume is the one of the row's own losses; counts are non-negative integers.
    """
    s = spec.settings
    problem = one_row_each(rows, "method", s.methods)
    if problem:
        return problem
    identity = {"dataset": s.dataset, "split": s.split, "learner": spec.learner, "openbox": spec.openbox,
                "lockbox": spec.lockbox, "curators": list(spec.curators), "replication": spec.replication,
                "experiment": spec.key}
    for row in rows:
        problem = _row_problem(row, identity)
        if problem:
            return f"its {row.get('method')} row: {problem}"
    return None


def _row_problem(row: Mapping[str, Any], identity: Mapping[str, Any]) -> str | None:
    problem = identity_problem(row, identity)
    if problem:
        return problem
    for name in ("n_evaluations", "n_curator_queries", "n_refused_evaluations", "n_withheld_finals"):
        problem = number_problem(name, row.get(name), 0, float("inf"), integer=True)
        if problem:
            return problem
    n = row.get("n_selected")
    problem = number_problem("n_selected", n, 1, float("inf"), integer=True)
    if problem:
        return problem
    raw = row.get("selected")
    try:
        selected = json.loads(raw) if isinstance(raw, (str, bytes, bytearray)) else None
    except (TypeError, ValueError):
        selected = None
    if not isinstance(selected, list) or len(selected) != n:
        return f"its selected is not a JSON list of its {n} selected configurations"
    losses = {}
    for name in ("openbox_outbag", "curator_outbag", "lockbox_loss"):
        values = row.get(name)
        if not isinstance(values, list) or len(values) != n:
            return f"its {name} is not a list of {n} losses"
        for value in values:
            problem = number_problem(name, value, 0.0, 1.0, optional=name != "openbox_outbag")
            if problem:
                return problem
        losses[name] = values
    withheld = sum(c is None or lb is None for c, lb in zip(losses["curator_outbag"], losses["lockbox_loss"]))
    if row.get("n_withheld_finals") != withheld:
        return f"its n_withheld_finals is {row.get('n_withheld_finals')!r} where its losses withhold {withheld}"
    problem = number_problem("hypervolume", row.get("hypervolume"), 0.0, 1.0)
    if problem:
        return problem
    worst = REFERENCE_POINT[0]
    pts = np.array([[o, worst if c is None else c, worst if lb is None else lb]
                    for o, c, lb in zip(*losses.values())], dtype=float)
    if abs(hypervolume(pts, REFERENCE_POINT) - row["hypervolume"]) > 1e-9:
        return (f"its hypervolume {row['hypervolume']!r} is not the {hypervolume(pts, REFERENCE_POINT)!r} of its own "
                f"losses")
    return None
