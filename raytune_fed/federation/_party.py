"""The base of every restricted party: one entry point, declared methods, sessions, ledger.

A party (an RFMS :class:`~raytune_fed.federation.Site`, a SecureBoost passive party, ...)
is reached only through :meth:`Party.call`, which takes one wire message and returns
one: every transport (in-process, Ray actor, network service) goes through it.  A
message names a method; only methods a class declares with :func:`restricted` exist, and
each declares its request fields (:mod:`raytune_fed.federation._fields`) and the record
type it answers with.  So a new party type states its protocol like this::

    class PassiveParty(Party):
        @restricted(request={"histograms": Bytes(max_size=1 << 24)}, answers=Blob)
        def aggregate(self, session, histograms):
            ...
            return Blob(ciphertext, len(ciphertext)), {"bytes_in": len(histograms)}

A handler gets the caller's :class:`Session` (or ``None`` when ``session=False``) and the
parsed fields, and returns its record plus the fields for its own ledger entry (site
side only), or raises :class:`Refusal`.  The base then guarantees, for every party:

* refusals carry one of the fixed texts in ``REFUSALS`` (never an exception's text or a
  value from the data); an unexpected error becomes the fixed ``internal`` refusal;
* every request with a valid session is written to the append-only ledger, answered or
  refused, before the answer leaves (``charged=True`` methods also count it against the
  party's budget through :meth:`Party._charge`);
* sessions are issued by the party (``secrets.token_urlsafe``), stored as hashes, and
  closed only with the owner's credential (compared in constant time).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from raytune_fed.errors import ConfigError
from raytune_fed.federation import _wire
from raytune_fed.federation._fields import Field, Refusal, Text
from raytune_fed.federation._ledger import SiteLedger
from raytune_fed.federation._records import Closed, to_wire

REFUSALS: dict[str, str] = {
    "malformed": "the request does not match the method's declared record",
    "unknown_method": "the site has no such restricted method",
    "session": "no open session has this token",
    "owner": "only the site's owner may do this",
    "role": "this session's role does not answer this request",
    "schedule": "the request is outside the schedule the site accepted",
    "budget": "the site's query budget is spent",
    "sealed": "this evaluation was already given; it is given once",
    "record": "the model record does not match its learner's declaration",
    "guard": "the site's privacy guard refused this model",
    "timeout": "scoring exceeded the site's time limit",
    "mechanism": "the site's policy does not offer this answer mechanism",
    "internal": "the site could not answer this request",
    "opened": "this session was opened before; a session is opened once",
    "protocol": "the request does not follow the protocol of this session so far",
    "context": "the context is not a public encryption context (a secret key is never accepted)",
    "limit": "the request exceeds a limit the party's owner set",
}
TOKEN = Text(max_len=128)


@dataclass(frozen=True)
class Restricted:
    """A declared restricted method: its request fields, answer type and access rules."""

    name: str
    request: Mapping[str, Field]
    answers: type
    session: bool = True
    owner: bool = False
    handler: Callable[..., Any] = field(repr=False, default=None)


def restricted(*, request: Mapping[str, Field] | None = None, answers: type, session: bool = True,
               owner: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a method of a :class:`Party` subclass as part of its protocol."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__restricted__ = Restricted(fn.__name__, dict(request or {}), answers, session, owner, fn)
        return fn

    return mark


@dataclass
class Session:
    """One session of a party: who it is for (role, unit) and what it has used."""

    key: str
    role: str
    unit: str
    n_queries: int = 0
    sealed: bool = False
    closed: bool = False


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Party:
    """Base class: see the module docstring."""

    PROTOCOL: ClassVar[dict[str, Restricted]] = {}
    REFUSALS: ClassVar[dict[str, str]] = REFUSALS
    #: ``call`` answers one request at a time (a site's budget and guard are shared by all
    #: sessions); a party whose sessions share no state sets this False and locks per session
    SERIAL: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        protocol: dict[str, Restricted] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                spec = getattr(value, "__restricted__", None)
                if spec is not None:
                    protocol[spec.name] = spec
        cls.PROTOCOL = protocol

    def __init__(self, name: str, *, ledger: str | None, owner_secret: str | None, max_request_bytes: int) -> None:
        if owner_secret is not None and (not isinstance(owner_secret, str) or len(owner_secret) < 16):
            raise ConfigError("the owner credential must be a str of at least 16 characters")
        self.name = name
        self._ledger = SiteLedger(ledger)
        self._owner = owner_secret
        self._max_request_bytes = max_request_bytes
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def max_request_bytes(self) -> int:
        """The largest request message this party reads (a transport may refuse larger ones early)."""
        return self._max_request_bytes

    # -- the one entry point ------------------------------------------------------------

    def call(self, message: bytes) -> bytes:
        """Answer one wire message with one wire message (an answer or a fixed refusal)."""
        with self._lock if self.SERIAL else nullcontext():
            try:
                return _wire.encode({"answer": to_wire(self._handle(message))})
            except Refusal as refusal:
                code = refusal.code if refusal.code in self.REFUSALS else "internal"
                return _wire.encode({"refused": {"code": code, "message": self.REFUSALS[code]}})

    def _handle(self, message: bytes) -> Any:
        try:
            request = _wire.decode(message, max_bytes=self._max_request_bytes)
        except _wire.WireError:
            self._ledger.append("refused", code="malformed", method=None)
            raise Refusal("malformed") from None
        if not isinstance(request, dict) or set(request) != {"method", "args"} or not isinstance(request["args"], dict):
            self._ledger.append("refused", code="malformed", method=None)
            raise Refusal("malformed")
        spec = self.PROTOCOL.get(request["method"]) if isinstance(request["method"], str) else None
        if spec is None:
            self._ledger.append("refused", code="unknown_method", method=None)
            raise Refusal("unknown_method")
        args = dict(request["args"])
        session = None
        if spec.session:
            session = self._session(args.pop("session", None), spec.name)
        if spec.owner:
            self._check_owner(args.pop("owner", None), spec.name)
        if set(args) - set(spec.request):
            self._refuse(spec, session, Refusal("malformed"), charged=False)
        try:
            charged = self._charge(spec, session)
        except Refusal as refusal:
            self._refuse(spec, session, refusal, charged=False)
        try:
            kwargs = {name: f.parse(args.get(name)) for name, f in spec.request.items()}
            answer, ledger = spec.handler(self, session, **kwargs)
        except Refusal as refusal:
            self._refuse(spec, session, refusal, charged=charged)
        except Exception as exc:  # never let an exception's text (which may quote data) out
            self._refuse(spec, session, Refusal("internal", error=type(exc).__name__), charged=charged)
        if type(answer) is not spec.answers:
            self._refuse(spec, session, Refusal("internal", error="answer type"), charged=charged)
        if ledger is not None:
            self._ledger.append(spec.name, session=None if session is None else session.key, charged=charged,
                                **ledger)
        return answer

    def _refuse(self, spec: Restricted, session: Session | None, refusal: Refusal, *, charged: bool) -> None:
        self._ledger.append("refused", method=spec.name, code=refusal.code, charged=charged,
                            session=None if session is None else session.key, **refusal.ledger)
        raise refusal

    def _charge(self, spec: Restricted, session: Session | None) -> bool:
        """Hook: check and count the budget a request uses; return whether it is charged.

        Called after the session is known and before the request's fields are parsed, so
        a request that is refused later is charged like an answered one.  Raise
        :class:`Refusal` (e.g. ``"budget"``) to refuse without charging.
        """
        return False

    # -- sessions -----------------------------------------------------------------------

    def _issue(self, role: str, unit: str, **ledger: Any) -> tuple[str, Session]:
        """A new session: its token (returned once, stored only as a hash) and its state."""
        token = secrets.token_urlsafe(32)
        key = token_key(token)
        session = self._sessions[key] = Session(key, role, unit)
        self._ledger.append("session", session=key, role=role, unit=unit, **ledger)
        return token, session

    def _session(self, token: Any, method: str) -> Session:
        try:
            key = token_key(TOKEN.parse(token))
        except Refusal:
            key = None
        session = self._sessions.get(key) if key is not None else None
        if session is None or session.closed:
            self._ledger.append("refused", method=method, code="session", charged=False)
            raise Refusal("session")
        return session

    def _check_owner(self, credential: Any, method: str) -> None:
        ok = self._owner is not None and isinstance(credential, str) \
            and hmac.compare_digest(credential.encode(), self._owner.encode())
        if not ok:
            self._ledger.append("refused", method=method, code="owner", charged=False)
            raise Refusal("owner")

    @restricted(answers=Closed, owner=True)
    def close_session(self, session: Session) -> tuple[Closed, dict[str, Any]]:
        """The owner ends a session; its ledger entries stay."""
        session.closed = True
        return Closed(session.unit, session.n_queries), {"closed": session.key}

    def _restore(self) -> None:
        """Rebuild state from the ledger (call at the end of a subclass's ``__init__``)."""
        for entry in self._ledger.entries:
            event = entry.get("event")
            if event == "session":
                self._sessions[entry["session"]] = Session(entry["session"], entry["role"], entry["unit"])
            elif event == "close_session":
                self._sessions[entry["closed"]].closed = True
            self._replay(entry)

    def _replay(self, entry: Mapping[str, Any]) -> None:
        """Hook: apply one ledger entry to the subclass's state on restart."""
