"""The active party's handle on one passive party's session: in-process, a Ray actor or a service.

:class:`PassiveClient` implements the SecureBoost
:class:`~raytune_fed.models.secureboost.PassiveEndpoint` protocol over the wire: each
method is one message to :meth:`PassiveParty.call <raytune_fed.federation.Party.call>`
through a transport (a :class:`~raytune_fed.federation.LocalTransport` for a
party in this process, an ``ActorTransport`` for a party actor, an
:class:`~raytune_fed.serve.HttpTransport` for a served party), and each answer is a
record, unwrapped into the plain values the estimator uses.  So the estimator trains the
same way wherever the passive party runs.  A client holds one session token (issued by
the party to its owner with :meth:`PassiveClient.admit`) and never an owner credential.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from raytune_fed.crypto import Ciphertexts
from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.federation import _wire
from raytune_fed.federation._clients import answer_of, transport_of
from raytune_fed.federation._records import Closed, SessionTicket
from raytune_fed.federation.parties._records import (
    EncryptedHistograms,
    OpTally,
    PartyInfo,
    RouteBits,
    SplitRows,
    ViewRecord,
)
from raytune_fed.models.secureboost import NodeQuery


def _transport(target: Any) -> Any:
    transport = transport_of(target)
    if transport is None:
        raise ConfigError(f"a PassiveClient needs a PassiveParty, a party actor or a transport, "
                          f"got {type(target).__name__}")
    return transport


_LIMIT_HINTS: dict[str | None, str] = {  # keyed by a refusal's code (None: a refusal without one)
    "limit": "the party's owner caps the trees of a training and of one request (party serve --max-trees, "
             "--max-trees-per-request): fewer federated trees or classes fit",
    "timeout": "the request used more CPU time than the party's owner allows (party serve --seconds-per-request); "
               "the session is closed",
}


def _query(q: NodeQuery) -> dict[str, Any]:
    out: dict[str, Any] = {"tree": int(q.tree), "node": int(q.node), "parent": int(q.parent), "block": int(q.block),
                           "sibling": int(q.sibling)}
    if q.direct:
        if q.gh is None:  # a direct query carries its rows' encrypted gradients
            raise RuntimeError(f"direct node query {q.node} of tree {q.tree} has no encrypted gradients")
        out["rows"] = np.ascontiguousarray(q.rows, dtype=np.int64)
        out["gh"] = {"scheme": q.gh.scheme, "blobs": list(q.gh.blobs)}
    return out


class PassiveClient:
    """Session ``session`` (the party-issued token) of ``target``: a :class:`PassiveParty`,
    its actor (:func:`remote_party`) or a transport to it."""

    def __init__(self, target: Any, session: str, *, name: str = "passive") -> None:
        self._transport = _transport(target)
        self.session = session
        self.name = getattr(target, "name", None) or name
        self.n_rows_: int | None = None

    @classmethod
    def admit(cls, target: Any, *, owner: str, unit: str) -> PassiveClient:
        """The party's owner opens a session for one training (``unit`` names it); a client of it."""
        client = cls(target, "")
        ticket = client._request("new_session", {"owner": owner, "unit": unit}, SessionTicket, session=False)
        client.session = ticket.token
        return client

    @property
    def kind(self) -> str:
        return self._transport.kind

    def _request(self, method: str, args: Mapping[str, Any], want: type, *, session: bool = True) -> Any:
        message = _wire.encode({"method": method, "args": {**args, "session": self.session} if session else args})
        (reply,) = self._transport.collect([self._transport.submit(message)])
        return answer_of(self.name, method, reply, want, kind="party")

    def info(self) -> PartyInfo:
        return self._request("info", {}, PartyInfo)

    # ------------------------------------------------------------------ PassiveEndpoint
    def open_session(self, public_context: bytes, n_bins: int, train_rows: np.ndarray) -> int:
        info = self._request("open_session", {"context": public_context, "n_bins": int(n_bins),
                                              "train_rows": np.ascontiguousarray(train_rows, dtype=np.int64)},
                             PartyInfo)
        self.n_rows_ = info.n_rows
        return info.n_masks

    def histograms(self, queries: Sequence[NodeQuery]) -> list[Ciphertexts]:
        try:
            answer = self._request("histograms", {"queries": [_query(q) for q in queries]}, EncryptedHistograms)
        except QueryRefusedError as exc:
            hint = _LIMIT_HINTS.get(getattr(exc, "code", None))
            if hint is None:
                raise
            error = type(exc)(f"{exc} ({hint})")
            error.code = exc.code
            raise error from None
        return list(answer.payloads)

    def splits(self, picks: Sequence[tuple[int, int, int]]) -> list[np.ndarray]:
        p = np.asarray([(int(t), int(n), int(m)) for t, n, m in picks], dtype=np.int64).reshape(-1, 3)
        answer = self._request("splits", {"picks": p}, SplitRows)
        return [r.array() for r in answer.lefts]

    def route(self, keys: Sequence[tuple[int, int]], rows: np.ndarray) -> np.ndarray:
        k = np.asarray([(int(t), int(n)) for t, n in keys], dtype=np.int64).reshape(-1, 2)
        return self._request("route", {"keys": k, "rows": np.ascontiguousarray(rows, dtype=np.int64)},
                             RouteBits).array()

    def op_counts(self) -> dict[str, int]:
        return self._request("op_counts", {}, OpTally).as_dict()

    # ------------------------------------------------------------------ session end, simulation
    def close(self) -> Closed:
        """End this session (its token answers nothing more)."""
        return self._request("close", {}, Closed)

    def view(self, *, owner: str) -> ViewRecord:
        """The party's view of this session (the attack simulation's input; needs the owner's credential)."""
        return self._request("view", {"owner": owner}, ViewRecord)
