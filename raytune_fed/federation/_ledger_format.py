"""What a ledger line may hold: every line is checked when a party starts, before any is used.

A party rebuilds its budget, sessions and one-shot answers from its ledger, so a line that
parses is not yet a line to trust.  :func:`parse_ledger` reads a ledger's bytes and checks,
line by line, before the caller changes anything:

* the encoding: one JSON object per line, exactly as :meth:`SiteLedger.append` writes it
  (compact, no duplicate keys, no NaN);
* the chain: ``seq`` counts from 0 without gaps or repeats, ``prev`` is the SHA-256 of the
  line before;
* the fields every party writes: ``time`` a finite number, ``event`` a name, ``session`` the
  hash of a session the ledger opened before and has not closed, ``request`` a request
  number charged once per session, and ``charged`` the answers a line charged - an int (or a
  bool, as older ledgers wrote it) that is 0 or 1, 1 on a query, the number of models on a
  final evaluation (a count >= 0 on a refused one); a charged line that kept its request
  number keeps the reply (a record the party answers with) or the refusal's code;
* the fields a site reads back on restart: its one declared schedule, and each query's and
  final evaluation's predictions, rows, answers and Thresholdout inputs.

The first line that breaks a rule stops the start with a :class:`ConfigError` naming the
ledger, the line, the field and the value.  A last line without its newline is returned apart
(``torn``): the caller decides whether it is the party's own interrupted write.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from raytune_fed._checks import check_choice, check_int, check_share
from raytune_fed.errors import BoundaryViolationError, ConfigError

GENESIS = "0" * 64
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_PACKED = re.compile(r"(?:[0-9a-f]{2})+\Z")  # bits packed as bytes, as hex (see _guard.packed_hex)
_MAX_REQUEST = 1 << 62  # the largest request number a party accepts (_party.REQUEST)


def encode(entry: dict[str, Any]) -> bytes:
    """The one encoding of a ledger line (without its newline)."""
    return json.dumps(entry, separators=(",", ":"), allow_nan=False).encode()


def start_of_line(seq: int) -> bytes:
    """How the ledger's own line number ``seq`` begins (a write cut short keeps a prefix of it)."""
    return b'{"seq":%d,"time":' % seq


@dataclass
class Ledger:
    """A checked ledger: its entries, the hash of each line, the complete lines' length in bytes and
    the bytes after the last newline (``torn``; empty when the file ends with one)."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    n_bytes: int = 0
    torn: bytes = b""


class _Sessions:
    """The sessions the lines so far opened and closed, and the request numbers they charged."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.closed: set[str] = set()
        self.requests: set[tuple[str, int]] = set()


def parse_ledger(raw: bytes, shown: str) -> Ledger:
    """Check every complete line of ledger bytes ``raw`` (``shown``: the ledger's name in messages)."""
    lines = raw.split(b"\n")
    torn = lines.pop()  # b"" after a final newline
    out = Ledger(n_bytes=len(raw) - len(torn), torn=torn)
    sessions = _Sessions()
    last = GENESIS
    for number, line in enumerate(lines, 1):
        where = f"ledger {shown!r}: line {number}"
        entry = _decode(line, where)
        if entry.get("seq") != number - 1 or type(entry["seq"]) is not int or entry.get("prev") != last:
            raise ConfigError(f"{where} breaks the hash chain; the ledger was edited or reordered")
        check_entry(entry, where, sessions)
        last = hashlib.sha256(line).hexdigest()
        out.hashes.append(last)
        out.entries.append(entry)
    return out


def _decode(line: bytes, where: str) -> dict[str, Any]:
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where} is not JSON; the file is not a ledger, or it is damaged") from None
    try:
        canonical = isinstance(entry, dict) and encode(entry) == line
    except ValueError:  # NaN or infinity
        canonical = False
    if not canonical:
        raise ConfigError(f"{where} is not a ledger line as the ledger writes it (one compact JSON object, "
                          f"no repeated keys, no NaN); the ledger was edited")
    return entry


def check_entry(entry: dict[str, Any], where: str, sessions: _Sessions) -> None:
    """Check one entry's fields against the rules in the module docstring (``sessions``: state so far)."""
    def name(key: str) -> str:
        return f"{where}: field {key!r}"

    def need(key: str) -> Any:
        if key not in entry:
            raise ConfigError(f"{where}: field {key!r} is missing")
        return entry[key]

    t = need("time")
    if type(t) not in (int, float) or not math.isfinite(t) or t < 0:
        raise ConfigError(f"{name('time')} must be a finite number >= 0, got {t!r}")
    event = need("event")
    if not isinstance(event, str) or not event:
        raise ConfigError(f"{name('event')} must be a non-empty string, got {event!r}")
    key = entry.get("session")
    if event == "session":
        key = need("session")
        if not isinstance(key, str) or not _SHA256.match(key):
            raise ConfigError(f"{name('session')} must be a session's SHA-256 (64 hex digits), got {key!r}")
        if key in sessions.open:
            raise ConfigError(f"{name('session')} opens session {key[:12]}... a second time")
        for k in ("role", "unit"):
            _text(name(k), need(k))
        if "analyst" in entry:
            _text(name("analyst"), entry["analyst"])
        sessions.open.add(key)
    elif key is not None:
        if key not in sessions.open:
            raise ConfigError(f"{name('session')} names no session the ledger opened before, got {key!r}")
        if key in sessions.closed:
            raise ConfigError(f"{name('session')} names session {key[:12]}... after it was closed")
    _check_charge(entry, event, name, need)
    number = entry.get("request")
    if number is not None:
        check_int(name("request"), number, 1, _MAX_REQUEST)
        if entry.get("charged") and key is not None:
            if (key, number) in sessions.requests:
                raise ConfigError(f"{name('request')} charges request {number} of its session a second time")
            sessions.requests.add((key, number))
            if event == "refused":
                _text(name("code"), need("code"))
            else:
                _reply(name("reply"), need("reply"))
    if "closed" in entry:
        if entry["closed"] != key:
            raise ConfigError(f"{name('closed')} must name the line's own open session, got {entry['closed']!r}")
        sessions.closed.add(key)
    if event == "uncharged":
        _text(name("code"), need("code"))
        count = check_int(name("count"), need("count"), 1)
        if count & (count - 1):
            raise ConfigError(f"{name('count')} must be a power of 2, got {count!r}")
    elif event == "refused":
        if need("method") is not None:  # older ledgers wrote uncharged refusals, some before a method was known
            _text(name("method"), entry["method"])
        _text(name("code"), need("code"))
    elif event == "declare_schedule":
        _schedule(entry, name, need)
    elif event == "query":
        _query(entry, name, need)
    elif event == "final_evaluation":
        _final(entry, name, need)


