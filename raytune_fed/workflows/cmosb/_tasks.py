"""The CMOSB paper's vertical tasks: which party holds which columns, and the train/test split.

* ``synthetic1`` / ``synthetic2`` - columns 0-4 active, 5-9 passive; first 2/3 of the
  (already shuffled) generated rows train, the last third tests;
* ``default_credit`` - the authors' 13 active / 10 passive features (the first 13
  columns to the active party), first 2/3 of the rows train, no shuffling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from raytune_fed.data import load_dataset
from raytune_fed.errors import DatasetError


@dataclass(frozen=True)
class VerticalTask:
    """A dataset split between an active and passive parties, with train and test row ids."""

    name: str
    X: np.ndarray
    y: np.ndarray
    active_features: np.ndarray
    passive_features: tuple[np.ndarray, ...]
    train_rows: np.ndarray
    test_rows: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(np.unique(self.y).size)

    @property
    def binary(self) -> bool:
        return self.n_classes == 2


def _first_two_thirds(name: str, n_active: int) -> VerticalTask:
    ds = load_dataset(name)
    n, d = ds.X.shape
    cut = 2 * n // 3
    return VerticalTask(name, ds.X, ds.y, np.arange(n_active), (np.arange(n_active, d),),
                        np.arange(cut), np.arange(cut, n))


TASKS: dict[str, Callable[[], VerticalTask]] = {
    "synthetic1": lambda: _first_two_thirds("synthetic1", 5),
    "synthetic2": lambda: _first_two_thirds("synthetic2", 5),
    "default_credit": lambda: _first_two_thirds("default_credit", 13),
}


def load_task(name: str) -> VerticalTask:
    """The task ``name``; raises :class:`DatasetError` listing the known ones."""
    if name not in TASKS:
        raise DatasetError(f"unknown CMOSB task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name]()
