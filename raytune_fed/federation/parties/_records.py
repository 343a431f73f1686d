"""What a vertical-learning party may answer: small frozen records that check themselves.

They are declared to the shared record layer (:func:`~raytune_fed.federation._records.register_record`),
so a passive party's answers pass the same gate (``check_outgoing``) and wire encoding
(``to_wire`` / ``from_wire``) as a site's.  Row ids and routing bits travel as bytes with
a declared count (never arrays or objects); ciphertexts as
:class:`~raytune_fed.crypto.Ciphertexts`, whose blobs are bytes.  :func:`check_party_answer`
is the gate of the active party's answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from raytune_fed.crypto import OPERATIONS, Ciphertexts
from raytune_fed.errors import BoundaryViolationError
from raytune_fed.federation._records import _count, _finite_float, check_outgoing, register_record


def _bytes(owner: str, value: Any, size: int) -> bytes:
    if type(value) is not bytes or len(value) != size:
        raise BoundaryViolationError(f"{owner} must be {size} bytes, got {type(value).__name__} "
                                     f"of {len(value) if hasattr(value, '__len__') else '?'}")
    return value


@dataclass(frozen=True)
class RowIds:
    """Sorted instance ids as int64 bytes; ``count`` declares how many."""

    count: int
    data: bytes

    def __post_init__(self) -> None:
        _count("RowIds.count", self.count)
        _bytes("RowIds.data", self.data, 8 * self.count)

    @classmethod
    def of(cls, rows: np.ndarray) -> RowIds:
        r = np.ascontiguousarray(rows, dtype=np.int64)
        return cls(int(r.size), r.tobytes())

    def array(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.int64).copy()


@dataclass(frozen=True)
class SplitRows:
    """The left rows of each split a passive party applied in one request, in request order."""

    lefts: tuple[RowIds, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.lefts, tuple) or not all(type(r) is RowIds for r in self.lefts):
            raise BoundaryViolationError("SplitRows.lefts must be a tuple of RowIds")


@dataclass(frozen=True)
class RouteBits:
    """Go-left bits ``(n_rows, n_keys)``, bit-packed row-major."""

    n_rows: int
    n_keys: int
    data: bytes

    def __post_init__(self) -> None:
        _count("RouteBits.n_rows", self.n_rows)
        _count("RouteBits.n_keys", self.n_keys)
        _bytes("RouteBits.data", self.data, math.ceil(self.n_rows * self.n_keys / 8))

    @classmethod
    def of(cls, bits: np.ndarray) -> RouteBits:
        b = np.asarray(bits, dtype=bool)
        return cls(int(b.shape[0]), int(b.shape[1]), np.packbits(b.ravel()).tobytes())

    def array(self) -> np.ndarray:
        flat = np.unpackbits(np.frombuffer(self.data, dtype=np.uint8), count=self.n_rows * self.n_keys)
        return flat.astype(bool).reshape(self.n_rows, self.n_keys)


@dataclass(frozen=True)
class PartyInfo:
    """A party's name and shape; ``n_masks`` = candidate splits, features x (bins - 1), of an open
    session (0 before)."""

    party: str
    n_rows: int
    n_features: int
    n_masks: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.party, str) or not self.party:
            raise BoundaryViolationError(f"PartyInfo.party must be a non-empty str, got {self.party!r}")
        _count("PartyInfo.n_rows", self.n_rows, 1)
        _count("PartyInfo.n_features", self.n_features, 1)
        _count("PartyInfo.n_masks", self.n_masks)


@dataclass(frozen=True)
class EncryptedHistograms:
    """One answer per direct node query, in query order: the encrypted left-side sums of every candidate split."""

    payloads: tuple[Ciphertexts, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.payloads, tuple) or not all(type(p) is Ciphertexts for p in self.payloads):
            raise BoundaryViolationError("EncryptedHistograms.payloads must be a tuple of Ciphertexts")

    @property
    def size(self) -> int:
        return sum(p.size for p in self.payloads)


@dataclass(frozen=True)
class OpTally:
    """A party's homomorphic operation counts."""

    encryptions: int
    decryptions: int
    additions: int
    products: int

    def __post_init__(self) -> None:
        for name in OPERATIONS:
            _count(f"OpTally.{name}", getattr(self, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in OPERATIONS}


@dataclass(frozen=True)
class TreeCells:
    """The finest partition of one tree's rows that a passive party can infer."""

    tree: int
    cells: tuple[RowIds, ...]

    def __post_init__(self) -> None:
        _count("TreeCells.tree", self.tree)
        if not isinstance(self.cells, tuple) or not all(type(c) is RowIds for c in self.cells):
            raise BoundaryViolationError("TreeCells.cells must be a tuple of RowIds")


@dataclass(frozen=True)
class ViewRecord:
    """A passive party's view, as the attack reads it (cells per tree) plus traffic totals."""

    context_bytes: int
    ciphertext_bytes: int
    n_queries: int
    trees: tuple[TreeCells, ...]

    def __post_init__(self) -> None:
        for name in ("context_bytes", "ciphertext_bytes", "n_queries"):
            _count(f"ViewRecord.{name}", getattr(self, name))
        if not isinstance(self.trees, tuple) or not all(type(t) is TreeCells for t in self.trees):
            raise BoundaryViolationError("ViewRecord.trees must be a tuple of TreeCells")

    def partitions(self) -> list[tuple[int, list[np.ndarray]]]:
        """The same shape as :meth:`PassiveView.partitions`, for the attack."""
        return [(t.tree, [c.array() for c in t.cells]) for t in self.trees]


@dataclass(frozen=True)
class TrainingReport:
    """The active party's summary of one training: utility loss on its test rows and the costs."""

    utility_loss: float
    metric: str
    op_counts: OpTally
    training_cost: float
    fit_seconds: float
    n_trees: int
    n_federated_trees: int

    def __post_init__(self) -> None:
        for name, hi in (("utility_loss", 1.0), ("training_cost", math.inf), ("fit_seconds", math.inf)):
            object.__setattr__(self, name, _finite_float(f"TrainingReport.{name}", getattr(self, name), 0.0, hi))
        if self.metric not in ("1-auc", "1-accuracy"):
            raise BoundaryViolationError(f"TrainingReport.metric must be '1-auc' or '1-accuracy', got {self.metric!r}")
        if type(self.op_counts) is not OpTally:
            raise BoundaryViolationError("TrainingReport.op_counts must be an OpTally")
        _count("TrainingReport.n_trees", self.n_trees, 1)
        _count("TrainingReport.n_federated_trees", self.n_federated_trees, 0)


PARTY_RECORD_TYPES: tuple[type, ...] = (RowIds, SplitRows, RouteBits, PartyInfo, EncryptedHistograms, OpTally,
                                        ViewRecord, TrainingReport)
_BYTES = {RowIds: ("data",), RouteBits: ("data",), Ciphertexts: ("blobs",)}
for _cls in (Ciphertexts, TreeCells, *PARTY_RECORD_TYPES):
    register_record(_cls, bytes_fields=_BYTES.get(_cls, ()))


def check_party_answer(answer: Any) -> Any:
    """Let ``answer`` leave a party only if it is exactly one of the party record types."""
    if type(answer) not in PARTY_RECORD_TYPES:
        raise BoundaryViolationError(
            f"a party may only answer with {[t.__name__ for t in PARTY_RECORD_TYPES]}, not {type(answer).__name__}")
    return check_outgoing(answer)
