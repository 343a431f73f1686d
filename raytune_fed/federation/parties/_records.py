"""What a vertical-learning party may answer: small frozen records that check themselves.

Each declares its fields with the boundary's declarative fields
(:class:`~raytune_fed.federation._fields.Record`) and is declared to the shared record layer
(:func:`~raytune_fed.federation._records.register_record`), so a passive party's answers
pass the same gate (``check_outgoing``) and wire encoding (``to_wire`` / ``from_wire``) as a
site's.  Row ids and routing bits travel as bytes with
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
from raytune_fed.federation._fields import Bytes, Instance, Int, Real, Record, Text, TupleOf
from raytune_fed.federation._records import MAX_BLOB_BYTES, check_outgoing, register_record

COUNT = Int(0)
MAX_ITEMS = 1 << 24  # records in one answer's tuple (the answer's size is capped by the wire format too)


def _size_is(n_bytes: Any) -> Any:
    """A rule: the record's ``data`` holds exactly ``n_bytes(record)`` bytes."""
    return lambda r: None if len(r.data) == n_bytes(r) else f"must be {n_bytes(r)} bytes"


@dataclass(frozen=True)
class RowIds(Record):
    """Sorted instance ids as int64 bytes; ``count`` declares how many."""

    count: int
    data: bytes

    FIELDS = {"count": COUNT, "data": Bytes(max_size=MAX_BLOB_BYTES)}
    RULES = (("data", _size_is(lambda r: 8 * r.count)),)

    @classmethod
    def of(cls, rows: np.ndarray) -> RowIds:
        r = np.ascontiguousarray(rows, dtype=np.int64)
        return cls(int(r.size), r.tobytes())

    def array(self) -> np.ndarray:
        return np.frombuffer(self.data, dtype=np.int64).copy()


@dataclass(frozen=True)
class SplitRows(Record):
    """The left rows of each split a passive party applied in one request, in request order."""

    lefts: tuple[RowIds, ...]

    FIELDS = {"lefts": TupleOf(Instance(RowIds), MAX_ITEMS)}


@dataclass(frozen=True)
class RouteBits(Record):
    """Go-left bits ``(n_rows, n_keys)``, bit-packed row-major."""

    n_rows: int
    n_keys: int
    data: bytes

    FIELDS = {"n_rows": COUNT, "n_keys": COUNT, "data": Bytes(max_size=MAX_BLOB_BYTES)}
    RULES = (("data", _size_is(lambda r: math.ceil(r.n_rows * r.n_keys / 8))),)

    @classmethod
    def of(cls, bits: np.ndarray) -> RouteBits:
        b = np.asarray(bits, dtype=bool)
        return cls(int(b.shape[0]), int(b.shape[1]), np.packbits(b.ravel()).tobytes())

    def array(self) -> np.ndarray:
        flat = np.unpackbits(np.frombuffer(self.data, dtype=np.uint8), count=self.n_rows * self.n_keys)
        return flat.astype(bool).reshape(self.n_rows, self.n_keys)


@dataclass(frozen=True)
class PartyInfo(Record):
    """A party's name and shape; ``n_masks`` = candidate splits, features x (bins - 1), of an open
    session (0 before)."""

    party: str
    n_rows: int
    n_features: int
    n_masks: int = 0

    FIELDS = {"party": Text(max_len=200), "n_rows": Int(1), "n_features": Int(1), "n_masks": COUNT}


@dataclass(frozen=True)
class EncryptedHistograms(Record):
    """One answer per direct node query, in query order: the encrypted left-side sums of every candidate split."""

    payloads: tuple[Ciphertexts, ...]

    FIELDS = {"payloads": TupleOf(Instance(Ciphertexts), MAX_ITEMS)}

    @property
    def size(self) -> int:
        return sum(p.size for p in self.payloads)


@dataclass(frozen=True)
class OpTally(Record):
    """A party's homomorphic operation counts."""

    encryptions: int
    decryptions: int
    additions: int
    products: int

    FIELDS = dict.fromkeys(OPERATIONS, COUNT)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in OPERATIONS}


@dataclass(frozen=True)
class TreeCells(Record):
    """The finest partition of one tree's rows that a passive party can infer."""

    tree: int
    cells: tuple[RowIds, ...]

    FIELDS = {"tree": COUNT, "cells": TupleOf(Instance(RowIds), MAX_ITEMS)}


@dataclass(frozen=True)
class ViewRecord(Record):
    """A passive party's view, as the attack reads it (cells per tree) plus traffic totals."""

    context_bytes: int
    ciphertext_bytes: int
    n_queries: int
    trees: tuple[TreeCells, ...]

    FIELDS = {"context_bytes": COUNT, "ciphertext_bytes": COUNT, "n_queries": COUNT,
              "trees": TupleOf(Instance(TreeCells), MAX_ITEMS)}

    def partitions(self) -> list[tuple[int, list[np.ndarray]]]:
        """The same shape as :meth:`PassiveView.partitions`, for the attack."""
        return [(t.tree, [c.array() for c in t.cells]) for t in self.trees]


@dataclass(frozen=True)
class TrainingReport(Record):
    """The active party's summary of one training: utility loss on its test rows and the costs."""

    utility_loss: float
    metric: str
    op_counts: OpTally
    training_cost: float
    fit_seconds: float
    n_trees: int
    n_federated_trees: int

    FIELDS = {"utility_loss": Real(0.0, 1.0), "metric": Text(choices=("1-auc", "1-accuracy")),
              "op_counts": Instance(OpTally), "training_cost": Real(0.0), "fit_seconds": Real(0.0),
              "n_trees": Int(1), "n_federated_trees": COUNT}


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
