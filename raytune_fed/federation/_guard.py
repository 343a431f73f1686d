"""The differencing guard: a site answers no two models that differ on fewer than k rows.

A loss is a count of mismatches, so the answers for two models whose predictions differ
on a few rows tell the labels of those rows (the "label differencing" attack: one row
per pair of queries).  The guard keeps, for every model the site has answered (in any
session, over all units), its predictions on all the site's rows and which rows it was
scored on, and refuses a new model when

* it puts fewer than ``k`` of the scored rows in one class (a model that singles out a
  few rows), or
* it is fewer than ``k`` rows away from an earlier answered model, counting the rows
  both were scored on where their predictions differ plus the rows only one of them was
  scored on (a repeat of the same model on the same rows is 0 rows away: refused too).

The difference of two answers is a sum over exactly those rows, so any pair of answers
differs by a sum over at least ``k`` labels.  What the guard
does not stop: combining many answers (each k or more rows apart) into a linear system
for single labels; that needs about as many queries as labels and is bounded by the
query budget (see the README's trust model).  ``k = 0`` turns the guard off.
"""

from __future__ import annotations

import numpy as np


def pack(bits: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(bits, dtype=bool))


class DifferencingGuard:
    """Prediction bits of every answered model, and the two rules above."""

    def __init__(self, n_rows: int, k: int) -> None:
        self.n_rows, self.k = int(n_rows), int(k)
        width = (self.n_rows + 7) // 8
        self._store = np.zeros((2, 64, width), dtype=np.uint8)  # [predictions, scored rows] x capacity
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def _preds(self) -> np.ndarray:
        return self._store[0, :self._n]

    @property
    def _rows(self) -> np.ndarray:
        return self._store[1, :self._n]

    def allows(self, pred: np.ndarray, scored: np.ndarray) -> bool:
        """Whether ``pred`` (0/1 per site row) may be answered on the rows in ``scored``."""
        if self.k == 0:
            return True
        on = pred[scored]
        ones = int(on.sum())
        if min(ones, on.size - ones) < self.k:
            return False
        if not len(self):
            return True
        rows = pack(scored)
        differ = np.bitwise_count((self._preds ^ pack(pred)) & self._rows & rows).sum(axis=1) \
            + np.bitwise_count(self._rows ^ rows).sum(axis=1)
        return bool(differ.min() >= self.k)

    def add(self, pred: np.ndarray, scored: np.ndarray) -> None:
        """Remember an answered model."""
        self._append(pack(pred), pack(scored))

    def add_packed(self, pred_hex: str, rows_hex: str) -> None:
        """Restore an answered model from its ledger entry."""
        self._append(np.frombuffer(bytes.fromhex(pred_hex), dtype=np.uint8),
                     np.frombuffer(bytes.fromhex(rows_hex), dtype=np.uint8))

    def _append(self, pred: np.ndarray, rows: np.ndarray) -> None:
        if self._n == self._store.shape[1]:  # grow by doubling: amortised O(1) per answer
            self._store = np.concatenate([self._store, np.zeros_like(self._store)], axis=1)
        self._store[0, self._n], self._store[1, self._n] = pred, rows
        self._n += 1


def packed_hex(bits: np.ndarray) -> str:
    """Predictions or a row mask as hex (how the ledger stores them on the site's disk)."""
    return pack(bits).tobytes().hex()
