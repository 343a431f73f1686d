"""The analyst's side of a restricted site: one interface, wherever the site runs.

:class:`SiteClient` wraps a :class:`~raytune_fed.federation.Transport`: a
:class:`~raytune_fed.federation.Site` in this process, a Ray actor started by
:func:`~raytune_fed.federation.remote_site`, or any other transport, such as the HTTP(S) one
to a site served by ``raytune-fed site serve`` (:func:`raytune_fed.serve.service_client`).  It
sends typed requests and gets back records; a refusal becomes a
:class:`~raytune_fed.errors.QueryRefusedError` (``BudgetExhaustedError`` and
``SealedError`` for the budget and one-shot answers) whose text is the client's own fixed
text for the site's refusal code.  Every query and final evaluation carries a fresh
request number, so a message sent again (Ray retrying a call across a site actor's
restart, or the client resending it) is answered from the site's ledger, never charged
twice.  :meth:`SiteClient.open_session` returns a
:class:`SiteSession`; :func:`query_all` and :func:`final_all` send one model record to
several sessions and wait for all answers together.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raytune_fed.errors import BoundaryViolationError, BudgetExhaustedError, ConfigError, QueryRefusedError, SealedError
from raytune_fed.federation import _wire
from raytune_fed.federation._fields import model_to_wire
from raytune_fed.federation._party import REFUSALS, Party
from raytune_fed.federation._records import (
    Closed,
    FinalLosses,
    Ledger,
    Loss,
    ScheduleReceipt,
    SessionTicket,
    SiteStatus,
    from_wire,
)
from raytune_fed.federation._schedule import Schedule, Unit
from raytune_fed.federation._transports import ActorTransport, LocalTransport, Transport
from raytune_fed.models import ModelRecord

_ERRORS = {"budget": BudgetExhaustedError, "sealed": SealedError}


def answer_of(site: str, method: str, reply: bytes, want: type, *, kind: str = "site") -> Any:
    """The record of type ``want`` in a party's ``reply``; a refusal is raised as a
    :class:`QueryRefusedError` with the client's own fixed text for its code."""
    try:
        data = _wire.decode(reply, max_bytes=1 << 30)
    except _wire.WireError:
        raise BoundaryViolationError(f"{kind} {site!r} answered {method} with a malformed message") from None
    if isinstance(data, dict) and set(data) == {"refused"} and isinstance(data["refused"], dict):
        code = data["refused"].get("code")
        code = code if code in REFUSALS else "internal"
        error = _ERRORS.get(code, QueryRefusedError)(f"{kind} {site!r} refused {method}: {REFUSALS[code]}")
        error.code = code
        raise error
    if not isinstance(data, dict) or set(data) != {"answer"}:
        raise BoundaryViolationError(f"{kind} {site!r} answered {method} with neither a record nor a refusal")
    record = from_wire(data["answer"])
    if type(record) is not want:
        raise BoundaryViolationError(f"{kind} {site!r} answered {method} with a {type(record).__name__}")
    return record


def transport_of(target: Any) -> Any:
    """The transport to ``target``: a :class:`Party` here, an actor whose method is ``call``, or a
    :class:`Transport` itself (``None`` for anything else)."""
    if isinstance(target, Party):
        return LocalTransport(target)
    if hasattr(target, "call") and hasattr(target.call, "remote"):
        return ActorTransport(target)
    if isinstance(target, Transport):
        return target
    return None


class SiteClient:
    """A handle on one site through one of three transports (see the module docstring)."""

    def __init__(self, target: Any, *, name: str | None = None) -> None:
        self._transport = transport_of(target)
        if self._transport is None:
            raise ConfigError(f"a SiteClient needs a Site, a site actor or a transport (send, submit, collect; e.g. "
                              f"raytune_fed.serve.HttpTransport(url, token)), got {type(target).__name__}")
        self.name = name or getattr(target, "name", None) or "site"

    @property
    def transport(self) -> Transport:
        """The transport this client sends through."""
        return self._transport

    @property
    def kind(self) -> str:
        """``"local"``, ``"actor"`` or ``"service"``."""
        return self._transport.kind

    def _message(self, method: str, args: Mapping[str, Any]) -> bytes:
        return _wire.encode({"method": method, "args": dict(args)})

    def _submit(self, method: str, args: Mapping[str, Any]) -> Any:
        return self._transport.submit(self._message(method, args))

    def _request(self, method: str, args: Mapping[str, Any], want: type) -> Any:
        (reply,) = self._transport.collect([self._submit(method, args)])
        return answer_of(self.name, method, reply, want)

    def declare_schedule(self, schedule: Schedule) -> ScheduleReceipt:
        """Declare the grid's units to this site (accepted once; the same again is fine)."""
        return self._request("declare_schedule", {"units": schedule.as_list()}, ScheduleReceipt)

    def open_session(self, unit: Unit | str, role: str) -> SiteSession:
        """A new session for ``unit`` in ``role``; the site issues the token."""
        key = unit.key if isinstance(unit, Unit) else unit
        ticket = self._request("open_session", {"unit": key, "role": role}, SessionTicket)
        return SiteSession(self, ticket)

    def close_session(self, token: str, *, owner: str) -> Closed:
        """End the session ``token`` (needs the site owner's credential)."""
        return self._request("close_session", {"session": token, "owner": owner}, Closed)

    def call_raw(self, message: bytes) -> bytes:
        """Send one already-encoded message (for tests of the boundary itself)."""
        (reply,) = self._transport.collect([self._transport.submit(message)])
        return reply


