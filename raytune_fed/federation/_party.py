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

* work is bounded before anything is trusted: the message's header (capped at
  ``max_header_bytes``) is parsed as plain JSON, and the method, the session, the
  owner's credential, the request's shape and its charge are checked on that header
  before a single array is decoded (:func:`~raytune_fed.federation._wire.decode_header`);
  a party with ``seconds_per_request`` stops decoding, validating and computing once
  the request has used that much CPU time on the thread answering it (:class:`CpuDeadline`,
  passed to handlers as :attr:`Party.deadline`);
* refusals carry one of the fixed texts in ``REFUSALS`` (never an exception's text or a
  value from the data); every other exception inside ``call`` becomes the fixed
  ``internal`` refusal, written to the ledger (charged if the request was, unless the
  party's own ledger write failed, e.g. its disk is full: that is the party's failure and
  the charge is undone, :meth:`Party._release`) and, with its traceback, to the party's
  log (``logging.getLogger("raytune_fed.federation")``), never to the caller;
* every answer and every charged refusal is written to the append-only ledger before
  the answer leaves; requests a party charges (:meth:`Party._admit`) are counted before
  their fields are parsed (the entry's ``charged`` is the number of answers charged), and
  their answer is kept in the ledger under the caller's request number, so a request
  sent again (a transport retrying across a restart) gets the recorded answer back and is
  not charged twice (a number reused for another method is refused);
* what charges nothing and answers nothing - a garbage message, an unknown session or
  method, a failed owner check, a refusal decided before any charge, a request sent
  again - is counted, not written line by line: the ledger gets an ``uncharged`` line
  for the 1st, 2nd, 4th, 8th, ... of each (code, method, credential) since the party
  started, so ``N`` such requests add ``O(log N)`` lines however long they go on (the
  ledger is the party's own disk; a bearer token must not be a way to fill it);
* sessions are issued by the party (``secrets.token_urlsafe``), stored as hashes, bound
  to the analyst credential that opened them, and closed only with the owner's
  credential (compared in constant time).

Requests of a ``SERIAL`` party (a site: budget and guard are shared by all sessions) are
answered under one lock, except the expensive middle of a handler that is a generator
(a site's ``query`` and ``final_evaluation``).  Such a request is *admitted* under the lock
(:meth:`Party._admit` charges it and it takes the next admission number), then its fields
are parsed and the handler runs up to its one ``yield`` without the lock (scoring: only the
request's own data and read-only party state), and the rest of the handler, the ledger line
and the reply's bookkeeping run under the lock again, **in admission order**: a request
waits until every request admitted before it is recorded.  So any number of threads (a
threaded Ray actor, the service's request threads) score at once, every answer is charged
exactly once, and the ledger lists charged requests in the order they were admitted; each
answer is the one a one-request-at-a-time party gives when the requests arrive in that
order (what depends on earlier answers - the guard, Thresholdout's over-threshold count -
is decided in the ordered part).  A request sent again while its first copy is still being
answered waits for that answer and gets it back, uncharged.  What a crash loses is what
the serial party lost: charges of requests whose answer was not yet in the ledger (never
given), so after a restart the ledger's answers are replayed and nothing else is charged.

The analyst credential of a request is the transport's: the name the network service
matched the bearer token to, or ``DEFAULT_ANALYST`` in-process and over Ray.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import secrets
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn, Protocol, cast

from raytune_fed.errors import ConfigError
from raytune_fed.federation import _wire
from raytune_fed.federation._fields import Field, Int, Refusal, Text, parse_fields
from raytune_fed.federation._ledger import SiteLedger
from raytune_fed.federation._records import Closed, from_wire, to_wire

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
REQUEST = Int(1, 1 << 62, optional=True)
DEFAULT_ANALYST = "analyst"
"""The analyst credential of requests that reach a party without one (in-process, Ray actor)."""
MAX_HEADER_BYTES = 1 << 20
log = logging.getLogger("raytune_fed.federation")


class CpuDeadline:
    """A request's CPU-time limit: ``check()`` raises :class:`TimeoutError` once the thread that
    answers the request has used ``seconds`` of CPU since it arrived (``None``: no limit).

    The clock is that thread's own (``time.thread_time``), not the process's: a party decodes,
    validates and scores a request on the thread that called :meth:`Party.call` (the service's
    request thread, the actor's), so other threads - other connections, TLS handshakes, Ray's
    own - cannot push a request over its limit, and traffic that is not the request charges it
    nothing.  Call ``check()`` on that thread.  Work handed to other threads is not counted, so a
    served party runs its BLAS and OpenMP pools on one thread (:func:`raytune_fed.serve.serve`), and
    so does a site actor (:class:`~raytune_fed.federation.SiteActor`); a request that scores while
    others do (see the module docstring) scores on its own thread, so its limit counts its own work.
    """

    def __init__(self, seconds: float | None) -> None:
        self.stop = None if seconds is None else time.thread_time() + seconds

    def check(self) -> None:
        if self.stop is not None and time.thread_time() > self.stop:
            raise TimeoutError("the request exceeded the party's time limit")


@dataclass(frozen=True)
class Restricted:
    """A declared restricted method: its request fields, answer type and access rules."""

    name: str
    request: Mapping[str, Field]
    answers: type
    session: bool = True
    owner: bool = False
    handler: Callable[..., Any] | None = field(repr=False, default=None)


class _Marked(Protocol):
    """A method marked by :func:`restricted`."""

    __restricted__: Restricted


def restricted(*, request: Mapping[str, Field] | None = None, answers: type, session: bool = True,
               owner: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a method of a :class:`Party` subclass as part of its protocol."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        cast(_Marked, fn).__restricted__ = Restricted(fn.__name__, dict(request or {}), answers, session, owner, fn)
        return fn

    return mark


@dataclass
class Session:
    """One session of a party: who it is for (role, unit, analyst credential) and what it has used."""

    key: str
    role: str
    unit: str
    analyst: str = DEFAULT_ANALYST
    n_queries: int = 0
    sealed: bool = False
    closed: bool = False


@dataclass(frozen=True)
class Request:
    """What a party knows of a request before decoding its arrays: the method, the caller's
    session and credential, the header's arguments (buffer references unresolved), the
    caller's request number and the request's CPU deadline."""

    spec: Restricted
    session: Session | None
    args: Mapping[str, Any]
    analyst: str
    number: int | None
    deadline: CpuDeadline


def token_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Party:
    """Base class: see the module docstring."""

    PROTOCOL: ClassVar[dict[str, Restricted]] = {}
    REFUSALS: ClassVar[dict[str, str]] = REFUSALS
    #: ``call`` answers under one lock (a site's budget and guard are shared by all sessions), but
    #: for the unlocked middle of a handler that yields (see the module docstring); a party whose
    #: sessions share no state sets this False and locks per session
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
        staged = [name for name, spec in protocol.items() if inspect.isgeneratorfunction(spec.handler)]
        if staged and not cls.SERIAL:
            raise TypeError(f"{cls.__name__}: handlers that yield ({', '.join(staged)}) release the party's lock "
                            f"while they score, so the party must be SERIAL")

    def __init__(self, name: str, *, ledger: str | None, owner_secret: str | None, max_request_bytes: int,
                 max_header_bytes: int = MAX_HEADER_BYTES, seconds_per_request: float | None = None) -> None:
        if owner_secret is not None and (not isinstance(owner_secret, str) or len(owner_secret) < 16):
            raise ConfigError("the owner credential must be a str of at least 16 characters")
        self.name = name
        self._ledger = SiteLedger(ledger)
        self._owner = owner_secret
        self._max_request_bytes = max_request_bytes
        self._max_header_bytes = max_header_bytes
        self._seconds = seconds_per_request
        self._sessions: dict[str, Session] = {}
        self._replies: dict[tuple[str, int], dict[str, Any]] = {}  # (session, request number) -> what was sent
        self._uncharged: dict[tuple[str, str | None, str], int] = {}  # (code, method, credential) -> count
        self._lock = threading.Lock()
        self._turns = threading.Condition(self._lock)  # see the module docstring: admission order
        self._admitted = 0  # admission numbers given to requests of handlers that yield
        self._recorded = 0  # the admission number whose turn it is to be recorded
        self._in_flight: set[tuple[str, int]] = set()  # (session, request number) admitted, not yet recorded
        self._pending: dict[str, int] = {}  # session -> its admitted requests of handlers that yield, not yet recorded
        self._current = threading.local()

    def stop(self) -> None:
        """Stop answering and release the ledger (a process ending releases it too); every later
        request is the fixed ``internal`` refusal."""
        self._ledger.close()

    @property
    def max_request_bytes(self) -> int:
        """The largest request message this party reads (a transport may refuse larger ones early)."""
        return self._max_request_bytes

    @property
    def deadline(self) -> CpuDeadline:
        """The CPU deadline of the request being answered (in a handler)."""
        return self._current.deadline

    # -- the one entry point ------------------------------------------------------------

    def call(self, message: bytes, *, analyst: str = DEFAULT_ANALYST) -> bytes:
        """Answer one wire message with one wire message (an answer or a fixed refusal).

        ``analyst`` is the credential the transport authenticated (see the module docstring).
        Nothing raised inside reaches the caller: every failure is a fixed refusal.
        """
        with self._lock if self.SERIAL else nullcontext():
            try:
                return _wire.encode({"answer": to_wire(self._handle(message, analyst))})
            except Refusal as refusal:
                code = refusal.code if refusal.code in self.REFUSALS else "internal"
            except Exception:  # noqa: BLE001 - e.g. the ledger's disk is full: still a fixed refusal
                log.exception("party %r: a request failed outside its handler", self.name)
                code = "internal"
            return _wire.encode({"refused": {"code": code, "message": self.REFUSALS[code]}})

    def _handle(self, message: bytes, analyst: str) -> Any:
        deadline = CpuDeadline(self._seconds)
        self._current.deadline, self._current.analyst = deadline, analyst
        known: dict[str, Any] = {"spec": None, "session": None, "charged": 0, "number": None, "request": None}
        try:
            return self._serve(message, analyst, deadline, known)
        except Refusal:
            raise
        except Exception as exc:  # never let an exception's text (which may quote data) out
            log.exception("party %r: request %s failed", self.name, getattr(known["spec"], "name", None))
            refusal = Refusal("internal", error=type(exc).__name__)
            if known["spec"] is None:
                self._note("internal", None)
                raise refusal from None
            charged = known["charged"]
            if charged and isinstance(exc, OSError):  # the party's own failure (e.g. its disk is full): nothing
                self._release(known["request"], charged)  # was answered, so the caller is not charged for it
                charged = 0
            self._refuse(known["spec"], known["session"], refusal, charged=charged, number=known["number"])

    def _serve(self, message: bytes, analyst: str, deadline: CpuDeadline, known: dict[str, Any]) -> Any:
        try:
            header, payload = _wire.decode_header(message, max_bytes=self._max_request_bytes,
                                                  max_header=self._max_header_bytes)
        except _wire.WireError:
            self._note("malformed", None)
            raise Refusal("malformed") from None
        if not isinstance(header, dict) or set(header) != {"method", "args"} or not isinstance(header["args"], dict):
            self._note("malformed", None)
            raise Refusal("malformed")
        spec = self.PROTOCOL.get(header["method"]) if isinstance(header["method"], str) else None
        if spec is None:
            self._note("unknown_method", None)
            raise Refusal("unknown_method")
        args = dict(header["args"])
        session = None
        if spec.session:
            session = self._session(args.pop("session", None), spec.name, analyst)
        if spec.owner:
            self._check_owner(args.pop("owner", None), spec.name)
        known.update(spec=spec, session=session)
        try:
            number = REQUEST.parse(args.pop("request", None))
        except Refusal:
            self._refuse(spec, session, Refusal("malformed"), charged=0)
        if set(args) - set(spec.request):
            self._refuse(spec, session, Refusal("malformed"), charged=0)
        while session is not None and number is not None and (session.key, number) in self._in_flight:
            self._turns.wait()  # the same request is being answered now: its answer is replayed below
            if session.closed:  # closed meanwhile: as for any request of a closed session
                self._note("session", spec.name)
                raise Refusal("session")
        if session is not None and number is not None and (session.key, number) in self._replies:
            return self._replay_reply(spec, session, number)
        request = Request(spec, session, args, analyst, number, deadline)
        try:
            charged = self._admit(request)
        except Refusal as refusal:
            self._refuse(spec, session, refusal, charged=0)
        known.update(charged=charged, number=number, request=request)
        if spec.handler is None:  # restricted() always sets it
            raise RuntimeError(f"restricted method {spec.name!r} has no handler")
        if not inspect.isgeneratorfunction(spec.handler):
            return self._answer(spec, session, charged, number, lambda: self._run(spec, session, args, payload))
        ticket, self._admitted = self._admitted, self._admitted + 1
        kept = None if session is None or number is None else (session.key, number)
        if kept is not None:
            self._in_flight.add(kept)
        if session is not None:
            self._pending[session.key] = self._pending.get(session.key, 0) + 1
        try:
            staged = self._unlocked(ticket, spec, session, args, payload)
            return self._answer(spec, session, charged, number, lambda: _resume(spec, staged))
        finally:  # the lock is held again here, and it is this request's turn, until the reply leaves call()
            self._recorded += 1
            if kept is not None:
                self._in_flight.discard(kept)
            if session is not None:
                self._pending[session.key] -= 1
                if not self._pending[session.key]:
                    del self._pending[session.key]
            self._turns.notify_all()

    def _run(self, spec: Restricted, session: Session | None, args: Mapping[str, Any], payload: Any) -> Any:
        """Parse the request's fields and start its handler: its result, or (a handler that yields) the
        handler paused at its ``yield``."""
        resolved = _wire.resolve(args, payload)
        kwargs = parse_fields(spec.request, resolved)
        self.deadline.check()
        result = cast(Callable[..., Any], spec.handler)(self, session, **kwargs)
        if not inspect.isgenerator(result):
            return result
        try:
            next(result)
        except StopIteration as stop:  # returned (or refused, raising) before its yield
            return _Done(stop.value)
        return result

    def _unlocked(self, ticket: int, spec: Restricted, session: Session | None, args: Mapping[str, Any],
                  payload: Any) -> Any:
        """Run an admitted request's parsing and scoring without the party's lock; come back holding it when
        every request admitted before it is recorded.  What the work raised is handed on, to be refused in turn."""
        self._lock.release()
        try:
            try:
                return self._run(spec, session, args, payload)
            except Exception as exc:  # noqa: BLE001 - refused (and charged) below, in admission order
                return _Raised(exc)
        finally:
            self._take_turn(ticket)

    def _take_turn(self, ticket: int) -> None:
        """Hold the party's lock again and wait until every request admitted before ``ticket`` is recorded.

        Returns only then, even if an interrupt (Ctrl-C on an in-process party) arrives while it waits: the
        caller's bookkeeping must run holding the lock and in its turn, or every later request would wait
        for this one's turn forever.  The interrupt is raised once the turn is taken."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._lock.acquire()
                break
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in turn
                interrupted = interrupted or exc
        while True:
            try:
                while self._recorded != ticket:
                    self._turns.wait()
                break
            except BaseException as exc:  # noqa: BLE001 - Condition.wait takes the lock back before it raises
                interrupted = interrupted or exc
        if interrupted is not None:
            raise interrupted

    def _answer(self, spec: Restricted, session: Session | None, charged: int, number: int | None,
                compute: Callable[[], Any]) -> Any:
        """Finish a charged (or free) request under the lock: its handler's result, checked and written to
        the ledger, or its refusal."""
        try:
            answer, ledger = compute()
        except _wire.WireError:
            self._refuse(spec, session, Refusal("malformed"), charged=charged, number=number)
        except TimeoutError:
            self._refuse(spec, session, Refusal("timeout"), charged=charged, number=number)
        except Refusal as refusal:
            self._refuse(spec, session, refusal, charged=charged, number=number)
        if type(answer) is not spec.answers:
            self._refuse(spec, session, Refusal("internal", error="answer type"), charged=charged, number=number)
        if ledger is not None:
            extra: dict[str, Any] = {}
            if charged:
                extra = {"request": number, "reply": to_wire(answer)}
            self._ledger.append(spec.name, session=None if session is None else session.key, charged=charged,
                                **extra, **ledger)
            if charged and number is not None:  # kept only once the ledger holds it
                if session is None:  # a charged request always comes with a session
                    raise RuntimeError(f"{spec.name!r} was charged without a session")
                self._replies[session.key, number] = {"method": spec.name, "reply": extra["reply"]}
        return answer

    def _refuse(self, spec: Restricted, session: Session | None, refusal: Refusal, *, charged: int,
                number: int | None = None) -> NoReturn:
        if not charged:
            self._note(refusal.code, spec.name)
            raise refusal
        self._ledger.append("refused", method=spec.name, code=refusal.code, charged=charged,
                            session=None if session is None else session.key, request=number, **refusal.ledger)
        if number is not None and session is not None:  # kept only once the ledger holds it
            self._replies[session.key, number] = {"method": spec.name, "code": refusal.code}
        raise refusal

    def _note(self, code: str, method: str | None) -> None:
        """Count a request that charged nothing and was answered with nothing new; write an
        ``uncharged`` ledger line at the 1st, 2nd, 4th, ... of each (code, method, credential)."""
        key = (code, method, self.caller)
        n = self._uncharged[key] = self._uncharged.get(key, 0) + 1
        if n & (n - 1) == 0:
            self._ledger.append("uncharged", code=code, method=method, analyst=key[2], count=n, sync=False)

    def _replay_reply(self, spec: Restricted, session: Session, number: int) -> Any:
        """A request sent again: what was sent the first time, never charged again (a number
        first used by another method is refused, uncharged)."""
        kept = self._replies[session.key, number]
        if kept.get("method", spec.name) != spec.name:
            self._refuse(spec, session, Refusal("malformed"), charged=0)
        self._note("replayed", spec.name)
        if "code" in kept:
            raise Refusal(kept["code"])
        return from_wire(kept["reply"])

    def _admit(self, request: Request) -> int:
        """Hook: check and count what a request uses; return how many answers it is charged.

        Called with the header's arguments after the session is known and before any array
        is decoded or field parsed, so a request refused later is charged like an answered
        one.  Raise :class:`Refusal` (e.g. ``"budget"``) to refuse without charging.  The
        default keeps the older hook: :meth:`_charge` says whether it costs one answer.
        """
        return int(bool(self._charge(request.spec, request.session)))

    def _charge(self, spec: Restricted, session: Session | None) -> bool:
        """Hook (see :meth:`_admit`): whether a request is charged."""
        return False

    def _release(self, request: Request, charged: int) -> None:
        """Hook: undo what :meth:`_admit` counted for ``request`` (``charged`` answers), when the party
        itself failed before answering it (its ledger could not be written)."""

    # -- sessions -----------------------------------------------------------------------

    def _issue(self, role: str, unit: str, analyst: str = DEFAULT_ANALYST, **ledger: Any) -> tuple[str, Session]:
        """A new session: its token (returned once, stored only as a hash) and its state."""
        token = secrets.token_urlsafe(32)
        key = token_key(token)
        session = self._sessions[key] = Session(key, role, unit, analyst)
        self._ledger.append("session", session=key, role=role, unit=unit, analyst=analyst, **ledger)
        return token, session

    @property
    def caller(self) -> str:
        """The analyst credential of the request being answered (in a handler)."""
        return getattr(self._current, "analyst", DEFAULT_ANALYST)

    def _session(self, token: Any, method: str, analyst: str) -> Session:
        try:
            key = token_key(TOKEN.parse(token))
        except Refusal:
            key = None
        session = self._sessions.get(key) if key is not None else None
        if session is None or session.closed or session.analyst != analyst:
            self._note("session", method)
            raise Refusal("session")
        return session

    def _check_owner(self, credential: Any, method: str) -> None:
        ok = self._owner is not None and isinstance(credential, str) \
            and hmac.compare_digest(credential.encode(), self._owner.encode())
        if not ok:
            self._note("owner", method)
            raise Refusal("owner")

    @restricted(answers=Closed, owner=True)
    def close_session(self, session: Session) -> tuple[Closed, dict[str, Any]]:
        """The owner ends a session; its ledger entries stay.

        Requests of the session that are being scored (admitted before the close) are recorded first: no new
        one is admitted once ``closed`` is set, and the close waits for those, so the ledger never names the
        session after its ``close_session`` line (a restart would refuse that ledger)."""
        session.closed = True
        while self._pending.get(session.key):
            self._turns.wait()
        return Closed(session.unit, session.n_queries), {"closed": session.key}

    def _restore(self) -> None:
        """Rebuild state from the ledger (call at the end of a subclass's ``__init__``)."""
        for entry in self._ledger.entries:
            event = entry.get("event")
            if event == "session":
                self._sessions[entry["session"]] = Session(entry["session"], entry["role"], entry["unit"],
                                                           entry.get("analyst", DEFAULT_ANALYST))
            elif event == "close_session":
                self._sessions[entry["closed"]].closed = True
            number, key = entry.get("request"), entry.get("session")
            if entry.get("charged") and number is not None and key is not None:
                method = entry.get("method") if event == "refused" else event
                self._replies[key, number] = {"method": method, "code": entry["code"]} if event == "refused" \
                    else {"method": method, "reply": entry["reply"]}
            self._replay(entry)

    def _replay(self, entry: Mapping[str, Any]) -> None:
        """Hook: apply one ledger entry to the subclass's state on restart."""


@dataclass(frozen=True)
class _Done:
    """A handler that yields, finished (or refused) before its ``yield``: its result."""

    value: Any


@dataclass(frozen=True)
class _Raised:
    """What a request's unlocked work raised, to be refused under the lock in admission order."""

    exc: Exception


def _resume(spec: Restricted, staged: Any) -> Any:
    """The result of a request's unlocked work: a handler paused at its ``yield`` runs to its end."""
    if isinstance(staged, _Raised):
        raise staged.exc
    if isinstance(staged, _Done):
        return staged.value
    handler = cast(Generator[None, None, Any], staged)
    try:
        next(handler)
    except StopIteration as stop:
        return stop.value
    handler.close()
    raise RuntimeError(f"restricted method {spec.name!r} yields more than once")
