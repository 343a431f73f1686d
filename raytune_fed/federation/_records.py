"""The only things a site answers with: small frozen records that check themselves.

Each record validates its fields when built (plain ``float``/``int``/``str``/``bool``,
short tuples of them, or a :class:`Blob` of bytes with a declared size), so a site cannot
hand out feature rows or labels even by mistake.  :func:`check_outgoing` is the gate
every answer passes; :func:`to_wire` / :func:`from_wire` turn records into plain data for
the wire format and back, rebuilding (so re-validating) them on the receiving side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from raytune_fed.errors import BoundaryViolationError

MAX_MODELS_PER_FINAL = 256
MAX_LEDGER_ENTRIES = 100_000
MAX_BLOB_BYTES = 1 << 30


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


def _text(name: str, value: Any, max_len: int = 200) -> str:
    if not isinstance(value, str) or len(value) > max_len:
        raise BoundaryViolationError(f"{name} must be a str of at most {max_len} characters")
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
    """A one-shot final evaluation: one loss per submitted model on the evaluation rows,
    ``None`` where the site's privacy guard withheld a model's loss."""

    values: tuple[float | None, ...]
    n_rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.values, tuple) or not 1 <= len(self.values) <= MAX_MODELS_PER_FINAL:
            raise BoundaryViolationError(f"FinalLosses.values must be a tuple of 1..{MAX_MODELS_PER_FINAL} floats")
        object.__setattr__(self, "values", tuple(
            None if v is None else _finite_float("FinalLosses.values[i]", v, 0.0, 1.0) for v in self.values))
        object.__setattr__(self, "n_rows", _count("FinalLosses.n_rows", self.n_rows, 1))

    @property
    def n_withheld(self) -> int:
        return sum(v is None for v in self.values)


@dataclass(frozen=True)
class LedgerEntry:
    """One request of a session as the analyst may see it: when, which record, what kind,
    what was answered (``None`` for a refusal or a withheld loss)."""

    time: float
    fingerprint: str
    kind: str
    answer: float | None

    def __post_init__(self) -> None:
        _finite_float("LedgerEntry.time", self.time)
        if not (isinstance(self.fingerprint, str) and len(self.fingerprint) <= 64):
            raise BoundaryViolationError("LedgerEntry.fingerprint must be a str of at most 64 characters")
        if self.kind not in ("query", "final", "refused"):
            raise BoundaryViolationError(f"LedgerEntry.kind must be 'query', 'final' or 'refused', got {self.kind!r}")
        if self.answer is not None:
            _finite_float("LedgerEntry.answer", self.answer, 0.0, 1.0)


@dataclass(frozen=True)
class Ledger:
    """A copy of one session's ledger (fingerprints and answers only)."""

    entries: tuple[LedgerEntry, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.entries, tuple) or len(self.entries) > MAX_LEDGER_ENTRIES \
                or not all(type(e) is LedgerEntry for e in self.entries):
            raise BoundaryViolationError("Ledger.entries must be a tuple of LedgerEntry records")

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class SiteStatus:
    """What a session may know about its role: site, role, unit, rows scored, its own query
    count, how many answers the site may still give it (the least of the site's remaining
    query budget, its remaining lifetime answers and the session's credential's share) and
    whether it is sealed."""

    site: str
    role: str
    unit: str
    n_rows: int
    n_queries: int
    budget_left: int
    sealed: bool

    def __post_init__(self) -> None:
        for name in ("site", "role", "unit"):
            _text(f"SiteStatus.{name}", getattr(self, name))
        _count("SiteStatus.n_rows", self.n_rows)
        _count("SiteStatus.n_queries", self.n_queries)
        _count("SiteStatus.budget_left", self.budget_left)
        if not isinstance(self.sealed, bool):
            raise BoundaryViolationError("SiteStatus.sealed must be a bool")


@dataclass(frozen=True)
class SessionTicket:
    """A session the site opened: its unguessable token (the only copy), the role and unit."""

    token: str
    site: str
    role: str
    unit: str
    n_rows: int

    def __post_init__(self) -> None:
        if not isinstance(self.token, str) or not 32 <= len(self.token) <= 128:
            raise BoundaryViolationError("SessionTicket.token must be a str of 32..128 characters")
        for name in ("site", "role", "unit"):
            _text(f"SessionTicket.{name}", getattr(self, name))
        _count("SessionTicket.n_rows", self.n_rows, 1)


@dataclass(frozen=True)
class ScheduleReceipt:
    """The site accepted a schedule: how many units name it, and the schedule's digest."""

    site: str
    n_units: int
    digest: str

    def __post_init__(self) -> None:
        _text("ScheduleReceipt.site", self.site)
        _count("ScheduleReceipt.n_units", self.n_units)
        _text("ScheduleReceipt.digest", self.digest, 64)