@dataclass(frozen=True)
class SiteSession:
    """One open session: the client and the site's ticket (token, role, unit, rows)."""

    client: SiteClient
    ticket: SessionTicket

    @property
    def n_rows(self) -> int:
        return self.ticket.n_rows

    @property
    def token(self) -> str:
        return self.ticket.token

    def _args(self, **args: Any) -> dict[str, Any]:
        return {"session": self.ticket.token, **args}

    def _charged_args(self, **args: Any) -> dict[str, Any]:
        """Arguments of a charged request: a fresh request number (random, so two handles on
        one session never reuse one) makes resending the message safe."""
        return {"session": self.ticket.token, "request": secrets.randbits(62) + 1, **args}

    def query(self, model: ModelRecord, *, mechanism: str = "exact", train_loss: float | None = None) -> Loss:
        return query_all([self], model, mechanism=mechanism, train_loss=train_loss)[0]

    def final_evaluation(self, models: Sequence[ModelRecord]) -> FinalLosses:
        return final_all([self], models)[0]

    def status(self) -> SiteStatus:
        return self.client._request("status", self._args(), SiteStatus)

    def ledger(self) -> Ledger:
        return self.client._request("ledger", self._args(), Ledger)


def _check_models(models: Sequence[Any]) -> list[dict[str, Any]]:
    for m in models:
        if type(m) is not ModelRecord:
            raise ConfigError(f"sites take ModelRecord (see Learner.encode), got {type(m).__name__}")
    return [model_to_wire(m) for m in models]


def _fan_out(sessions: Sequence[SiteSession], method: str, args: Mapping[str, Any], want: type,
             tolerate: frozenset[str] = frozenset()) -> list[Any]:
    groups: dict[type, list[int]] = {}
    pending: list[Any] = []
    for i, s in enumerate(sessions):
        pending.append(s.client._submit(method, s._charged_args(**args)))
        groups.setdefault(type(s.client.transport), []).append(i)
    replies: list[Any] = [None] * len(sessions)
    for members in groups.values():
        collect = sessions[members[0]].client.transport.collect
        for i, reply in zip(members, collect([pending[i] for i in members])):
            replies[i] = reply
    out: list[Any] = []
    for s, r in zip(sessions, replies):
        try:
            out.append(answer_of(s.client.name, method, r, want))
        except QueryRefusedError as exc:
            if exc.code not in tolerate:
                raise
            out.append(exc)
    return out


def query_all(sessions: Sequence[SiteSession], model: ModelRecord, *, mechanism: str = "exact",
              train_loss: float | None = None, tolerate: Sequence[str] = ()) -> list[Any]:
    """Ask every curator session for the loss of ``model``; all requests leave before any answer is awaited.

    A refusal raises, unless its code is in ``tolerate`` (for example ``("guard",)``):
    then that session's entry is the :class:`~raytune_fed.errors.QueryRefusedError`
    (its ``code`` says why) and the other sessions' answers are kept.
    """
    unknown = sorted(set(tolerate) - set(REFUSALS))
    if unknown:
        raise ConfigError(f"unknown refusal codes {unknown}; known: {sorted(REFUSALS)}")
    (wire,) = _check_models([model])
    args: dict[str, Any] = {"model": wire, "mechanism": mechanism}
    if train_loss is not None:
        args["train_loss"] = float(train_loss)
    return _fan_out(sessions, "query", args, Loss, frozenset(tolerate))


def final_all(sessions: Sequence[SiteSession], models: Sequence[ModelRecord]) -> list[FinalLosses]:
    """Ask every session for its one final evaluation of ``models``."""
    return _fan_out(sessions, "final_evaluation", {"models": _check_models(list(models))}, FinalLosses)
