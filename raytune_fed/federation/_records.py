"""The only things a site answers with: small frozen records that check themselves.

Each record declares its fields with the same declarative fields a request does
(:class:`~raytune_fed.federation._fields.Record`: plain ``float``/``int``/``str``/``bool``,
short tuples of them, or a :class:`Blob` of bytes with a declared size) and is checked
against them when built, so a site cannot hand out feature rows or labels even by mistake.
:func:`check_outgoing` is the gate every answer passes; :func:`to_wire` / :func:`from_wire`
turn records into plain data for the wire format and back, rebuilding (so re-validating)
them on the receiving side.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any

from raytune_fed.errors import BoundaryViolationError
from raytune_fed.federation._fields import Bytes, Flag, Instance, Int, Real, Record, Text, TupleOf

MAX_MODELS_PER_FINAL = 256
MAX_LEDGER_ENTRIES = 100_000
MAX_BLOB_BYTES = 1 << 30

LOSS = Real(0.0, 1.0)
COUNT = Int(0)
SECONDS = Real(0.0)
NAME = Text(max_len=200, min_len=0)


@dataclass(frozen=True)
class Loss(Record):
    """A curator's answer: the loss of one model on its in-bag rows, how many rows, and
    the CPU seconds the site's thread spent on it (so the analyst can tell framework time from
    work; CPU time, not wall time, so that it says nothing of other analysts' queries scored
    at the same time)."""

    value: float
    n_rows: int
    seconds: float = 0.0

    FIELDS = {"value": LOSS, "n_rows": Int(1), "seconds": SECONDS}


@dataclass(frozen=True)
class FinalLosses(Record):
    """A one-shot final evaluation: one loss per submitted model on the evaluation rows,
    ``None`` where the site's privacy guard withheld a model's loss."""

    values: tuple[float | None, ...]
    n_rows: int

    FIELDS = {"values": TupleOf(Real(0.0, 1.0, optional=True), MAX_MODELS_PER_FINAL, min_len=1),
              "n_rows": Int(1)}

    @property
    def n_withheld(self) -> int:
        return sum(v is None for v in self.values)


@dataclass(frozen=True)
class LedgerEntry(Record):
    """One request of a session as the analyst may see it: when, which record, what kind,
    what was answered (``None`` for a refusal or a withheld loss)."""

    time: float
    fingerprint: str
    kind: str
    answer: float | None

    FIELDS = {"time": Real(), "fingerprint": Text(max_len=64, min_len=0),
              "kind": Text(choices=("query", "final", "refused")), "answer": Real(0.0, 1.0, optional=True)}


@dataclass(frozen=True)
class Ledger(Record):
    """A copy of one session's ledger (fingerprints and answers only)."""

    entries: tuple[LedgerEntry, ...]

    FIELDS = {"entries": TupleOf(Instance(LedgerEntry), MAX_LEDGER_ENTRIES)}

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class SiteStatus(Record):
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

    FIELDS = {"site": NAME, "role": NAME, "unit": NAME, "n_rows": COUNT, "n_queries": COUNT, "budget_left": COUNT,
              "sealed": Flag()}


@dataclass(frozen=True)
class SessionTicket(Record):
    """A session the site opened: its unguessable token (the only copy), the role and unit."""

    token: str
    site: str
    role: str
    unit: str
    n_rows: int

    FIELDS = {"token": Text(min_len=32, max_len=128, secret=True), "site": NAME, "role": NAME, "unit": NAME,
              "n_rows": Int(1)}


@dataclass(frozen=True)
class ScheduleReceipt(Record):
    """The site accepted a schedule: how many units name it, and the schedule's digest."""

    site: str
    n_units: int
    digest: str

    FIELDS = {"site": NAME, "n_units": COUNT, "digest": Text(max_len=64, min_len=0)}


@dataclass(frozen=True)
class Blob(Record):
    """Opaque bytes with a declared size, e.g. ciphertexts a party returns.  The only
    record that carries bytes; the size is checked against the data and a cap."""

    data: bytes
    size: int
    kind: str = "ciphertext"

    FIELDS = {"data": Bytes(max_size=MAX_BLOB_BYTES), "size": Int(0, MAX_BLOB_BYTES),
              "kind": Text(max_len=64, min_len=0)}
    RULES = (("size", lambda r: None if r.size == len(r.data) else "must equal len(data)"),)


@dataclass(frozen=True)
class Closed(Record):
    """A session was closed by the site's owner (the ledger keeps every entry)."""

    unit: str
    n_queries: int

    FIELDS = {"unit": NAME, "n_queries": COUNT}


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
    if issubclass(cls, Record) and set(cls.FIELDS) != names:
        raise TypeError(f"{cls.__name__}.FIELDS must declare exactly its fields {sorted(names)}")
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

    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    if not required <= set(data["fields"]):
        raise BoundaryViolationError(f"{cls.__name__} is missing fields {sorted(required - set(data['fields']))}")
    try:
        return cls(**{k: value(v) for k, v in data["fields"].items()})  # the record checks its declared fields
    except BoundaryViolationError:  # names the field and the rule
        raise
    except TypeError:  # a record type of another package checking itself by hand (e.g. Ciphertexts)
        raise BoundaryViolationError(f"{cls.__name__} holds fields of the wrong type") from None
