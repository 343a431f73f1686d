"""The analyst's side of a restricted site: one interface, in-process or over Ray.

A workflow talks to curators and lockboxes through :class:`SiteClient` objects and never
needs to know whether the site is an object in the same process (unit tests, small runs)
or a Ray actor on another node.  ``query_all`` and ``final_all`` send one model to
several sites at once: over Ray the model is serialised once (``ray.put``) and the sites
answer in parallel.
"""

from __future__ import annotations

from typing import Any, Sequence

from raytune_fed.federation._records import FinalLosses, Ledger, Loss, SiteStatus


class SiteClient:
    """A handle on one role of one site: an in-process role object or ``(actor, session)``."""

    def __init__(self, target: Any, session: str | None = None) -> None:
        self._target = target
        self._session = session

    @property
    def remote(self) -> bool:
        return self._session is not None

    def _call(self, method: str, *args: Any) -> Any:
        if self.remote:
            return getattr(self._target, method).remote(self._session, *args)
        return getattr(self._target, method)(*args)

    def _get(self, answers: list[Any]) -> list[Any]:
        if self.remote:
            import ray

            return ray.get(answers)
        return answers

    def query(self, model: Any) -> Loss:
        return query_all([self], model)[0]

    def final_evaluation(self, models: Sequence[Any]) -> FinalLosses:
        return final_all([self], models)[0]

    def status(self) -> SiteStatus:
        return self._get([self._call("status")])[0]

    def ledger(self) -> Ledger:
        return self._get([self._call("ledger")])[0]


def _put_if_remote(clients: Sequence[SiteClient], payload: Any) -> Any:
    if any(c.remote for c in clients):
        import ray

        return ray.put(payload)
    return payload


def _gather(clients: Sequence[SiteClient], calls: list[Any]) -> list[Any]:
    remote = [i for i, c in enumerate(clients) if c.remote]
    if remote:
        import ray

        got = ray.get([calls[i] for i in remote])
        for i, value in zip(remote, got):
            calls[i] = value
    return calls


def query_all(clients: Sequence[SiteClient], model: Any) -> list[Loss]:
    """Ask every client for the loss of ``model`` (in parallel over Ray)."""
    payload = _put_if_remote(clients, model)
    return _gather(clients, [c._call("query", payload) for c in clients])


def final_all(clients: Sequence[SiteClient], models: Sequence[Any]) -> list[FinalLosses]:
    """Ask every client for its one final evaluation of ``models``."""
    payload = _put_if_remote(clients, list(models))
    return _gather(clients, [c._call("final_evaluation", payload) for c in clients])
