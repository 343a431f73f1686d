"""What a grid is made of: cells (frozen specs with a key and a seed), their demands and outcomes."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.errors import ConfigError
from raytune_fed.random import derive
from raytune_fed.store import config_key

MAX_CELLS = 100_000
"""Largest grid :func:`run_cells` accepts (the paper's largest RFMS grid has 600 cells)."""


class Cell(abc.ABC):
    """Base of a grid's cells; a workflow subclasses it with a frozen dataclass.

    A subclass provides

    * ``config()`` - the JSON-safe content that determines the cell's rows (settings shared
      by the grid plus the cell's coordinates); its hash is the cell's :attr:`key`;
    * ``coordinates`` - where the cell sits in the grid (ints and strings), from which
      :meth:`seed` derives the cell's random stream;
    * ``root_seed`` - the grid's one seed;

    and may override :attr:`cost` (relative run time: longer cells start first),
    :attr:`label` (how progress lines name it), :attr:`demand` (what it needs on Ray),
    :attr:`max_parallelism` (how many cores it can use when the grid's tail lends it more;
    it reads its grant with :func:`raytune_fed.cores.available_cores`) and
    :meth:`check_rows` (what its rows must satisfy).
    """

    @abc.abstractmethod
    def config(self) -> dict[str, Any]:
        """The JSON-safe content that determines the cell's rows."""

    @property
    @abc.abstractmethod
    def coordinates(self) -> tuple[int | str, ...]:
        """Where the cell sits in the grid."""

    @property
    @abc.abstractmethod
    def root_seed(self) -> int:
        """The grid's one seed."""

    @cached_property
    def key(self) -> str:
        """Content hash of :meth:`config`: the cell's file name in the store."""
        return config_key(self.config())

    def seed(self, *stream: int | str) -> np.random.SeedSequence:
        """The cell's random stream (``stream`` names a sub-stream), from its coordinates alone."""
        return derive(self.root_seed, *self.coordinates, *stream)

    @property
    def cost(self) -> float:
        return 1.0

    @property
    def label(self) -> str:
        return " ".join(map(str, self.coordinates))

    @property
    def demand(self) -> Demand:
        return Demand()

    @property
    def max_parallelism(self) -> int:
        return 1

    def check_rows(self, rows: Sequence[Mapping[str, Any]]) -> str | None:
        """Why ``rows`` cannot be this cell's result (None: they can).

        The grid calls it on every stored record before trusting it and on every new
        result before storing it, so a record whose rows were dropped, duplicated or edited
        consistently (checksum recomputed) is reported as damaged instead of published.
        A workflow checks what its rows must satisfy: one row per method, the cell's own
        coordinates, finite values in range, values that follow from each other.
        """
        return None


@dataclass(frozen=True)
class Demand:
    """What one cell needs from a Ray cluster.

    ``num_cpus`` CPUs and the custom ``resources`` (hard requirements); ``site`` names a
    data site whose node the cell should run on: it is pinned to nodes declaring
    ``site:<site>`` when the cluster has one, and runs anywhere when none does.
    ``needs`` names the sites whose actors the cell queries: when the cluster declares
    their ``site:<name>`` resources, the cell starts only while a live node declares each
    (else it waits, at most the placement timeout, for the node to come back).
    """

    num_cpus: float = 1.0
    resources: Mapping[str, float] = field(default_factory=dict)
    site: str | None = None
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_float("num_cpus", self.num_cpus, 0.0)
        for name, amount in self.resources.items():
            if not isinstance(name, str) or not name:
                raise ConfigError(f"resource names must be non-empty strings, got {name!r}")
            if check_float(f"resource {name!r}", amount, 0.0) <= 0.0:
                raise ConfigError(f"resource {name!r} must be a positive amount, got {amount!r}")
        if not isinstance(self.needs, tuple) or not all(isinstance(n, str) and n for n in self.needs):
            raise ConfigError(f"needs must be a tuple of site names, got {self.needs!r}")


@dataclass(frozen=True)
class CellResult:
    """What running a cell gives: ``rows`` (compared on resume) and per-row ``timing`` (never compared)."""

    rows: Sequence[Mapping[str, Any]]
    timing: Sequence[Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class CellError:
    """Why a cell has no result: it ``failed`` (raised, or its worker died more often than the
    retries allow) or it is ``unplaced`` (no node of the cluster can host it)."""

    kind: Literal["failed", "unplaced"]
    error_type: str
    message: str

    def __str__(self) -> str:
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        return f"{self.error_type}: {first}" if first else self.error_type


@dataclass(frozen=True)
class Usage:
    """What one cell used: wall-clock ``start``/``end`` (``time.time()``), the CPU seconds of its
    process (all threads), the most cores it was granted and the core-seconds granted."""

    start: float
    end: float
    cpu_seconds: float
    cores: int = 1
    core_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.core_seconds is None:
            object.__setattr__(self, "core_seconds", max(self.end - self.start, 0.0))


@dataclass(frozen=True)
class Outcome:
    """One cell's end as an executor reports it: a result or an error, its wall time and what it used."""

    cell: Cell
    result: CellResult | None
    error: CellError | None
    seconds: float
    usage: Usage | None = None


def as_result(value: Any) -> CellResult:
    """A :class:`CellResult` from what ``run_cell`` returned (a result, or a list of row dicts)."""
    if isinstance(value, CellResult):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(r, Mapping) for r in value):
        return CellResult(list(value))
    raise TypeError(f"run_cell must return a CellResult or a list of row dicts, got {type(value).__name__}")


def check_grid_size(n_cells: int, what: str = "") -> int:
    """Refuse a grid of more than :data:`MAX_CELLS` cells before it is built (``what`` says why so many)."""
    if n_cells > MAX_CELLS:
        why = f" ({what})" if what else ""
        raise ConfigError(f"the grid would have {n_cells:,} cells{why}; at most {MAX_CELLS:,} cells are allowed "
                          f"in one grid, so split it into several runs")
    return check_int("number of cells", n_cells, 0)
