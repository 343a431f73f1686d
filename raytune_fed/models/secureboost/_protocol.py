"""What the active party sends a passive party, and the methods a passive party offers.

The active party drives training; a passive party answers through these methods only
(in-process :class:`~raytune_fed.models.secureboost.PassiveWorker`, or a client of a
party actor in :mod:`raytune_fed.federation.parties`).  Rows are named by the global
instance ids both parties aligned (PSI); the active party sends a node's ids in the
order of its encrypted gradients.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from raytune_fed.crypto import Ciphertexts


@dataclass(frozen=True)
class NodeQuery:
    """One node of the current level of tree ``tree`` for a passive party.

    Either *direct* (``rows`` and their encrypted packed gradients ``gh``, ``block``
    instances per ciphertext: the passive party returns the node's encrypted sums over the
    left side of each of its candidate splits) or *derived* (``sibling``: the node is its
    parent minus that sibling, sent directly in the same request; the active party
    subtracts histograms itself and the passive party only learns the node's rows).
    """

    node: int
    parent: int
    rows: np.ndarray | None = None
    gh: Ciphertexts | None = None
    block: int = 0
    sibling: int = -1
    tree: int = 0

    @property
    def direct(self) -> bool:
        return self.rows is not None


class PassiveEndpoint(Protocol):
    """The protocol methods of a passive party (see :class:`PassiveWorker` for their meaning)."""

    def open_session(self, public_context: bytes, n_bins: int, train_rows: np.ndarray) -> int: ...

    def histograms(self, queries: Sequence[NodeQuery]) -> list[Ciphertexts]: ...

    def splits(self, picks: Sequence[tuple[int, int, int]]) -> list[np.ndarray]: ...

    def route(self, keys: Sequence[tuple[int, int]], rows: np.ndarray) -> np.ndarray: ...

    def op_counts(self) -> dict[str, int]: ...
