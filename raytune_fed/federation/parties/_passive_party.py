"""A passive party: its feature columns and, per training session, a public context only.

It is a restricted :class:`~raytune_fed.federation.Party`: reached only through
:meth:`~raytune_fed.federation.Party.call` (wire bytes in and out), its protocol is the
:func:`~raytune_fed.federation.restricted` methods below, each with typed request fields,
and it answers with the records of :mod:`raytune_fed.federation.parties._records`
(ciphertexts and row ids as bytes).  A training goes like this:

* the party's owner admits it: ``new_session`` (owner credential) issues a token, stored
  only as a hash, and writes it to the append-only ledger;
* the active party, holding the token, sends ``open_session`` once (the public context,
  ``n_bins`` up to the owner's ``max_bins``, its training row ids; a context holding a
  secret key is refused), then ``histograms`` / ``splits`` / ``route`` / ``op_counts`` and
  finally ``close``; the party bins all its rows and answers only the nodes and splits the
  protocol derives (:class:`~raytune_fed.models.secureboost.PassiveWorker`);
* ``view`` - what the party received, the attack simulation's input - is owner-only: the
  simulation plays the passive party's owner, the active party cannot ask for it.

Refusals are the base's fixed texts.  On restart the party rebuilds its sessions from the
ledger (a file on its disk when ``ledger`` names one) and treats them all as closed: a
token it issued before the restart answers nothing.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from raytune_fed._checks import check_float, check_int
from raytune_fed.crypto import SCHEMES, Ciphertexts
from raytune_fed.errors import ConfigError
from raytune_fed.federation._fields import Bytes, Int, IntArray, ListOf, Refusal, Struct, Text
from raytune_fed.federation._party import Party, Session, restricted
from raytune_fed.federation._records import Closed, SessionTicket
from raytune_fed.federation.parties._records import (
    EncryptedHistograms,
    OpTally,
    PartyInfo,
    RouteBits,
    RowIds,
    SplitRows,
    TreeCells,
    ViewRecord,
)
from raytune_fed.models.secureboost import NodeQuery, PassiveWorker
from raytune_fed.random import derive, seed_int

ROLE = "active"
MAX_ROWS = 1 << 28          # row ids per request
MAX_TREE = 1 << 20          # tree ids
MAX_NODE = 1 << 14          # node ids (depth <= 12: heap ids below 2^13)
MAX_NODES = 1 << 13         # queries of one level
MAX_BINS = 256
MAX_MASK = 1 << 24          # a candidate split's place in a tree's order
MAX_CONTEXT_BYTES = 1 << 28
MAX_CIPHERTEXT_BYTES = 1 << 28
MAX_BLOBS = 1 << 20
# What an honest training asks of a session, and the defaults sized from it.  A training is one
# session (the CMOSB workflow admits one per trial: ``workflows/cmosb/_trial.py``), and it opens one
# tree per federated round and class: CMOSB's space allows at most 16 federated trees (the
# VF2Boost setting 20), its tasks at most 11 classes (Sensorless; Synthetic2 10), so at most 220
# trees a session.  A request answers one level of one round's trees, so it names at most one tree
# per class.  The defaults leave room for other tasks (4x the trees, 256 classes) and bound what one
# session holds (a tree's candidate order and nodes) and what one request computes (every tree of a
# request sums at most all the party's rows, so 256 trees are 256 times the largest honest root).
MAX_TREES_PER_SESSION = 1024
MAX_TREES_PER_REQUEST = 256
SECONDS_PER_REQUEST = 600.0  # CPU seconds on the answering thread; a backstop above the work the caps allow

ROWS = IntArray(max_len=MAX_ROWS, high=MAX_ROWS, increasing=True)
CIPHERTEXTS = Struct({"scheme": Text(max_len=16, choices=SCHEMES),
                      "blobs": ListOf(Bytes(max_size=MAX_CIPHERTEXT_BYTES), max_len=MAX_BLOBS)})
QUERY = Struct({"tree": Int(0, MAX_TREE), "node": Int(0, MAX_NODE), "parent": Int(-1, MAX_NODE),
                "rows": replace(ROWS, optional=True), "gh": replace(CIPHERTEXTS, optional=True),
                "block": Int(0, MAX_ROWS), "sibling": Int(-1, MAX_NODE)})


def seed_of_owner(owner_secret: str) -> int:
    """A party seed drawn from its owner credential (``party serve`` without ``--seed``): secret, and the
    same after a restart."""
    return int.from_bytes(hashlib.sha256(b"raytune-fed party seed\0" + owner_secret.encode()).digest(), "little")


def privacy_seed(seed: int, owner_secret: str | None) -> np.random.SeedSequence:
    """The seed of a party's moved bins: its seed and, when it has one, all 256 bits of its owner credential's
    hash, so whoever knows the code and the seed but not the credential cannot undo the moves."""
    digest = hashlib.sha256(owner_secret.encode()).digest() if owner_secret is not None else b""
    words = [int.from_bytes(digest[i:i + 8], "little") for i in range(0, len(digest), 8)]
    return derive(seed, "bin privacy", *words)


def _one_at_a_time(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``handler`` under its session's lock (sessions of one party run concurrently)."""

    @functools.wraps(handler)
    def run(self: PassiveParty, session: Session, **kwargs: Any) -> Any:
        with self._serial(session):
            return handler(self, session, **kwargs)

    return run