def _check_charge(entry: dict[str, Any], event: str, name: Any, need: Any) -> None:
    """``charged``: 0 or 1 (or a bool); 1 on a query; the number of models on a final evaluation
    (and on a refused one, any count)."""
    if event in ("query", "final_evaluation"):
        charged = need("charged")
    elif "charged" in entry:
        charged = entry["charged"]
    else:
        return
    if type(charged) is bool:  # older ledgers: True for a charged request, whatever it cost
        if event in ("query", "final_evaluation") and not charged:
            raise ConfigError(f"{name('charged')} must be true or a count >= 1 on a {event!r} line, got false")
        return
    if event == "final_evaluation":
        models = need("fingerprints")
        n = len(models) if isinstance(models, list) else 0
        if type(charged) is not int or charged != n or n < 1:
            raise ConfigError(f"{name('charged')} must be the number of models evaluated ({n}), got {charged!r}")
    elif event == "refused" and entry.get("method") == "final_evaluation":
        check_int(name("charged"), charged, 0)
    elif event == "query":
        check_int(name("charged"), charged, 1, 1)
    else:
        check_int(name("charged"), charged, 0, 1)


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _packed(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _PACKED.match(value):
        raise ConfigError(f"{name} must be packed bits in hex, got {value!r}")
    return value


def _reply(name: str, value: Any) -> None:
    from raytune_fed.federation._records import from_wire

    try:
        from_wire(value)
    except BoundaryViolationError as exc:
        raise ConfigError(f"{name} is not a record the party answers with ({exc})") from None


def _schedule(entry: dict[str, Any], name: Any, need: Any) -> None:
    from raytune_fed.federation._schedule import Schedule

    units = need("units")
    try:
        schedule = Schedule.from_list(units, max_units=len(units) if isinstance(units, list) else 0)
    except ConfigError as exc:
        raise ConfigError(f"{name('units')} is not a schedule ({exc})") from None
    if need("digest") != schedule.digest:
        raise ConfigError(f"{name('digest')} is not the digest of the line's units, got {entry['digest']!r}")


def _query(entry: dict[str, Any], name: Any, need: Any) -> None:
    _text(name("fingerprint"), need("fingerprint"))
    check_choice(name("mechanism"), need("mechanism"), ("exact", "thresholdout"))
    rows = _packed(name("rows"), need("rows"))
    if len(_packed(name("pred"), need("pred"))) != len(rows):
        raise ConfigError(f"{name('pred')} must hold as many bits as 'rows', got {entry['pred']!r}")
    check_share(name("answer"), need("answer"), 0.0, 1.0, low_open=False)
    if "th" in entry:
        th = entry["th"]
        if not isinstance(th, list) or len(th) != 3:
            raise ConfigError(f"{name('th')} must be [train loss, holdout loss, draw], got {th!r}")
        check_share(name("th") + "[0]", th[0], 0.0, 1.0, low_open=False)
        check_share(name("th") + "[1]", th[1], 0.0, 1.0, low_open=False)
        check_int(name("th") + "[2]", th[2], 0)


def _final(entry: dict[str, Any], name: Any, need: Any) -> None:
    fingerprints, answers, preds = need("fingerprints"), need("answers"), need("preds")
    for key, value in (("fingerprints", fingerprints), ("answers", answers), ("preds", preds)):
        if not isinstance(value, list) or not value or len(value) != len(fingerprints):
            raise ConfigError(f"{name(key)} must be a non-empty list, one item per model evaluated, got {value!r}")
    rows = _packed(name("rows"), need("rows"))
    for i, (f, a, p) in enumerate(zip(fingerprints, answers, preds)):
        _text(f"{name('fingerprints')}[{i}]", f)
        if (a is None) != (p is None):
            raise ConfigError(f"{name('answers')}[{i}] and 'preds'[{i}] must both be null (withheld) or both set")
        if a is not None:
            check_share(f"{name('answers')}[{i}]", a, 0.0, 1.0, low_open=False)
            if len(_packed(f"{name('preds')}[{i}]", p)) != len(rows):
                raise ConfigError(f"{name('preds')}[{i}] must hold as many bits as 'rows', got {p!r}")
    for key in ("unit", "role"):
        _text(name(key), need(key))
