"""A passive party: its feature columns and, per training session, a public context only.

It answers the SecureBoost protocol (:class:`~raytune_fed.models.secureboost.PassiveEndpoint`)
through records: encrypted histograms, the left rows of its own winning splits, routing
bits.  Sessions let one long-lived party (a Ray actor holding its rows once) serve several
trainings; a session id is single-use.  :meth:`PassiveParty.view` hands out the party's
view of a session - what it received - for the attack simulation.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.federation.parties._records import (
    EncryptedHistograms, OpTally, PartyInfo, RouteBits, RowIds, TreeCells, ViewRecord, check_party_answer)
from raytune_fed.models.secureboost import NodeQuery, PassiveWorker
from raytune_fed.random import derive, seed_int


class PassiveParty:
    """Feature block ``features`` (one row per aligned instance id) of a passive party."""

    def __init__(self, features: Any, *, name: str = "passive", seed: int = 0,
                 max_sessions: int | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a party needs a non-empty name, got {name!r}")
        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1 or not np.all(np.isfinite(X)):
            raise ConfigError(f"party {name!r}: features must be a finite 2-D array with >= 2 rows and >= 1 column, "
                              f"got shape {X.shape}")
        X.setflags(write=False)
        self.name, self._X, self._seed = name, X, seed
        self._max_sessions = max_sessions
        self._sessions: dict[str, PassiveWorker] = {}
        self._used: set[str] = set()

    def info(self) -> PartyInfo:
        return check_party_answer(PartyInfo(self.name, int(self._X.shape[0]), int(self._X.shape[1])))

    def open_session(self, session: str, public_context: bytes, n_bins: int, train_rows: RowIds) -> PartyInfo:
        """Start a training: load the active party's public context (a secret key is refused), bin rows."""
        if not isinstance(session, str) or not session:
            raise ConfigError(f"party {self.name!r}: session id must be a non-empty str, got {session!r}")
        if session in self._used:
            raise QueryRefusedError(f"party {self.name!r}: session {session!r} was opened before; ids are single-use")
        if self._max_sessions is not None and len(self._used) >= self._max_sessions:
            raise QueryRefusedError(f"party {self.name!r}: the cap of {self._max_sessions} sessions is reached")
        if type(train_rows) is not RowIds:
            raise ConfigError(f"party {self.name!r}: train_rows must be RowIds, got {type(train_rows).__name__}")
        worker = PassiveWorker(self._X, seed=seed_int(derive(self._seed, "session", session)))
        n_masks = worker.open_session(public_context, n_bins, train_rows.array())
        self._used.add(session)
        self._sessions[session] = worker
        return check_party_answer(PartyInfo(self.name, int(self._X.shape[0]), int(self._X.shape[1]), n_masks))

    def histograms(self, session: str, tree: int, queries: Sequence[NodeQuery]) -> EncryptedHistograms:
        qs = tuple(queries)
        if not all(type(q) is NodeQuery for q in qs):
            raise ConfigError(f"party {self.name!r}: histogram queries must be NodeQuery records")
        return check_party_answer(EncryptedHistograms(tuple(self._worker(session).histograms(int(tree), qs))))

    def split(self, session: str, tree: int, node: int, mask: int) -> RowIds:
        return check_party_answer(RowIds.of(self._worker(session).split(int(tree), int(node), int(mask))))

    def route(self, session: str, keys: Sequence[tuple[int, int]], rows: RowIds) -> RouteBits:
        if type(rows) is not RowIds:
            raise ConfigError(f"party {self.name!r}: rows must be RowIds, got {type(rows).__name__}")
        return check_party_answer(RouteBits.of(self._worker(session).route(list(keys), rows.array())))

    def op_counts(self, session: str) -> OpTally:
        return check_party_answer(OpTally(**self._worker(session).op_counts()))

    def view(self, session: str) -> ViewRecord:
        """What this party received in ``session``, as cells per tree (the attack's input)."""
        v = self._worker(session).view
        trees = tuple(TreeCells(t, tuple(RowIds.of(c) for c in cells)) for t, cells in v.partitions())
        return check_party_answer(ViewRecord(v.context_bytes, v.ciphertext_bytes, v.n_queries, trees))

    def close_session(self, session: str) -> PartyInfo:
        """Forget a session's state (its id stays used)."""
        self._worker(session)
        del self._sessions[session]
        return self.info()

    def _worker(self, session: str) -> PassiveWorker:
        worker = self._sessions.get(session)
        if worker is None:
            state = "closed" if session in self._used else "not open"
            raise QueryRefusedError(f"party {self.name!r}: session {session!r} is {state}")
        return worker