class PassiveParty(Party):
    """Feature block ``features`` (one row per aligned instance id) of a passive party.

    ``owner_secret`` is the credential of the party's owner (who admits trainings and may
    read a session's view); ``max_sessions`` caps the sessions it ever issues;
    ``max_bins`` caps the bins per feature a session may ask for (the party bins all its
    rows, with every cut point on its grid of ``max_bins`` quantile bins, so no sequence of
    sessions learns a finer partition of a feature than that grid).  ``bin_privacy`` (an
    ``epsilon`` per grid bin, None: off) moves every row's grid bin once, for the party's
    lifetime, by the geometric mechanism, and every answer uses the moved bins
    (:class:`~raytune_fed.models.secureboost.PassiveWorker`): whatever an active party reads
    from the answers, over any number of sessions, it learns a value only through its moved
    bin.  The moves are drawn from ``seed`` and the owner credential (:func:`privacy_seed`):
    keep both for the party's lifetime (new ones draw the moves again, a second look).  Sessions
    share nothing but the rows, so requests of different sessions run concurrently (an
    actor with ``max_concurrency > 1``) and each session's requests one at a time.

    What one training may cost the party: ``max_trees`` trees a session, ``max_trees_per_request``
    trees named in one ``histograms`` request, ``seconds_per_request`` CPU seconds per request
    and ``max_request_bytes`` per message (the defaults and why: ``MAX_TREES_PER_SESSION``).
    Beyond them the request is refused (``limit``) before any sum is computed; a request that
    runs out of CPU time is refused (``timeout``) and ends its session, whose state it left
    half-built.
    """

    SERIAL = False

    def __init__(self, features: Any, *, name: str = "passive", seed: int = 0, max_sessions: int | None = None,
                 ledger: str | None = None, owner_secret: str | None = None, max_bins: int = 32,
                 bin_privacy: float | None = 1.0, max_request_bytes: int = 1 << 30,
                 max_trees: int = MAX_TREES_PER_SESSION, max_trees_per_request: int = MAX_TREES_PER_REQUEST,
                 seconds_per_request: float | None = SECONDS_PER_REQUEST) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a party needs a non-empty name, got {name!r}")
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1 or not np.all(np.isfinite(X)):
            raise ConfigError(f"party {name!r}: features must be a finite 2-D array with >= 2 rows and >= 1 column, "
                              f"got shape {X.shape}")
        check_int(f"party {name!r}: max_bins", max_bins, 2, MAX_BINS)
        if bin_privacy is not None and not check_float(f"party {name!r}: bin_privacy", bin_privacy, 0.0) > 0:
            raise ConfigError(f"party {name!r}: bin_privacy must be > 0 (None switches it off), got {bin_privacy!r}")
        self._bin_privacy = None if bin_privacy is None else float(bin_privacy)
        check_int(f"party {name!r}: max_request_bytes", max_request_bytes, 1 << 10)
        self._max_trees = check_int(f"party {name!r}: max_trees", max_trees, 1, MAX_TREE + 1)
        self._max_trees_per_request = check_int(f"party {name!r}: max_trees_per_request", max_trees_per_request,
                                                1, MAX_NODES)
        if seconds_per_request is not None and not check_float(f"party {name!r}: seconds_per_request",
                                                               seconds_per_request, 0.0) > 0:
            raise ConfigError(f"party {name!r}: seconds_per_request must be > 0 (None: no limit), "
                              f"got {seconds_per_request!r}")
        super().__init__(name, ledger=ledger, owner_secret=owner_secret, max_request_bytes=max_request_bytes,
                         seconds_per_request=seconds_per_request)
        X.setflags(write=False)
        self._X, self._seed, self._max_sessions, self._max_bins = X, seed, max_sessions, int(max_bins)
        self._workers: dict[str, PassiveWorker] = {}
        self._n_masks: dict[str, int] = {}
        self._session_locks: dict[str, threading.Lock] = {}
        self._restore()
        for session in self._sessions.values():  # a worker's state does not survive a restart
            session.closed = True

    @property
    def n_rows(self) -> int:
        return int(self._X.shape[0])

    def _info(self, n_masks: int = 0) -> PartyInfo:
        return PartyInfo(self.name, self.n_rows, int(self._X.shape[1]), n_masks)

    def _charge(self, spec: Any, session: Session | None) -> bool:
        if session is not None:
            session.n_queries += 1
        return False

    def _serial(self, session: Session) -> threading.Lock:
        return self._session_locks.setdefault(session.key, threading.Lock())

    def _worker(self, session: Session) -> PassiveWorker:
        worker = self._workers.get(session.key)
        if worker is None:
            raise Refusal("protocol")
        return worker

    def _drop(self, session: Session) -> None:
        for state in (self._workers, self._n_masks):
            state.pop(session.key, None)

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        if rows[-1] >= self.n_rows:
            raise Refusal("malformed")
        return rows

    # -- the protocol -------------------------------------------------------------------

    @restricted(request={"unit": Text(max_len=200)}, answers=SessionTicket, session=False, owner=True)
    def new_session(self, _: None, unit: str) -> tuple[SessionTicket, None]:
        """The owner admits one training (``unit`` names it in the ledger); the token is returned once.

        The session's candidate orders are drawn from the party's seed and ``unit``: a unit given twice repeats
        them, so a deployment gives every training its own unit (a simulation may repeat one to repeat a run)."""
        with self._lock:
            if self._max_sessions is not None and len(self._sessions) >= self._max_sessions:
                raise Refusal("budget")
            token, _session = self._issue(ROLE, unit)
        return SessionTicket(token, self.name, ROLE, unit, self.n_rows), None

    @restricted(answers=PartyInfo)
    @_one_at_a_time
    def info(self, session: Session) -> tuple[PartyInfo, None]:
        """The party's name and shape (``n_masks`` once the session is open)."""
        return self._info(self._n_masks.get(session.key, 0)), None

    @restricted(request={"context": Bytes(max_size=MAX_CONTEXT_BYTES), "n_bins": Int(2, MAX_BINS),
                         "train_rows": ROWS}, answers=PartyInfo)
    @_one_at_a_time
    def open_session(self, session: Session, context: bytes, n_bins: int,
                     train_rows: np.ndarray) -> tuple[PartyInfo, dict[str, Any]]:
        """Load the active party's public context and bin every row (once per session); the session's terms."""
        if session.sealed:
            raise Refusal("opened")
        session.sealed = True  # one attempt per token, answered or refused
        rows = self._rows(train_rows)
        if n_bins > self._max_bins:
            raise Refusal("limit", n_bins=n_bins)
        worker = PassiveWorker(self._X, seed=seed_int(derive(self._seed, "session", session.unit)),
                               max_bins=self._max_bins, bin_privacy=self._bin_privacy,
                               privacy_seed=privacy_seed(self._seed, self._owner))
        try:
            n_masks = worker.open_session(context, n_bins, rows)
        except ConfigError:
            raise Refusal("context") from None
        self._workers[session.key] = worker
        self._n_masks[session.key] = n_masks
        return self._info(n_masks), {"n_rows": int(rows.size), "n_bins": n_bins, "context_bytes": len(context)}

    @restricted(request={"queries": ListOf(QUERY, max_len=MAX_NODES, min_len=1)}, answers=EncryptedHistograms)
    @_one_at_a_time
    def histograms(self, session: Session, queries: tuple[dict[str, Any], ...]) -> tuple[EncryptedHistograms,
                                                                                          dict[str, Any]]:
        """Encrypted left-side sums of every candidate split for each direct query, in the tree's secret order
        (derived ones name their parent and sibling); only nodes the protocol derives are answered."""
        worker = self._worker(session)
        nodes = []
        for q in queries:
            direct = q["rows"] is not None
            if direct != (q["gh"] is not None) or direct == (q["sibling"] >= 0) or q["parent"] >= q["node"] \
                    or (direct and q["block"] < 1):
                raise Refusal("malformed")
            gh = None if not direct else Ciphertexts.of(q["gh"]["scheme"], q["gh"]["blobs"])
            nodes.append(NodeQuery(q["node"], q["parent"], None if not direct else self._rows(q["rows"]), gh,
                                   q["block"], q["sibling"], q["tree"]))
        trees = {q.tree for q in nodes}
        if len(trees) > self._max_trees_per_request:
            raise Refusal("limit", trees=len(trees))
        new = trees - set(worker.view.trees)
        if len(worker.view.trees) + len(new) > self._max_trees:
            raise Refusal("limit", trees=len(worker.view.trees) + len(new))
        try:
            payloads = tuple(worker.histograms(nodes, deadline=self.deadline.check))
        except ConfigError:
            raise Refusal("protocol") from None
        except TimeoutError:  # the worker stopped between nodes: its state is half-built, so the session ends
            session.closed = True
            self._drop(session)
            raise
        return EncryptedHistograms(payloads), {"trees": sorted({q.tree for q in nodes}), "n_queries": len(nodes)}

    @restricted(request={"picks": IntArray(max_len=MAX_NODES, high=MAX_MASK, width=3)}, answers=SplitRows)
    @_one_at_a_time
    def splits(self, session: Session, picks: np.ndarray) -> tuple[SplitRows, dict[str, Any]]:
        """The left rows of this party's winning splits ``(tree, node, slot)`` at nodes of each tree's last level
        (``slot``: the candidate's place in the tree's order)."""
        if picks[:, 0].max() > MAX_TREE or picks[:, 1].max() > MAX_NODE:
            raise Refusal("malformed")
        try:
            lefts = self._worker(session).splits([(int(t), int(n), int(m)) for t, n, m in picks])
        except ConfigError:
            raise Refusal("protocol") from None
        return SplitRows(tuple(RowIds.of(left) for left in lefts)), {"splits": picks[:, :2].tolist()}

    @restricted(request={"keys": IntArray(max_len=MAX_NODES * 64, high=MAX_TREE, width=2),
                         "rows": IntArray(max_len=MAX_ROWS, high=MAX_ROWS)}, answers=RouteBits)
    @_one_at_a_time
    def route(self, session: Session, keys: np.ndarray, rows: np.ndarray) -> tuple[RouteBits, dict[str, Any]]:
        """Go-left bits of this party's splits ``keys`` (tree, node) for ``rows``."""
        if rows.max() >= self.n_rows:
            raise Refusal("malformed")
        try:
            bits = self._worker(session).route([(int(t), int(n)) for t, n in keys], rows)
        except ConfigError:
            raise Refusal("protocol") from None
        return RouteBits.of(bits), {"n_keys": int(keys.shape[0]), "n_rows": int(rows.size)}

    @restricted(answers=OpTally)
    @_one_at_a_time
    def op_counts(self, session: Session) -> tuple[OpTally, None]:
        """This session's homomorphic operation counts."""
        return OpTally(**self._worker(session).op_counts()), None

    @restricted(answers=ViewRecord, owner=True)
    @_one_at_a_time
    def view(self, session: Session) -> tuple[ViewRecord, dict[str, Any]]:
        """What this party received in a session, as cells per tree (owner only: the attack's input)."""
        v = self._worker(session).view
        trees = tuple(TreeCells(t, tuple(RowIds.of(c) for c in cells)) for t, cells in v.partitions())
        return ViewRecord(v.context_bytes, v.ciphertext_bytes, v.n_queries, trees), {"n_trees": len(trees)}

    @restricted(answers=Closed)
    @_one_at_a_time
    def close(self, session: Session) -> tuple[Closed, dict[str, Any]]:
        """The session's holder ends it: its state is dropped, its token answers nothing more."""
        session.closed = True
        self._drop(session)
        return Closed(session.unit, session.n_queries), {"closed": session.key}

    @restricted(answers=Closed, owner=True)
    @_one_at_a_time
    def close_session(self, session: Session) -> tuple[Closed, dict[str, Any]]:
        """The owner ends a session (as the base does) and its state is dropped."""
        self._drop(session)
        return Party.close_session(self, session)
