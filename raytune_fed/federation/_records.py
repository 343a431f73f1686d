"""The only things that cross a site boundary: small frozen records that check themselves.

A restricted site (curator, lockbox) answers with one of these records and nothing else.
Each record validates its fields when built: plain Python ``float``/``int``/``str``
scalars or short tuples of floats, never arrays, so a site cannot hand out feature rows or
labels even by mistake.  :func:`check_outgoing` is the gate every site method passes its
answer through.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from raytune_fed.errors import BoundaryViolationError

MAX_MODELS_PER_FINAL = 256


def _finite_float(name: str, value: Any, lo: float = -math.inf, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BoundaryViolationError(f"{name} must be a float, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise BoundaryViolationError(f"{name} must be finite and in [{lo}, {hi}], got {value!r}")
    return value


def _count(name: str, value: Any, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise BoundaryViolationError(f"{name} must be an int >= {lo}, got {value!r}")
    return value


@dataclass(frozen=True)
class Loss:
    """A curator's answer: the loss of one model on its in-bag rows, how many rows, and
    how long the site spent scoring (so the analyst can tell framework time from work)."""

    value: float
    n_rows: int
    seconds: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _finite_float("Loss.value", self.value, 0.0, 1.0))
        object.__setattr__(self, "n_rows", _count("Loss.n_rows", self.n_rows, 1))
        object.__setattr__(self, "seconds", _finite_float("Loss.seconds", self.seconds, 0.0))


@dataclass(frozen=True)
class FinalLosses:
    """A one-shot final evaluation: one loss per submitted model, on the evaluation rows."""

    values: tuple[float, ...]
    n_rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or not 1 <= len(self.values) <= MAX_MODELS_PER_FINAL:
            raise BoundaryViolationError(
                f"FinalLosses.values must be a tuple of 1..{MAX_MODELS_PER_FINAL} floats, got {type(self.values).__name__}"
                f" of length {len(self.values) if hasattr(self.values, '__len__') else '?'}")
        object.__setattr__(self, "values", tuple(_finite_float("FinalLosses.values[i]", v, 0.0, 1.0)
                                                 for v in self.values))
        object.__setattr__(self, "n_rows", _count("FinalLosses.n_rows", self.n_rows, 1))


@dataclass(frozen=True)
class LedgerEntry:
    """One answered query: when, which model (a fingerprint), what kind, what was answered."""

    time: float
    fingerprint: str
    kind: str
    answer: float

    def __post_init__(self) -> None:
        _finite_float("LedgerEntry.time", self.time)
        if not (isinstance(self.fingerprint, str) and len(self.fingerprint) <= 64):
            raise BoundaryViolationError(f"LedgerEntry.fingerprint must be a short str, got {self.fingerprint!r}")
        if self.kind not in ("query", "final"):
            raise BoundaryViolationError(f"LedgerEntry.kind must be 'query' or 'final', got {self.kind!r}")
        _finite_float("LedgerEntry.answer", self.answer, 0.0, 1.0)


@dataclass(frozen=True)
class SiteStatus:
    """What anyone may know about a role: its name, role, size and query counts."""

    site: str
    role: str
    n_rows: int
    n_queries: int
    budget_left: int | None
    sealed: bool

    def __post_init__(self) -> None:
        for name in ("site", "role"):
            if not isinstance(getattr(self, name), str):
                raise BoundaryViolationError(f"SiteStatus.{name} must be a str")
        _count("SiteStatus.n_rows", self.n_rows)
        _count("SiteStatus.n_queries", self.n_queries)
        if self.budget_left is not None:
            _count("SiteStatus.budget_left", self.budget_left)
        if not isinstance(self.sealed, bool):
            raise BoundaryViolationError("SiteStatus.sealed must be a bool")


@dataclass(frozen=True)
class Ledger:
    """A copy of a role's query ledger (fingerprints and answers only)."""

    entries: tuple[LedgerEntry, ...]

    def __post_init__(self) -> None:
        if not all(type(e) is LedgerEntry for e in self.entries):
            raise BoundaryViolationError("Ledger.entries must hold LedgerEntry records only")

    def __len__(self) -> int:
        return len(self.entries)


RECORD_TYPES: tuple[type, ...] = (Loss, FinalLosses, LedgerEntry, SiteStatus, Ledger)


def check_outgoing(answer: Any) -> Any:
    """Let ``answer`` leave a site only if it is exactly one of the record types."""
    if type(answer) not in RECORD_TYPES:
        raise BoundaryViolationError(
            f"a site may only answer with {[t.__name__ for t in RECORD_TYPES]}, not {type(answer).__name__}")
    for f in fields(answer):
        value = getattr(answer, f.name)
        if hasattr(value, "__array__") or isinstance(value, (list, dict, bytes, bytearray)):
            raise BoundaryViolationError(f"{type(answer).__name__}.{f.name} holds a {type(value).__name__}")
    return answer
