"""Fitted models as declared numeric records, and the site's own predictors built from them.

A model crosses a site boundary as a :class:`ModelRecord`: the learner's name, its
hyperparameters and its fitted parameters as plain numeric arrays whose names, dtypes
and shapes the learner declares (:class:`ArraySpec`).  The analyst's side encodes a
fitted pipeline (``Learner.encode``); the site checks every field against the
declaration and rebuilds a predictor with its own code (:func:`check_record`).  No
object of the analyst's ever runs on a site: the site computes predictions itself, in
vectorised numpy, from arrays it has validated.

What each learner sends is declared by its codec (:mod:`raytune_fed.models._codecs`).
This module knows arrays, not learners: the registry (:mod:`raytune_fed.models._registry`)
finds a record's learner by name and offers :func:`~raytune_fed.models.encode_model` and
:func:`~raytune_fed.models.rebuild_model`.

Site-side checks (a failure raises :class:`RecordError`, before anything is computed):
the learner exists, the hyperparameters lie in its search space, the array names are
exactly the declared ones, each array has its declared dtype and rank, shared dimensions
agree, the column count is the site's, every float is finite, sizes are under the
learner's caps, scales are positive, tree children point forward inside their tree with
exactly one parent per node (so a tree is acyclic and connected), feature indices are
below ``k``, and the prediction's cost (elementary steps for the site's row count) is
under the learner's cap.  Predictions are class *positions* 0/1 into the site's own
sorted label set, so a model cannot choose the values the loss compares with.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.space import SearchSpace

#: dtypes a record may use (little-endian, fixed width)
DTYPES: dict[str, np.dtype] = {"f8": np.dtype("<f8"), "i8": np.dtype("<i8"), "i4": np.dtype("<i4")}
Deadline = Callable[[], None]


class RecordError(QueryRefusedError):
    """A model record does not match its learner's declaration (the message says which rule)."""


@dataclass(frozen=True)
class ArraySpec:
    """One declared array: its name, dtype code (``DTYPES``) and shape in named dimensions.

    A dimension is an int (fixed) or a symbol: ``p`` is the site's column count, any other
    symbol is bound by the first array that uses it and must agree everywhere else.
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...]


@dataclass(frozen=True)
class ModelRecord:
    """A fitted model as data: learner name, hyperparameters, named numeric arrays."""

    learner: str
    config: Mapping[str, float | int]
    arrays: Mapping[str, np.ndarray] = field(repr=False)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))


class RecordCodec(ABC):
    """How one learner's fitted pipeline becomes arrays, and how a site predicts from them.

    Subclasses declare :attr:`specs` and :attr:`caps` (maximum sizes per symbol, and
    ``cost``, the most elementary steps one prediction may take), and implement
    :meth:`encode` (analyst side), :meth:`check` (site side, structure beyond
    dtypes/shapes), :meth:`cost` and :meth:`predict` (site side).
    """

    specs: tuple[ArraySpec, ...] = ()
    caps: Mapping[str, int] = {}

    @abstractmethod
    def encode(self, pipeline: Any, config: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Implemented by each concrete subclass."""

    def check(self, arrays: Mapping[str, np.ndarray], config: Mapping[str, Any], dims: Mapping[str, int], *,
              deadline: Deadline = lambda: None) -> None:
        """Structural rules beyond dtype and shape; raise :class:`RecordError`.  A check that walks a
        structure stops at the cap it enforces and calls ``deadline()`` between its steps."""

    @abstractmethod
    def cost(self, arrays: Mapping[str, np.ndarray], dims: Mapping[str, int], n_rows: int) -> float:
        """Implemented by each concrete subclass."""

    @abstractmethod
    def predict(self, arrays: Mapping[str, np.ndarray], config: Mapping[str, Any], X: np.ndarray,
                deadline: Deadline) -> np.ndarray:
        """Class positions (0/1, int8) for the rows of ``X``; calls ``deadline()`` between chunks."""


# ---------------------------------------------------------------------------------------
# Validation and rebuild (site side)


