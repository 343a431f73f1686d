"""Typed request fields: what a restricted method accepts, checked before it runs.

A party declares each restricted method's request as a mapping of field names to these
types (see :func:`raytune_fed.federation.restricted`).  Each ``parse`` takes the decoded
wire value and returns a plain Python value or raises :class:`Refusal` with the fixed
code ``"malformed"``; no message ever quotes the input.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.errors import ConfigError
from raytune_fed.models import ModelRecord


class Refusal(Exception):
    """A restricted method refused a request; ``code`` picks one of the fixed texts.

    ``ledger`` holds extra fields for the site's own ledger entry (never sent out).
    """

    def __init__(self, code: str, **ledger: Any) -> None:
        super().__init__(code)
        self.code = code
        self.ledger = ledger


class Field(ABC):
    optional = False

    @abstractmethod
    def parse(self, value: Any) -> Any:
        """Implemented by each concrete subclass."""


def _malformed() -> Refusal:
    return Refusal("malformed")


@dataclass(frozen=True)
class Text(Field):
    max_len: int = 100
    choices: tuple[str, ...] | None = None
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or not 1 <= len(value) <= self.max_len \
                or (self.choices is not None and value not in self.choices):
            raise _malformed()
        return value


@dataclass(frozen=True)
class Real(Field):
    low: float = -math.inf
    high: float = math.inf
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not self.low <= value <= self.high:
            raise _malformed()
        return float(value)


@dataclass(frozen=True)
class Bytes(Field):
    """Opaque bytes (e.g. ciphertexts) of at most ``max_size`` bytes."""

    max_size: int = 1 << 26
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if type(value) is not bytes or len(value) > self.max_size:
            raise _malformed()
        return value


@dataclass(frozen=True)
class Int(Field):
    """An integer in ``[low, high]`` (a bool or a float is refused)."""

    low: int = -(1 << 62)
    high: int = 1 << 62
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if type(value) is not int or not self.low <= value <= self.high:
            raise _malformed()
        return value


@dataclass(frozen=True)
class IntArray(Field):
    """A wire array of integers: ``min_len..max_len`` values in ``[low, high]``.

    ``width`` makes it a 2-D array of that many columns (rows counted by the lengths);
    ``increasing`` asks for strictly increasing values (sorted distinct ids).  A JSON list
    is refused: integers arrive as int64/int32 buffers and are returned as int64.
    """

    max_len: int
    low: int = 0
    high: int = 1 << 62
    min_len: int = 1
    width: int | None = None
    increasing: bool = False
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if type(value) is not np.ndarray or value.dtype.kind != "i":
            raise _malformed()
        if value.ndim != (1 if self.width is None else 2) or (self.width is not None and value.shape[1] != self.width) \
                or not self.min_len <= value.shape[0] <= self.max_len:
            raise _malformed()
        if value.size and (value.min() < self.low or value.max() > self.high):
            raise _malformed()
        if self.increasing and value.size > 1 and np.any(value[1:] <= value[:-1]):
            raise _malformed()
        return value.astype(np.int64, copy=False)


@dataclass(frozen=True)
class ListOf(Field):
    """A list of ``min_len..max_len`` values, each parsed by ``item``."""

    item: Field
    max_len: int
    min_len: int = 0
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, list) or not self.min_len <= len(value) <= self.max_len:
            raise _malformed()
        return tuple(self.item.parse(v) for v in value)


@dataclass(frozen=True, eq=False)
class Struct(Field):
    """A JSON object with the declared ``fields`` (no others; a missing one is parsed as ``None``)."""

    fields: Mapping[str, Field]
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, dict) or not set(value) <= set(self.fields):
            raise _malformed()
        return {name: f.parse(value.get(name)) for name, f in self.fields.items()}


@dataclass(frozen=True)
class Model(Field):
    """A :class:`~raytune_fed.models.ModelRecord` (its arrays are checked by the learner's declaration later)."""

    def parse(self, value: Any) -> Any:
        if not isinstance(value, dict) or set(value) != {"learner", "config", "arrays"}:
            raise _malformed()
        learner, config, arrays = value["learner"], value["config"], value["arrays"]
        if not isinstance(learner, str) or not isinstance(config, dict) or not isinstance(arrays, dict):
            raise _malformed()
        return ModelRecord(learner, dict(config), dict(arrays))


@dataclass(frozen=True)
class Models(Field):
    """A list of 1..``max_len`` model records."""

    max_len: int = 256

    def parse(self, value: Any) -> Any:
        if not isinstance(value, list) or not 1 <= len(value) <= self.max_len:
            raise _malformed()
        return tuple(Model().parse(v) for v in value)


@dataclass(frozen=True)
class Units(Field):
    """A schedule: a list of at most ``max_len`` units."""

    max_len: int = 100_000

    def parse(self, value: Any) -> Any:
        from raytune_fed.federation._schedule import Schedule

        try:
            return Schedule.from_list(value, max_units=self.max_len)
        except ConfigError:
            raise _malformed() from None


def model_to_wire(record: ModelRecord) -> dict[str, Any]:
    """A model record as wire data (the inverse of :class:`Model`)."""
    return {"learner": record.learner, "config": dict(record.config), "arrays": dict(record.arrays)}


def record_fingerprint(record: ModelRecord, deadline: Any = None) -> str:
    """A short content hash of a model record (what ledgers store instead of the model).

    ``deadline()`` (a request's CPU limit) is called between arrays and every 16 MiB.
    """
    import hashlib
    import json

    h = hashlib.sha256()
    h.update(json.dumps([record.learner, sorted(record.config.items())], default=float).encode())
    for name in sorted(record.arrays):
        a = record.arrays[name]
        h.update(json.dumps([name, str(getattr(a, "dtype", "")), list(getattr(a, "shape", ()))]).encode())
        if isinstance(a, np.ndarray):
            # numpy's stubs give ndarray __buffer__ only for Python >= 3.12
            raw = memoryview(np.ascontiguousarray(a)).cast("B")  # type: ignore[arg-type]
            for start in range(0, len(raw), 1 << 24):
                if deadline is not None:
                    deadline()
                h.update(raw[start:start + (1 << 24)])
    return h.hexdigest()[:32]