@dataclass(frozen=True)
class Blob:
    """Opaque bytes with a declared size, e.g. ciphertexts a party returns.  The only
    record that carries bytes; the size is checked against the data and a cap."""

    data: bytes
    size: int
    kind: str = "ciphertext"

    def __post_init__(self) -> None:
        if type(self.data) is not bytes:
            raise BoundaryViolationError("Blob.data must be bytes")
        _count("Blob.size", self.size)
        if self.size != len(self.data) or self.size > MAX_BLOB_BYTES:
            raise BoundaryViolationError(f"Blob.size must equal len(data) and be at most {MAX_BLOB_BYTES}")
        _text("Blob.kind", self.kind, 64)


@dataclass(frozen=True)
class Closed:
    """A session was closed by the site's owner (the ledger keeps every entry)."""

    unit: str
    n_queries: int

    def __post_init__(self) -> None:
        _text("Closed.unit", self.unit)
        _count("Closed.n_queries", self.n_queries)


RECORD_TYPES: tuple[type, ...] = (Loss, FinalLosses, LedgerEntry, Ledger, SiteStatus, SessionTicket,
                                  ScheduleReceipt, Blob, Closed)
_BY_NAME: dict[str, type] = {}
_BYTES_FIELDS: dict[type, frozenset[str]] = {}
_SCALARS = (int, float, str, bool, type(None))


def register_record(cls: type, *, bytes_fields: tuple[str, ...] = ()) -> type:
    """Declare ``cls`` (a frozen dataclass that checks itself) a record a party may answer with.

    Another party type's records (e.g. the SecureBoost parties') are declared here once,
    so :func:`check_outgoing`, :func:`to_wire` and :func:`from_wire` know them.
    ``bytes_fields`` name the fields that may hold ``bytes`` or a tuple of ``bytes``
    (ciphertexts, packed ids); every other field holds scalars, records or tuples of them.
    """
    names = {f.name for f in fields(cls)}
    if not set(bytes_fields) <= names:
        raise TypeError(f"{cls.__name__} has no fields {sorted(set(bytes_fields) - names)}")
    known = _BY_NAME.setdefault(cls.__name__, cls)
    if known is not cls:
        raise TypeError(f"another record type is already called {cls.__name__}")
    _BYTES_FIELDS[cls] = frozenset(bytes_fields)
    return cls


for _cls in RECORD_TYPES:
    register_record(_cls, bytes_fields=("data",) if _cls is Blob else ())


def check_outgoing(answer: Any) -> Any:
    """Let ``answer`` leave a party only if it is exactly one of the registered record types,
    holding scalars, tuples of scalars or records, or (declared bytes fields only) bytes."""
    raw = _BYTES_FIELDS.get(type(answer))
    if raw is None:
        raise BoundaryViolationError(
            f"a site may only answer with {sorted(_BY_NAME)}, not {type(answer).__name__}")
    for f in fields(answer):
        value = getattr(answer, f.name)
        items = value if type(value) is tuple else (value,)
        if f.name in raw:
            if not all(type(item) is bytes for item in items):
                raise BoundaryViolationError(f"{type(answer).__name__}.{f.name} must hold bytes")
            continue
        for item in items:
            if type(item) in _BYTES_FIELDS:
                check_outgoing(item)
            elif type(item) not in _SCALARS:
                raise BoundaryViolationError(f"{type(answer).__name__}.{f.name} holds a {type(item).__name__}")
    return answer


def to_wire(record: Any) -> dict[str, Any]:
    """Plain data for a record (after :func:`check_outgoing`)."""
    check_outgoing(record)
    return _plain(record)


def _plain(record: Any) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if type(value) in _BYTES_FIELDS:
            return _plain(value)
        if type(value) is tuple:
            return [plain(v) for v in value]
        return value

    return {"type": type(record).__name__, "fields": {f.name: plain(getattr(record, f.name)) for f in fields(record)}}


def from_wire(data: Any) -> Any:
    """Rebuild a record from :func:`to_wire` data; raise :class:`BoundaryViolationError` if it is not one."""
    if not isinstance(data, dict) or set(data) != {"type", "fields"} or data["type"] not in _BY_NAME \
            or not isinstance(data["fields"], dict):
        raise BoundaryViolationError("an answer must be one of the site's record types")
    cls = _BY_NAME[data["type"]]
    names = {f.name for f in fields(cls)}
    if not set(data["fields"]) <= names:
        raise BoundaryViolationError(f"{cls.__name__} has no fields {sorted(set(data['fields']) - names)}")

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            return from_wire(v)
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        return v

    try:
        return cls(**{k: value(v) for k, v in data["fields"].items()})
    except TypeError:
        raise BoundaryViolationError(f"{cls.__name__} is missing fields") from None
