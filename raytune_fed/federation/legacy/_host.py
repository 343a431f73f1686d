"""A long-lived data site that plays a restricted role per experiment session.

In a grid, one site is a curator in some experiments and the lockbox in others, for
several replications (each with its own in-bag split).  A :class:`SiteHost` holds the
site's rows once and opens one role object per session.  A session id can be opened only
once, ever, so a sealed lockbox cannot be reset by opening its session again; the host's
owner may cap the number of sessions.
"""

from __future__ import annotations

from typing import Any, Sequence

from raytune_fed.errors import ConfigError, QueryRefusedError
from raytune_fed.federation._records import FinalLosses, Ledger, Loss, SiteStatus
from raytune_fed.federation._data import site_data as _check_xy
from raytune_fed.federation.legacy._roles import Admit, Curator, Lockbox

ROLES = ("curator", "lockbox")


class SiteHost:
    """One data site: private rows, restricted roles opened per session."""

    def __init__(self, X: Any, y: Any, *, name: str = "site", max_sessions: int | None = None,
                 admit: Admit | None = None) -> None:
        self.name = name
        self._X, self._y = _check_xy(name, X, y)
        self._admit = admit
        self._max_sessions = max_sessions
        self._sessions: dict[str, Curator | Lockbox] = {}
        self._used: set[str] = set()

    def open_session(self, session: str, role: str, *, seed: Any = 0, inbag_fraction: float = 0.8,
                     budget: int | None = None) -> SiteStatus:
        """Start playing ``role`` for ``session`` (a new, never used id)."""
        if role not in ROLES:
            raise ConfigError(f"site {self.name!r}: unknown role {role!r}; known roles: {list(ROLES)}")
        if not isinstance(session, str) or not session:
            raise ConfigError(f"site {self.name!r}: session id must be a non-empty str, got {session!r}")
        if session in self._used:
            raise QueryRefusedError(f"site {self.name!r}: session {session!r} was opened before; ids are single-use")
        if self._max_sessions is not None and len(self._used) >= self._max_sessions:
            raise QueryRefusedError(f"site {self.name!r}: the cap of {self._max_sessions} sessions is reached")
        if role == "curator":
            obj: Curator | Lockbox = Curator(self._X, self._y, name=self.name, inbag_fraction=inbag_fraction,
                                             seed=seed, budget=budget, admit=self._admit)
        else:
            obj = Lockbox(self._X, self._y, name=self.name, admit=self._admit)
        self._used.add(session)
        self._sessions[session] = obj
        return obj.status()

    def _role(self, session: str, want: str | None = None) -> Curator | Lockbox:
        obj = self._sessions.get(session)
        if obj is None:
            state = "closed" if session in self._used else "not open"
            raise QueryRefusedError(f"site {self.name!r}: session {session!r} is {state}")
        if want is not None and obj.role != want:
            raise QueryRefusedError(f"site {self.name!r} is the {obj.role} of session {session!r}; "
                                    f"a {obj.role} does not answer {want} queries")
        return obj

    def query(self, session: str, model: Any) -> Loss:
        return self._role(session, "curator").query(model)  # type: ignore[union-attr]

    def query_many(self, session: str, models: Sequence[Any]) -> tuple[Loss, ...]:
        """Several curator queries in one call (each one counted and logged)."""
        role = self._role(session, "curator")
        return tuple(role.query(m) for m in models)  # type: ignore[union-attr]

    def final_evaluation(self, session: str, models: Sequence[Any]) -> FinalLosses:
        return self._role(session).final_evaluation(models)

    def status(self, session: str) -> SiteStatus:
        return self._role(session).status()

    def ledger(self, session: str) -> Ledger:
        return self._role(session).ledger()

    def close_session(self, session: str) -> SiteStatus:
        """Free a session's role (its id stays used)."""
        status = self._role(session).status()
        del self._sessions[session]
        return status
