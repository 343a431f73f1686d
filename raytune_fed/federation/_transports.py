"""How a client's wire messages reach a party: the :class:`Transport` protocol, in-process and over Ray.

A transport has ``send(message) -> reply``, and ``submit(message) -> pending`` with
``collect(pendings) -> [bytes]``, so a client can send to several sites first and wait for
all answers together (Ray futures, eager calls in-process).  The boundary knows no network:
a transport over HTTP(S) (:class:`raytune_fed.serve.HttpTransport`) lives in the
:mod:`raytune_fed.serve` package and implements the same protocol.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from raytune_fed.errors import QueryRefusedError


@runtime_checkable
class Transport(Protocol):
    """What carries a client's wire messages to one party (a :meth:`Party.call` somewhere).

    ``kind`` names the deployment (``"local"``, ``"actor"``, ``"service"``); ``send`` answers
    one message; ``submit`` starts one and ``collect`` waits for several started ones.
    """

    kind: str

    def send(self, message: bytes) -> bytes:
        """The party's reply to ``message``."""
        ...

    def submit(self, message: bytes) -> Any:
        """Start sending ``message``; the pending reply (for :meth:`collect`)."""
        ...

    def collect(self, pending: Sequence[Any]) -> list[bytes]:
        """The replies of messages :meth:`submit` started, in their order."""
        ...


class LocalTransport:
    """A party object in this process (tests, small simulations)."""

    kind = "local"

    def __init__(self, party: Any) -> None:
        self.party = party

    def send(self, message: bytes) -> bytes:
        return self.party.call(message)

    def submit(self, message: bytes) -> bytes:
        return self.party.call(message)

    @staticmethod
    def collect(pending: Sequence[Any]) -> list[bytes]:
        return list(pending)


class _ActorCall:
    """One message sent to an actor: its future, and what is needed to send it again."""

    def __init__(self, actor: Any, message: bytes, wait: float) -> None:
        self.actor, self.message, self.wait = actor, message, wait
        self.ref = actor.call.remote(message)

    def result(self) -> bytes:
        """The reply; while the actor restarts, the same message again (safe: see the module docstring)."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        start = time.monotonic()
        while True:
            try:
                return ray.get(self.ref)
            except RayActorError as exc:
                # restarting: wait for it; died (a call lost with the process, or for good): a short while, since
                # a restarted actor answers again and one that is gone fails the same way at once
                limit = self.wait if isinstance(exc, ActorUnavailableError) else min(self.wait, 60.0)
                if time.monotonic() - start > limit:
                    raise QueryRefusedError(f"a site actor is unavailable ({type(exc).__name__}) "
                                            f"after {limit:.0f} s") from None
                time.sleep(0.2)
                self.ref = self.actor.call.remote(self.message)


class ActorTransport:
    """A party inside a Ray actor whose only method is ``call``.

    A call that meets the actor restarting is sent again until it is back (at most
    ``restart_wait`` seconds): the site's request numbers make a message sent twice cost
    once (Ray itself retries calls already queued, ``max_task_retries=-1``).
    """

    kind = "actor"

    def __init__(self, actor: Any, *, restart_wait: float = 600.0) -> None:
        self.actor, self.restart_wait = actor, restart_wait

    def send(self, message: bytes) -> bytes:
        return self.collect([self.submit(message)])[0]

    def submit(self, message: bytes) -> _ActorCall:
        return _ActorCall(self.actor, message, self.restart_wait)

    @staticmethod
    def collect(pending: Sequence[_ActorCall]) -> list[bytes]:
        import ray

        try:
            return list(ray.get([p.ref for p in pending]))
        except ray.exceptions.RayActorError:
            return [p.result() for p in pending]
