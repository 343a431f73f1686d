"""The active party's handle on one passive party's session: in-process or a Ray actor.

:class:`PassiveClient` implements the SecureBoost
:class:`~raytune_fed.models.secureboost.PassiveEndpoint` protocol, so the estimator
trains the same way whether the passive party is an object here or an actor on the
node that holds its data; records are unwrapped into the plain values the estimator uses.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from raytune_fed.crypto import Ciphertexts
from raytune_fed.federation.parties._records import PartyInfo, RowIds, ViewRecord
from raytune_fed.models.secureboost import NodeQuery


class PassiveClient:
    """Session ``session`` of ``target``: a :class:`PassiveParty` or an actor handle of one."""

    def __init__(self, target: Any, session: str) -> None:
        self._target = target
        self.session = session
        self.remote = hasattr(getattr(target, "open_session", None), "remote")
        self.n_rows_: int | None = None

    def _call(self, method: str, *args: Any) -> Any:
        if self.remote:
            import ray

            return ray.get(getattr(self._target, method).remote(self.session, *args))
        return getattr(self._target, method)(self.session, *args)

    def info(self) -> PartyInfo:
        if self.remote:
            import ray

            return ray.get(self._target.info.remote())
        return self._target.info()

    # ------------------------------------------------------------------ PassiveEndpoint
    def open_session(self, public_context: bytes, n_bins: int, train_rows: np.ndarray) -> int:
        info = self._call("open_session", public_context, int(n_bins), RowIds.of(train_rows))
        self.n_rows_ = info.n_rows
        return info.n_masks

    def histograms(self, tree: int, queries: Sequence[NodeQuery]) -> list[Ciphertexts]:
        return list(self._call("histograms", int(tree), tuple(queries)).payloads)

    def split(self, tree: int, node: int, mask: int) -> np.ndarray:
        return self._call("split", int(tree), int(node), int(mask)).array()

    def route(self, keys: Sequence[tuple[int, int]], rows: np.ndarray) -> np.ndarray:
        return self._call("route", [(int(t), int(n)) for t, n in keys], RowIds.of(rows)).array()

    def op_counts(self) -> dict[str, int]:
        return self._call("op_counts").as_dict()

    # ------------------------------------------------------------------ simulation
    def view(self) -> ViewRecord:
        return self._call("view")

    def close(self) -> None:
        self._call("close_session")
