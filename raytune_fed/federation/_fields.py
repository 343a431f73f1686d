"""Declarative fields: the one check of what crosses the boundary, requests and answers alike.

A party declares each restricted method's request as a mapping of field names to these
types (see :func:`raytune_fed.federation.restricted`), and every record it answers with
declares its fields the same way (:class:`Record`: ``FIELDS``, plus ``RULES`` between
fields).  Each ``parse`` takes a value and returns a plain Python value or raises
:class:`FieldError` (a :class:`Refusal` with the fixed code ``"malformed"``) naming the
field (``models[2].learner``) and the rule it breaks, never quoting the value.  A request
that breaks one is refused with that code (the caller sees only the fixed text); a record
that breaks one is never built (:func:`check_record` raises
:class:`~raytune_fed.errors.BoundaryViolationError` naming the record's field, the rule and
the value).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from raytune_fed.errors import BoundaryViolationError, ConfigError
from raytune_fed.models import ModelRecord


class Refusal(Exception):
    """A restricted method refused a request; ``code`` picks one of the fixed texts.

    ``ledger`` holds extra fields for the site's own ledger entry (never sent out).
    """

    def __init__(self, code: str, **ledger: Any) -> None:
        super().__init__(code)
        self.code = code
        self.ledger = ledger


class FieldError(Refusal):
    """A value breaks its declared field: the ``"malformed"`` refusal, with ``field`` (where: ``""``
    for the value itself, ``"models[2].learner"`` inside) and ``rule`` (what it must be)."""

    def __init__(self, rule: str, field: str = "") -> None:
        super().__init__("malformed")
        self.rule, self.field = rule, field

    def at(self, name: str) -> FieldError:
        """The same error one level out, inside field (or item) ``name``."""
        inner = self.field if not self.field or self.field.startswith("[") else f".{self.field}"
        return FieldError(self.rule, f"{name}{inner}")

    def __str__(self) -> str:
        return f"{self.field or 'the value'} {self.rule}"


class Field(ABC):
    optional = False

    @abstractmethod
    def parse(self, value: Any) -> Any:
        """The plain value of ``value``, or :class:`FieldError`."""


def _bound(value: float) -> str:
    return str(float(value))


@dataclass(frozen=True)
class Text(Field):
    """A str of ``min_len..max_len`` characters (one of ``choices`` if given)."""

    max_len: int = 100
    choices: tuple[str, ...] | None = None
    optional: bool = False
    min_len: int = 1
    secret: bool = False  # a credential: an error never shows the value, only its length

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if self.choices is not None and value not in self.choices:
            raise FieldError(f"must be one of {list(self.choices)}")
        if not isinstance(value, str) or not self.min_len <= len(value) <= self.max_len:
            raise FieldError(f"must be a str of {self.min_len}..{self.max_len} characters")
        return value


@dataclass(frozen=True)
class Flag(Field):
    """A bool (``0`` and ``1`` are refused)."""

    def parse(self, value: Any) -> Any:
        if type(value) is not bool:
            raise FieldError("must be a bool")
        return value


@dataclass(frozen=True)
class Real(Field):
    low: float = -math.inf
    high: float = math.inf
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FieldError("must be a float")
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise FieldError(f"must be finite and in [{_bound(self.low)}, {_bound(self.high)}]")
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
            raise FieldError(f"must be bytes, at most {self.max_size}")
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
            above = f">= {self.low}" if self.high == Int.high else f"in [{self.low}, {self.high}]"
            raise FieldError(f"must be an int {above}")
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
            raise FieldError("must be an integer array")
        if value.ndim != (1 if self.width is None else 2) or (self.width is not None and value.shape[1] != self.width) \
                or not self.min_len <= value.shape[0] <= self.max_len:
            shape = "" if self.width is None else f" of {self.width} columns"
            raise FieldError(f"must hold {self.min_len}..{self.max_len} rows{shape}")
        if value.size and (value.min() < self.low or value.max() > self.high):
            raise FieldError(f"must hold values in [{self.low}, {self.high}]")
        if self.increasing and value.size > 1 and np.any(value[1:] <= value[:-1]):
            raise FieldError("must be strictly increasing")
        return value.astype(np.int64, copy=False)


@dataclass(frozen=True)
class ListOf(Field):
    """A list of ``min_len..max_len`` values, each parsed by ``item``; returned as a tuple."""

    item: Field
    max_len: int
    min_len: int = 0
    optional: bool = False
    kind: ClassVar[type] = list

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, (list, tuple)) or type(value) is not self.kind \
                or not self.min_len <= len(value) <= self.max_len:
            raise FieldError(f"must be a {self.kind.__name__} of {self.min_len}..{self.max_len} items")
        out = []
        for i, v in enumerate(value):
            try:
                out.append(self.item.parse(v))
            except FieldError as exc:
                raise exc.at(f"[{i}]") from None
        return tuple(out)


@dataclass(frozen=True)
class TupleOf(ListOf):
    """A record's tuple of ``min_len..max_len`` values, each parsed by ``item`` (a list is refused)."""

    kind: ClassVar[type] = tuple