def _plain_number(name: str, value: Any) -> float | int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise RecordError(f"record hyperparameter {name!r} must be a number")
    if not math.isfinite(float(value)):
        raise RecordError(f"record hyperparameter {name!r} must be finite")
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def _bind_shape(spec: ArraySpec, array: Any, dims: dict[str, int]) -> None:
    if type(array) is not np.ndarray or array.dtype != DTYPES[spec.dtype] or array.ndim != len(spec.shape):
        raise RecordError(f"record array {spec.name!r} must be a {len(spec.shape)}-d {spec.dtype} array")
    for size, want in zip(array.shape, spec.shape):
        if isinstance(want, int):
            if size != want:
                raise RecordError(f"record array {spec.name!r} must have shape {spec.shape}")
        elif dims.setdefault(want, size) != size:
            raise RecordError(f"record array {spec.name!r}: dimension {want!r} disagrees with other arrays")


def _check_finite(spec: ArraySpec, array: np.ndarray) -> None:
    if spec.dtype == "f8" and not np.isfinite(array).all():
        raise RecordError(f"record array {spec.name!r} must hold finite numbers only")


@dataclass(frozen=True)
class SiteModel:
    """A validated model record the site predicts with (its own code, read-only arrays)."""

    learner: str
    config: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray] = field(repr=False)
    codec: RecordCodec = field(repr=False)
    n_features: int

    def predict(self, X: np.ndarray, *, seconds: float | None = None, deadline: Deadline | None = None
                ) -> np.ndarray:
        """Class positions 0/1 (int8) for the site's rows; raises :class:`TimeoutError` past
        ``seconds`` of wall time or when ``deadline()`` (called between chunks) raises it."""
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ConfigError(f"X must have {self.n_features} columns, got shape {X.shape}")
        stop = math.inf if seconds is None else time.monotonic() + seconds
        given = deadline

        def check_time() -> None:
            if time.monotonic() > stop:
                raise TimeoutError("scoring exceeded the site's time limit")
            if given is not None:
                given()

        return self.codec.predict(self.arrays, self.config, X, check_time)


def _no_deadline() -> None:
    return None


def check_record(record: ModelRecord, space: SearchSpace, codec: RecordCodec, n_features: int, *, n_rows: int,
                 deadline: Deadline | None = None) -> SiteModel:
    """Validate ``record`` against its learner's declaration (its search space and record
    codec) for a site with ``n_features``
    columns and ``n_rows`` rows to score; raise :class:`RecordError` naming the first rule broken.

    ``deadline()`` is called between the validation's steps (each bounded by the caps it
    enforces) and may raise :class:`TimeoutError` to stop it.  Which learner the record
    names is the registry's business (:func:`~raytune_fed.models.rebuild_model`).
    """
    deadline = deadline or _no_deadline
    if type(record) is not ModelRecord:
        raise RecordError("a model must be sent as a ModelRecord")
    if not isinstance(record.config, Mapping) or set(record.config) != set(space.names):
        raise RecordError(f"record hyperparameters must be exactly {space.names}")
    config = {k: _plain_number(k, v) for k, v in record.config.items()}
    try:
        space.validate(config)
    except ConfigError:
        raise RecordError(f"record hyperparameters lie outside the {record.learner} search space") from None
    if not isinstance(record.arrays, Mapping) or set(record.arrays) != {s.name for s in codec.specs}:
        raise RecordError(f"record arrays must be exactly {[s.name for s in codec.specs]}")
    dims: dict[str, int] = {"p": int(n_features)}
    arrays = {}
    for spec in codec.specs:  # shapes first: no value is read before every size is known to be under its cap
        _bind_shape(spec, record.arrays[spec.name], dims)
        arrays[spec.name] = record.arrays[spec.name]
    for sym, size in dims.items():
        if sym in codec.caps and size > codec.caps[sym]:
            raise RecordError(f"record dimension {sym!r}={size} exceeds the learner's cap {codec.caps[sym]}")
    for spec in codec.specs:
        _check_finite(spec, arrays[spec.name])
        deadline()
    codec.check(arrays, config, dims, deadline=deadline)
    deadline()
    if codec.cost(arrays, dims, n_rows) > codec.caps["cost"]:
        raise RecordError(f"record would cost more than {codec.caps['cost']:.0e} steps to score")
    frozen = {}
    for name, a in arrays.items():
        a = a.copy()
        a.flags.writeable = False
        frozen[name] = a
    deadline()
    return SiteModel(record.learner, config, frozen, codec, int(n_features))