@dataclass(frozen=True)
class Instance(Field):
    """Exactly an instance of ``cls`` (a record nested in a record; it checked itself when built)."""

    cls: type

    def parse(self, value: Any) -> Any:
        if type(value) is not self.cls:
            raise FieldError(f"must be a {self.cls.__name__}")
        return value


@dataclass(frozen=True, eq=False)
class Struct(Field):
    """A JSON object with the declared ``fields`` (no others; a missing one is parsed as ``None``)."""

    fields: Mapping[str, Field]
    optional: bool = False

    def parse(self, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, dict):
            raise FieldError("must be an object")
        if not set(value) <= set(self.fields):
            raise FieldError(f"must have only the fields {sorted(self.fields)}")
        return parse_fields(self.fields, value)


def parse_fields(declared: Mapping[str, Field], values: Mapping[str, Any]) -> dict[str, Any]:
    """Each declared field parsed from ``values`` (a missing one as ``None``); a :class:`FieldError`
    names the field."""
    out = {}
    for name, f in declared.items():
        try:
            out[name] = f.parse(values.get(name))
        except FieldError as exc:
            raise exc.at(name) from None
    return out


@dataclass(frozen=True)
class Model(Field):
    """A :class:`~raytune_fed.models.ModelRecord` (its arrays are checked by the learner's declaration later)."""

    def parse(self, value: Any) -> Any:
        if not isinstance(value, dict) or set(value) != {"learner", "config", "arrays"}:
            raise FieldError("must be a model record (learner, config, arrays)")
        learner, config, arrays = value["learner"], value["config"], value["arrays"]
        for name, ok in (("learner", isinstance(learner, str)), ("config", isinstance(config, dict)),
                         ("arrays", isinstance(arrays, dict))):
            if not ok:
                raise FieldError("must be a str" if name == "learner" else "must be an object", name)
        return ModelRecord(learner, dict(config), dict(arrays))


@dataclass(frozen=True)
class Models(Field):
    """A list of 1..``max_len`` model records."""

    max_len: int = 256

    def parse(self, value: Any) -> Any:
        return ListOf(Model(), self.max_len, min_len=1).parse(value)


@dataclass(frozen=True)
class Units(Field):
    """A schedule: a list of at most ``max_len`` units."""

    max_len: int = 100_000

    def parse(self, value: Any) -> Any:
        from raytune_fed.federation._schedule import Schedule

        try:
            return Schedule.from_list(value, max_units=self.max_len)
        except ConfigError:
            raise FieldError(f"must be a schedule of at most {self.max_len} units") from None


class Record:
    """Base of the frozen records a party answers with: ``FIELDS`` declares each dataclass field
    as a :class:`Field`, ``RULES`` the checks between fields (``(name, check)``: ``check(record)``
    is ``None`` or the rule ``name`` breaks).  Both run when a record is built (:func:`check_record`),
    so a record that exists is a valid one."""

    FIELDS: ClassVar[Mapping[str, Field]] = {}
    RULES: ClassVar[tuple[tuple[str, Callable[[Any], str | None]], ...]] = ()

    def __post_init__(self) -> None:
        check_record(self)


def _shown(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return f"{type(value).__name__} of {len(value)}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_record(record: Any) -> None:
    """Parse every declared field of ``record`` in place (a frozen dataclass: ``int`` losses become
    ``float``), then its rules; raise :class:`BoundaryViolationError` naming the first field broken."""
    cls = type(record)
    for name, f in cls.FIELDS.items():
        value = getattr(record, name)
        try:
            object.__setattr__(record, name, f.parse(value))
        except FieldError as exc:
            shown = f"a str of {len(value)} characters" if getattr(f, "secret", False) and isinstance(value, str) \
                else _shown(value)
            raise BoundaryViolationError(f"{cls.__name__}.{exc.at(name)}, got {shown}") from None
    for name, check in cls.RULES:
        broken = check(record)
        if broken is not None:
            raise BoundaryViolationError(f"{cls.__name__}.{name} {broken}, got {_shown(getattr(record, name))}")


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
